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

/// Pieces of one scatter/gather call: (remote address, local bytes).
pub type IoPieces<'a> = [(usize, &'a [u8])];

/// The most descriptors one process_vm_writev/readv takes on each side (the kernel's IOV_MAX,
/// `UIO_MAXIOV`).
pub const KERNEL_IOV_MAX: usize = 1024;

/// Writes every piece into `pid`'s memory with as few process_vm_writev calls as the kernel
/// allows: up to `max_iov` pieces per call (both sides' descriptor lists), resuming after a
/// partial transfer where it stopped. Returns how many calls it made.
pub fn writev(pid: i32, rank: Rank, pieces: &IoPieces, max_iov: usize) -> Result<usize> {
    scatter_gather(
        rank,
        pieces.iter().map(|&(a, s)| (a, s.as_ptr() as *mut u8, s.len())).collect(),
        max_iov,
        |l, r| {
            // SAFETY: the local iovecs cover our own slices; the kernel checks the remote ones.
            unsafe { libc::process_vm_writev(pid, l.as_ptr(), l.len() as u64, r.as_ptr(), r.len() as u64, 0) }
        },
        "process_vm_writev",
    )
}

/// Reads every piece out of `pid`'s memory into the local buffers (see `writev`).
pub fn readv(pid: i32, rank: Rank, pieces: &mut [(usize, &mut [u8])], max_iov: usize) -> Result<usize> {
    scatter_gather(
        rank,
        pieces.iter_mut().map(|(a, d)| (*a, d.as_mut_ptr(), d.len())).collect(),
        max_iov,
        |l, r| {
            // SAFETY: the local iovecs cover our own mutable slices; the kernel checks the remote ones.
            unsafe { libc::process_vm_readv(pid, l.as_ptr(), l.len() as u64, r.as_ptr(), r.len() as u64, 0) }
        },
        "process_vm_readv",
    )
}

/// The loop both directions share: `pieces` are (remote address, local pointer, length).
fn scatter_gather(
    rank: Rank,
    mut pieces: Vec<(usize, *mut u8, usize)>,
    max_iov: usize,
    call: impl Fn(&[libc::iovec], &[libc::iovec]) -> isize,
    name: &'static str,
) -> Result<usize> {
    pieces.retain(|p| p.2 > 0);
    let max_iov = max_iov.clamp(1, KERNEL_IOV_MAX);
    let (mut next, mut calls) = (0, 0);
    let (mut local, mut remote) = (Vec::with_capacity(max_iov), Vec::with_capacity(max_iov));
    while next < pieces.len() {
        let batch = &pieces[next..(next + max_iov).min(pieces.len())];
        local.clear();
        remote.clear();
        for &(addr, ptr, len) in batch {
            push_merged(&mut local, ptr as usize, len);
            push_merged(&mut remote, addr, len);
        }
        let want: usize = batch.iter().map(|p| p.2).sum();
        let n = call(&local, &remote);
        calls += 1;
        if n <= 0 {
            let (addr, _, len) = batch[0];
            return Err(map_errno(rank, addr, len, name));
        }
        let mut moved = n as usize;
        if moved == want {
            next += batch.len();
            continue;
        }
        // A partial transfer (the kernel stops at a remote page it cannot reach, or moves less
        // than asked): skip what moved, then go on from the piece it stopped in.
        while moved >= pieces[next].2 {
            moved -= pieces[next].2;
            next += 1;
        }
        let p = &mut pieces[next];
        // SAFETY: moved < p.2: still inside the piece's local buffer.
        *p = (p.0 + moved, unsafe { p.1.add(moved) }, p.2 - moved);
    }
    Ok(calls)
}

/// Appends a descriptor, or extends the last one when the bytes follow on. The kernel pins
/// the remote side's pages descriptor by descriptor: 1024 rows of 1 KiB landing one after
/// another in a contiguous buffer cost 1024 pinning walks as they come, 16 as one range.
fn push_merged(list: &mut Vec<libc::iovec>, at: usize, len: usize) {
    if let Some(last) = list.last_mut() {
        if last.iov_base as usize + last.iov_len == at {
            last.iov_len += len;
            return;
        }
    }
    list.push(libc::iovec { iov_base: at as *mut _, iov_len: len });
}
