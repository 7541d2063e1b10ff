//! Memory mappings owned by a conduit: a memfd shared by the job (smp) or anonymous memory of
//! our own (mpi). Both first try a fixed hint address, so that every rank gets the same
//! addresses when it is free, then let the kernel choose. Unmapped on drop.

use activerma_core::{Error, Result};
use std::os::fd::{AsRawFd, OwnedFd};

/// Where every rank tries to map its symmetric heap, so that segment addresses are the same
/// everywhere (a range the kernel does not use for anything else by default).
pub const HEAP_HINT: usize = 0x6000_0000_0000;

pub struct Mapping {
    pub ptr: *mut u8,
    pub len: usize,
}

unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps all of `fd` shared, at `hint` if that is free (0: anywhere).
    pub fn shared(fd: &OwnedFd, len: usize, hint: usize) -> Result<Mapping> {
        Self::map(libc::MAP_SHARED, fd.as_raw_fd(), len, hint, "mmap (job shared memory)")
    }

    /// Maps `len` bytes of private anonymous memory, at `hint` if that is free (0: anywhere).
    pub fn anonymous(len: usize, hint: usize) -> Result<Mapping> {
        Self::map(libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, len, hint, "mmap (symmetric heap)")
    }

    /// Bytes of the mapping that are resident: for a shared file, the file's pages in memory,
    /// whichever process touched them (mincore reports the page cache).
    pub fn resident_bytes(&self) -> Result<usize> {
        resident_in(self.ptr as usize, self.len)
    }

    fn map(kind: libc::c_int, fd: libc::c_int, len: usize, hint: usize, what: &'static str) -> Result<Mapping> {
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let flags = kind | libc::MAP_NORESERVE;
        // SAFETY: MAP_FIXED_NOREPLACE never clobbers an existing mapping; the result is ours.
        unsafe {
            if hint != 0 {
                let p = libc::mmap(hint as *mut _, len, prot, flags | libc::MAP_FIXED_NOREPLACE, fd, 0);
                if p != libc::MAP_FAILED {
                    if p as usize == hint {
                        return Ok(Mapping { ptr: p as *mut u8, len });
                    }
                    libc::munmap(p, len); // old kernels treat the flag as a hint only
                }
            }
            let p = libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0);
            if p == libc::MAP_FAILED {
                return Err(Error::last_os(what));
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

/// Memory one process makes and other processes of the same host map later, when they first
/// need it (a rank's access-log arena): a memfd, which the others open as
/// `/proc/<pid>/fd/<fd>`. That open passes for a process of the same user (the kernel's ptrace
/// *read* check, which Yama's ptrace_scope does not restrict), so it needs no launcher and no
/// name in /dev/shm: nothing is left behind however the job ends. Unmapped on drop; the
/// memory lives while any process maps it.
pub struct SharedFile {
    pub map: Mapping,
    /// Kept open by the maker only (the others' opens go through it); a mapper needs none,
    /// which keeps a rank that maps many peers' files from running out of descriptors.
    fd: Option<OwnedFd>,
}

impl SharedFile {
    /// A new file of `len` bytes (zeroed), mapped here.
    pub fn create(name: &str, len: usize) -> Result<SharedFile> {
        let fd = crate::smp::files::memfd(name, len as u64, false)?;
        Ok(SharedFile { map: Mapping::shared(&fd, len, 0)?, fd: Some(fd) })
    }

    /// Maps the file process `pid` made (`fd` is its descriptor there), which must hold at
    /// least `len` bytes.
    pub fn open(pid: u32, fd: u32, len: usize) -> Result<SharedFile> {
        let path = format!("/proc/{pid}/fd/{fd}");
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).map_err(|e| Error::Os {
            call: "open a peer's shared memory",
            errno_text: format!("{path}: {e} (the process must be alive and run as the same user)"),
        })?;
        let size = file.metadata().map_err(|e| Error::Os { call: "fstat a peer's shared memory", errno_text: e.to_string() })?.len();
        if size < len as u64 {
            return Err(Error::InvalidArgument(format!("{path} holds {size} bytes, not the {len} its owner published")));
        }
        Ok(SharedFile { map: Mapping::shared(&OwnedFd::from(file), len, 0)?, fd: None })
    }

    /// The file's descriptor in the process that made it (what `open` needs from the others).
    pub fn fd(&self) -> Option<std::os::fd::RawFd> {
        self.fd.as_ref().map(|f| f.as_raw_fd())
    }
}

/// Bytes of `[ptr, ptr+len)` (a mapped range starting on a page boundary) that are in memory.
pub fn resident_in(ptr: usize, len: usize) -> Result<usize> {
    let page = activerma_core::page::page_size();
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: mincore only reads the mapping's page status into one byte per page.
    if unsafe { libc::mincore(ptr as *mut _, len, vec.as_mut_ptr()) } != 0 {
        return Err(Error::last_os("mincore (resident memory of a mapping)"));
    }
    Ok(vec.iter().filter(|&&b| b & 1 != 0).count() * page)
}

/// Ok when the page holding `addr` is mapped in this process, else an error naming `what`
/// with this process's mappings around it. For memory another party placed (an MPI library's
/// shared window): a hole there would otherwise be a segfault at the first load, with nothing
/// said about who mapped what. (Such a hole once came from us: the owner views unmapped
/// MPICH's window where its random address fell in their range; see mpi/owner_views.rs.)
pub fn ensure_mapped(addr: usize, what: &str) -> Result<()> {
    let page = activerma_core::page::page_size();
    // mincore answers ENOMEM for a page that is not mapped.
    let Err(e) = resident_in(addr / page * page, 1) else { return Ok(()) };
    let errno_text =
        format!("{what} at {addr:#x} is not mapped in this process ({e}); mappings within 8 GiB: {}", maps_near(addr, 8 << 30));
    Err(Error::Os { call: "mincore", errno_text })
}

/// Lines of /proc/self/maps that start or end within `span` bytes of `addr`.
fn maps_near(addr: usize, span: usize) -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let near = maps.lines().filter(|line| {
        let range = line.split_whitespace().next().unwrap_or("");
        let mut ends = range.split('-').filter_map(|x| usize::from_str_radix(x, 16).ok());
        let (Some(start), Some(end)) = (ends.next(), ends.next()) else { return false };
        end + span > addr && start < addr.saturating_add(span)
    });
    near.collect::<Vec<_>>().join("; ")
}

