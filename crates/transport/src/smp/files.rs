//! The job's shared memory: two memfds (control and heaps). A memfd has no name in any file
//! system, so nobody outside the job can open it and nothing is ever left behind: the memory is
//! freed when the last process of the job closes it, however the job ends.

use activerma_core::{Error, Result};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

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
