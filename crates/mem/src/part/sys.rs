//! The userfaultfd ABI (linux/userfaultfd.h). The `libc` crate has the syscall number but not
//! these structs and ioctl numbers; they are written out here rather than pulling in the
//! `userfaultfd` crate, whose nix/bindgen dependencies weigh more than these forty lines.

use std::mem::size_of;

pub const UFFD_API: u64 = 0xAA;
/// Only user-mode faults are delivered as events. With `UFFD_FEATURE_SIGBUS` no event is
/// delivered at all, so this flag changes nothing for PART — but since Linux 5.11 it is what
/// lets a process without CAP_SYS_PTRACE create a userfaultfd when
/// vm.unprivileged_userfaultfd is 0.
pub const UFFD_USER_MODE_ONLY: libc::c_int = 1;
/// A fault in a registered range is not queued for a handler: it fails at once (SIGBUS for a
/// CPU access, EFAULT / a short count for process_vm_writev/readv). This is the NACK.
pub const UFFD_FEATURE_SIGBUS: u64 = 1 << 7;
/// UFFDIO_MOVE is available (Linux >= 6.8): a page is moved, not copied, into a missing page.
pub const UFFD_FEATURE_MOVE: u64 = 1 << 16;
pub const UFFDIO_REGISTER_MODE_MISSING: u64 = 1;
pub const UFFDIO_MOVE_MODE_DONTWAKE: u64 = 1;
/// Nobody sleeps on a SIGBUS-mode range, so skip the wake-up walk.
pub const UFFDIO_COPY_MODE_DONTWAKE: u64 = 1;

#[repr(C)]
pub struct UffdioApi {
    pub api: u64,
    pub features: u64,
    pub ioctls: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct UffdioRange {
    pub start: u64,
    pub len: u64,
}

#[repr(C)]
pub struct UffdioRegister {
    pub range: UffdioRange,
    pub mode: u64,
    pub ioctls: u64,
}

#[repr(C)]
pub struct UffdioCopy {
    pub dst: u64,
    pub src: u64,
    pub len: u64,
    pub mode: u64,
    /// Out: bytes copied, or -errno when nothing was copied.
    pub copy: i64,
}

#[repr(C)]
pub struct UffdioMove {
    pub dst: u64,
    pub src: u64,
    pub len: u64,
    pub mode: u64,
    /// Out: bytes moved, or -errno when nothing was moved.
    pub moved: i64,
}

// The generic _IOC encoding (x86, arm64, riscv); powerpc/mips/sparc encode differently.
#[cfg(not(any(target_arch = "x86_64", target_arch = "x86", target_arch = "aarch64", target_arch = "riscv64")))]
compile_error!("part/sys.rs: add this architecture's _IOC encoding");

const fn ioc(dir: u64, nr: u64, size: usize) -> libc::c_ulong {
    ((dir << 30) | ((size as u64) << 16) | (UFFD_API << 8) | nr) as libc::c_ulong
}

pub const UFFDIO_API: libc::c_ulong = ioc(3, 0x3F, size_of::<UffdioApi>());
pub const UFFDIO_REGISTER: libc::c_ulong = ioc(3, 0x00, size_of::<UffdioRegister>());
pub const UFFDIO_UNREGISTER: libc::c_ulong = ioc(2, 0x01, size_of::<UffdioRange>());
pub const UFFDIO_COPY: libc::c_ulong = ioc(3, 0x03, size_of::<UffdioCopy>());
pub const UFFDIO_MOVE: libc::c_ulong = ioc(3, 0x05, size_of::<UffdioMove>());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_ioctl_numbers_match_the_kernel_header() {
        // Values from <linux/userfaultfd.h> on x86_64.
        assert_eq!(UFFDIO_API, 0xC018_AA3F);
        assert_eq!(UFFDIO_REGISTER, 0xC020_AA00);
        assert_eq!(UFFDIO_UNREGISTER, 0x8010_AA01);
        assert_eq!(UFFDIO_COPY, 0xC028_AA03);
        assert_eq!(UFFDIO_MOVE, 0xC028_AA05);
    }
}
