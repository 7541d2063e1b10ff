//! userfaultfd: missing-page faults handed to a thread of the process, and write-protection
//! (asynchronous: resolved by the kernel, remembered for `PageScan`).

use crate::{ior, iowr, os_error};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const UFFD_API: u64 = 0xAA;
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;
const UFFD_PAGEFAULT_FLAG_WRITE: u64 = 1 << 0;
const UFFDIO_COPY_MODE_WP: u64 = 1 << 1;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}
#[repr(C)]
struct UffdioRange {
    start: u64,
    len: u64,
}
#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}
#[repr(C)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}
#[repr(C)]
struct UffdioCopy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}
/// `struct uffd_msg` as far as a page fault fills it (32 bytes in all).
#[repr(C)]
#[derive(Default)]
struct UffdMsg {
    event: u8,
    _reserved: [u8; 7],
    flags: u64,
    address: u64,
    _feat: u64,
}

const UFFDIO_API: libc::c_ulong = iowr(0xAA, 0x3F, std::mem::size_of::<UffdioApi>());
const UFFDIO_REGISTER: libc::c_ulong = iowr(0xAA, 0x00, std::mem::size_of::<UffdioRegister>());
const UFFDIO_WAKE: libc::c_ulong = ior(0xAA, 0x02, std::mem::size_of::<UffdioRange>());
const UFFDIO_COPY: libc::c_ulong = iowr(0xAA, 0x03, std::mem::size_of::<UffdioCopy>());
const UFFDIO_WRITEPROTECT: libc::c_ulong = iowr(0xAA, 0x06, std::mem::size_of::<UffdioWriteprotect>());

/// A missing-page fault: the address a thread touched (not page-aligned), and whether it was
/// a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub addr: usize,
    pub write: bool,
}

/// A userfaultfd of this process.
pub struct Uffd {
    fd: OwnedFd,
    user_mode_only: bool,
}

impl Uffd {
    /// Write-protection in the asynchronous mode (Linux 6.7+): the first store to a protected
    /// page un-protects it in the kernel's fault path and marks it written.
    pub const WP_ASYNC: u64 = 1 << 15;
    /// Write-protection of shared memory (segments) too.
    pub const WP_SHMEM: u64 = 1 << 12;
    /// Pages never touched count as protected (so they are caught too).
    pub const WP_UNPOPULATED: u64 = 1 << 13;
    /// Registration modes.
    pub const MISSING: u64 = 1 << 0;
    pub const WP: u64 = 1 << 1;

    /// A userfaultfd with `features` (the constants above). It also takes faults of the
    /// kernel's own accesses (a system call that reads a registered page) where the process may
    /// (privileged, or `vm.unprivileged_userfaultfd = 1`); elsewhere only the program's
    /// (`user_mode_only` says which: then a system call touching a missing page fails with
    /// EFAULT). Fails where the kernel refuses the features.
    pub fn open(features: u64) -> io::Result<Uffd> {
        let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
        let mut user_mode_only = false;
        // SAFETY: a plain system call; the descriptor is owned below.
        let mut fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
        if fd < 0 {
            user_mode_only = true;
            // SAFETY: as above.
            fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags | UFFD_USER_MODE_ONLY) };
        }
        if fd < 0 {
            return Err(os_error("userfaultfd"));
        }
        // SAFETY: a fresh descriptor of ours.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let mut api = UffdioApi { api: UFFD_API, features, ioctls: 0 };
        // SAFETY: the struct matches the kernel's layout.
        if unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_API, &mut api) } != 0 {
            return Err(os_error("userfaultfd features (asynchronous write-protection needs Linux 6.7 or later)"));
        }
        Ok(Uffd { fd, user_mode_only })
    }

    /// Whether faults of the kernel's own accesses are refused (see `open`).
    pub fn user_mode_only(&self) -> bool {
        self.user_mode_only
    }

    /// Registers `[addr, addr+len)` (page-aligned) for `modes` (MISSING, WP or both).
    pub fn register(&self, addr: usize, len: usize, modes: u64) -> io::Result<()> {
        let mut reg = UffdioRegister { range: UffdioRange { start: addr as u64, len: len as u64 }, mode: modes, ioctls: 0 };
        // SAFETY: layouts match the kernel's; the range is the caller's.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_REGISTER, &mut reg) } != 0 {
            return Err(os_error("userfaultfd register"));
        }
        Ok(())
    }

    /// Write-protects `[addr, addr+len)`, registered for WP.
    pub fn write_protect(&self, addr: usize, len: usize) -> io::Result<()> {
        let mut wp = UffdioWriteprotect { range: UffdioRange { start: addr as u64, len: len as u64 }, mode: 1 };
        // SAFETY: as above.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_WRITEPROTECT, &mut wp) } != 0 {
            return Err(os_error("userfaultfd write-protect"));
        }
        Ok(())
    }

    /// Waits up to `timeout_ms` for a missing-page fault; None if none came.
    pub fn next_fault(&self, timeout_ms: i32) -> io::Result<Option<Fault>> {
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd of ours.
        if unsafe { libc::poll(&mut pfd, 1, timeout_ms) } <= 0 {
            return Ok(None);
        }
        let mut msg = UffdMsg::default();
        let size = std::mem::size_of::<UffdMsg>();
        // SAFETY: reads at most one message into `msg`, which has its size.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), &mut msg as *mut UffdMsg as *mut libc::c_void, size) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock { Ok(None) } else { Err(e) };
        }
        if n as usize != size || msg.event != UFFD_EVENT_PAGEFAULT {
            return Ok(None); // no other events were asked for
        }
        Ok(Some(Fault { addr: msg.address as usize, write: msg.flags & UFFD_PAGEFAULT_FLAG_WRITE != 0 }))
    }

    /// Installs `src` as the missing page(s) at `dst` (page-aligned, registered MISSING) and
    /// wakes the threads waiting there; `write_protected`: the page comes in protected (its
    /// first store is then seen as a write). A page that is already there is left as it is.
    ///
    /// # Safety
    /// `src` must be readable for `len` bytes.
    pub unsafe fn copy(&self, dst: usize, src: *const u8, len: usize, write_protected: bool) -> io::Result<()> {
        let mode = if write_protected { UFFDIO_COPY_MODE_WP } else { 0 };
        loop {
            let mut c = UffdioCopy { dst: dst as u64, src: src as u64, len: len as u64, mode, copy: 0 };
            // SAFETY: layouts match the kernel's; the caller vouches for `src`.
            if unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_COPY, &mut c) } == 0 {
                return Ok(());
            }
            match io::Error::last_os_error().raw_os_error() {
                // The mapping changed under the copy: try again.
                Some(libc::EAGAIN) => continue,
                // Somebody installed it first (it may have been faulted twice): wake the waiters.
                Some(libc::EEXIST) => return self.wake(dst, len),
                _ => return Err(os_error("userfaultfd copy")),
            }
        }
    }

    /// Wakes threads waiting on a fault in `[addr, addr+len)`.
    pub fn wake(&self, addr: usize, len: usize) -> io::Result<()> {
        let mut r = UffdioRange { start: addr as u64, len: len as u64 };
        // SAFETY: layouts match the kernel's.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_WAKE, &mut r) } != 0 {
            return Err(os_error("userfaultfd wake"));
        }
        Ok(())
    }
}

impl AsRawFd for Uffd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
