//! The job's shared memory: two memfds (control and heaps). A memfd has no name in any file
//! system, so nobody outside the job can open it and nothing is ever left behind: the memory is
//! freed when the last process of the job closes it, however the job ends.

use activerma_core::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub fn memfd(name: &str, len: u64, inheritable: bool) -> Result<OwnedFd> {
    let cname = std::ffi::CString::new(name).expect("no NUL in memfd name");
    let flags = if inheritable { 0 } else { libc::MFD_CLOEXEC };
    // SAFETY: plain syscalls on a fresh fd we own.
    unsafe {
        let fd = libc::memfd_create(cname.as_ptr(), flags);
        if fd < 0 {
            return Err(Error::last_os("memfd_create"));
        }
        let owned = OwnedFd::from_raw_fd(fd);
        if libc::ftruncate(fd, len as libc::off_t) != 0 {
            return Err(Error::last_os("ftruncate (job shared memory)"));
        }
        Ok(owned)
    }
}

pub fn file_len(fd: RawFd) -> Result<u64> {
    // SAFETY: fstat writes into st.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return Err(Error::last_os("fstat (job shared memory)"));
        }
        Ok(st.st_size as u64)
    }
}

/// A shared mapping of a whole memfd, unmapped on drop.
pub struct Mapping {
    pub ptr: *mut u8,
    pub len: usize,
}

unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `fd` shared; tries `hint` first (so that all ranks get the same addresses), then
    /// lets the kernel choose.
    pub fn map(fd: &OwnedFd, len: usize, hint: usize) -> Result<Mapping> {
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: mapping a memfd we hold; MAP_FIXED_NOREPLACE never clobbers existing maps.
        unsafe {
            if hint != 0 {
                let p = libc::mmap(
                    hint as *mut _,
                    len,
                    prot,
                    libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE | libc::MAP_NORESERVE,
                    fd.as_raw_fd(),
                    0,
                );
                if p != libc::MAP_FAILED {
                    if p as usize == hint {
                        return Ok(Mapping { ptr: p as *mut u8, len });
                    }
                    libc::munmap(p, len); // old kernels treat the flag as a hint only
                }
            }
            let p = libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED | libc::MAP_NORESERVE, fd.as_raw_fd(), 0);
            if p == libc::MAP_FAILED {
                return Err(Error::last_os("mmap (job shared memory)"));
            }
            Ok(Mapping { ptr: p as *mut u8, len })
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: we own this mapping.
        unsafe { libc::munmap(self.ptr as *mut _, self.len) };
    }
}
