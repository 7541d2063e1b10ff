//! A raw shared mapping for the physical limits: a memfd (the same kind of memory as a
//! segment) that rank 0 creates and rank 1 opens through /proc/<pid>/fd, so that both
//! processes touch the same cache lines with plain loads and stores, bypassing activerma.
//!
//! ```text
//! offset 0     flag  (rank 0 writes, rank 1 polls)      } one cache line
//! offset 8     len   (bytes of data that come with it)  }
//! offset 256   ack   (rank 1 writes, rank 0 polls)
//! offset 512   ping-pong word (both write and poll it: one cache line for the whole round trip)
//! offset 1024  a word only rank 0 touches (local atomic limit)
//! offset 4096  data  (up to DATA_MAX bytes)
//! ```

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

const LEN: usize = 64 * 1024;
const FLAG: usize = 0;
const DLEN: usize = 8;
const ACK: usize = 256;
const PINGPONG: usize = 512;
const LOCAL: usize = 1024;
const DATA: usize = 4096;
pub const DATA_MAX: usize = LEN - DATA;

pub struct SharedPage {
    _fd: OwnedFd,
    ptr: *mut u8,
}

fn os_err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

impl SharedPage {
    fn map(fd: OwnedFd) -> Result<SharedPage, String> {
        // SAFETY: mapping a file of LEN bytes that we hold open.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), LEN, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if p == libc::MAP_FAILED {
            return Err(os_err("mmap of the benchmark's shared page"));
        }
        let page = SharedPage { _fd: fd, ptr: p as *mut u8 };
        // Fault every page in now, not while timing (reads map the shared pages here too).
        for off in (0..LEN).step_by(4096) {
            // SAFETY: inside the mapping.
            unsafe { std::ptr::read_volatile(page.ptr.add(off)) };
        }
        Ok(page)
    }

    /// Rank 0: creates the memory; returns it and the descriptor number to publish.
    pub fn create() -> Result<(SharedPage, i32), String> {
        // SAFETY: plain syscalls on a fresh descriptor we own.
        unsafe {
            let fd = libc::memfd_create(c"activerma-bench".as_ptr(), libc::MFD_CLOEXEC);
            if fd < 0 {
                return Err(os_err("memfd_create"));
            }
            let owned = OwnedFd::from_raw_fd(fd);
            if libc::ftruncate(fd, LEN as libc::off_t) != 0 {
                return Err(os_err("ftruncate"));
            }
            let page = Self::map(owned)?;
            std::ptr::write_bytes(page.ptr, 0, LEN);
            Ok((page, fd))
        }
    }

    /// Rank 1: opens rank 0's memory through /proc.
    pub fn open(pid: u32, fd: i32) -> Result<SharedPage, String> {
        let path = std::ffi::CString::new(format!("/proc/{pid}/fd/{fd}")).unwrap();
        // SAFETY: opening a path; the descriptor is ours.
        let raw = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(os_err(&format!("open {}", path.to_string_lossy())));
        }
        // SAFETY: a fresh descriptor we own.
        Self::map(unsafe { OwnedFd::from_raw_fd(raw) })
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        // SAFETY: 8-aligned offsets inside the mapping, which lives as long as `self`.
        unsafe { &*(self.ptr.add(off) as *const AtomicU64) }
    }
    pub fn flag(&self) -> &AtomicU64 {
        self.word(FLAG)
    }
    pub fn len(&self) -> &AtomicU64 {
        self.word(DLEN)
    }
    pub fn ack(&self) -> &AtomicU64 {
        self.word(ACK)
    }
    pub fn pingpong(&self) -> &AtomicU64 {
        self.word(PINGPONG)
    }
    pub fn local_word(&self) -> &AtomicU64 {
        self.word(LOCAL)
    }
    pub fn data(&self) -> *mut u8 {
        // SAFETY: inside the mapping.
        unsafe { self.ptr.add(DATA) }
    }

    /// Rank 1's side of the one-line hand-off: whenever the ping-pong word is odd (rank 0's
    /// ping), make it even (the pong) in the same cache line.
    pub fn pong(&self, keep_going: impl Fn() -> bool) {
        let word = self.pingpong();
        loop {
            let v = word.load(Ordering::Acquire);
            if v & 1 == 1 {
                word.store(v + 1, Ordering::Release);
            } else if !keep_going() {
                return;
            }
        }
    }

    /// Rank 1's side of the hand-off: answer every new flag (after copying the data that came
    /// with it out) with an ack, until `keep_going()` turns false while no flag is pending.
    /// A tight loop of plain loads (no `pause`): this measures the hardware, not a runtime.
    pub fn echo(&self, buf: &mut [u8], keep_going: impl Fn() -> bool) {
        let (flag, len, ack) = (self.flag(), self.len(), self.ack());
        let mut last = ack.load(Ordering::Relaxed);
        loop {
            let f = flag.load(Ordering::Acquire);
            if f != last {
                let n = (len.load(Ordering::Relaxed) as usize).min(DATA_MAX).min(buf.len());
                if n > 0 {
                    // SAFETY: n bytes inside the data area and inside `buf`.
                    unsafe { std::ptr::copy_nonoverlapping(self.data(), buf.as_mut_ptr(), n) };
                    std::hint::black_box(&mut *buf);
                }
                ack.store(f, Ordering::Release);
                last = f;
            } else if !keep_going() {
                return;
            }
        }
    }
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { libc::munmap(self.ptr as *mut _, LEN) };
    }
}

unsafe impl Send for SharedPage {}
unsafe impl Sync for SharedPage {}
