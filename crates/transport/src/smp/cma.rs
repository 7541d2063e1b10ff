//! Cross-memory attach: copy to or from another process's private memory with one system call
//! (process_vm_writev / process_vm_readv), the on-host stand-in for a NIC's DMA to user memory.

use activerma_core::{Error, Rank, Result};

fn map_errno(rank: Rank, addr: usize, len: usize, call: &'static str) -> Error {
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ESRCH) => Error::PeerGone { rank, how: "process no longer exists".into() },
        Some(libc::EFAULT) => Error::NotExposed { rank, addr, len },
        _ => Error::Os { call, errno_text: e.to_string() },
    }
}

pub fn write(pid: i32, rank: Rank, addr: usize, src: &[u8]) -> Result<()> {
    let mut done = 0;
    while done < src.len() {
        let local = libc::iovec { iov_base: src[done..].as_ptr() as *mut _, iov_len: src.len() - done };
        let remote = libc::iovec { iov_base: (addr + done) as *mut _, iov_len: src.len() - done };
        // SAFETY: the local iovec covers our own slice; the kernel checks the remote one.
        let n = unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) };
        if n <= 0 {
            return Err(map_errno(rank, addr + done, src.len() - done, "process_vm_writev"));
        }
        done += n as usize;
    }
    Ok(())
}

pub fn read(pid: i32, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
    let mut done = 0;
    let len = dst.len();
    while done < len {
        let local = libc::iovec { iov_base: dst[done..].as_mut_ptr() as *mut _, iov_len: len - done };
        let remote = libc::iovec { iov_base: (addr + done) as *mut _, iov_len: len - done };
        // SAFETY: as above.
        let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
        if n <= 0 {
            return Err(map_errno(rank, addr + done, len - done, "process_vm_readv"));
        }
        done += n as usize;
    }
    Ok(())
}
