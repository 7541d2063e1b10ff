//! Cross-memory attach: copy to or from another process's private memory with one system call
//! (process_vm_writev / process_vm_readv), the on-host stand-in for a NIC's DMA to user memory.

use activerma_core::{Error, Rank, Result};

/// Where the Yama security module keeps who may attach to whom (absent without Yama).
const PTRACE_SCOPE: &str = "/proc/sys/kernel/yama/ptrace_scope";

/// Lets the job's other processes attach to this one's memory. The kernel allows
/// process_vm_readv/writev only where it would allow ptrace, and Yama's ptrace_scope 1 (the
/// default of Ubuntu and others) allows that to ancestors only, never to sibling ranks; this
/// process names every process of its user as allowed instead (PR_SET_PTRACER_ANY), as MPI
/// libraries' cross-memory-attach transports do. Where Yama is absent the call fails with
/// EINVAL and nothing was needed; under scope 2 or 3 it cannot help (see `map_errno`).
/// Every rank calls it when it joins the job, before any peer reaches its private memory.
pub fn allow_peer_attach() {
    // SAFETY: prctl with integer arguments only; it changes this process's Yama exception.
    unsafe { libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0) };
}

fn map_errno(rank: Rank, addr: usize, len: usize, call: &'static str) -> Error {
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ESRCH) => Error::PeerGone { rank, how: "process no longer exists".into() },
        Some(libc::EFAULT) => Error::NotExposed { rank, addr, len },
        Some(libc::EPERM) => not_permitted(rank, call, std::fs::read_to_string(PTRACE_SCOPE).ok()),
        _ => Error::Os { call, errno_text: e.to_string() },
    }
}

/// The error of a cross-memory attach the kernel refused, with what to do about it; `scope`
/// is the content of PTRACE_SCOPE (None without Yama).
fn not_permitted(rank: Rank, call: &'static str, scope: Option<String>) -> Error {
    let why = match scope.as_deref().map(str::trim) {
        Some(s @ ("2" | "3")) => format!(
            "kernel.yama.ptrace_scope is {s}, which forbids it to processes without CAP_SYS_PTRACE (scope 0 or 1 allows it: sysctl kernel.yama.ptrace_scope=1)"
        ),
        Some(s) => format!("kernel.yama.ptrace_scope is {s}; rank {rank} may not have joined through activerma's init, which allows it"),
        None => "the kernel's ptrace access check failed (another user's process, or a container without ptrace rights)".to_string(),
    };
    Error::Unsupported(format!(
        "{call} to rank {rank}: operation not permitted: {why}. Private memory of another process on this host is reached by cross-memory attach; segments (arma_seg_alloc, ARMCI_Malloc) are not and need no permission"
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_attach_says_what_would_allow_it() {
        let cases = [
            (Some("3\n"), "sysctl kernel.yama.ptrace_scope=1"),
            (Some("2"), "without CAP_SYS_PTRACE"),
            (Some("1\n"), "activerma's init"),
            (None, "ptrace access check"),
        ];
        for (scope, want) in cases {
            let e = not_permitted(2, "process_vm_readv", scope.map(String::from));
            let text = e.to_string();
            assert!(matches!(e, Error::Unsupported(_)), "{text}");
            assert!(text.contains("process_vm_readv to rank 2: operation not permitted"), "{text}");
            assert!(text.contains(want) && text.contains("segments"), "{text}");
        }
    }

    #[test]
    fn allowing_peers_keeps_attach_working() {
        allow_peer_attach();
        let src: Vec<u8> = (0..200u8).collect();
        let mut dst = vec![0u8; src.len()];
        read(std::process::id() as i32, 0, src.as_ptr() as usize, &mut dst).unwrap();
        assert_eq!(src, dst);
    }
}