/// Zeroes `[ptr, ptr+len)` of a shared file mapping (an MPI shared window) without making it
/// resident: the whole pages inside are punched out of the file (MADV_REMOVE: they read as
/// zeros and take no memory until written), the partial pages at either end are written.
/// Where the kernel refuses (not a shared file mapping), every byte is written.
///
/// # Safety
/// `[ptr, ptr+len)` must be mapped, writable, and ours to clear (only pages wholly inside it
/// are punched).
pub unsafe fn zero_shared(ptr: usize, len: usize) {
    let page = activerma_core::page::page_size();
    let (start, end) = (ptr.next_multiple_of(page), (ptr + len) / page * page);
    // SAFETY: the caller's contract; MADV_REMOVE only drops the whole pages in [start, end).
    unsafe {
        if end > start && libc::madvise(start as *mut _, end - start, libc::MADV_REMOVE) == 0 {
            std::ptr::write_bytes(ptr as *mut u8, 0, start - ptr);
            std::ptr::write_bytes(end as *mut u8, 0, ptr + len - end);
        } else {
            std::ptr::write_bytes(ptr as *mut u8, 0, len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ensure_mapped_names_a_hole_and_its_neighbours() {
        let m = Mapping::anonymous(3 * activerma_core::page::page_size(), 0).unwrap();
        assert!(ensure_mapped(m.ptr as usize, "the test's mapping").is_ok());
        let hole = m.ptr as usize + activerma_core::page::page_size();
        // SAFETY: the middle page of our own mapping.
        assert_eq!(unsafe { libc::munmap(hole as *mut _, activerma_core::page::page_size()) }, 0);
        let e = ensure_mapped(hole + 8, "the test's middle page").unwrap_err().to_string();
        assert!(e.contains("the test's middle page") && e.contains(&format!("{:x}", m.ptr as usize)), "{e}");
    }
}
