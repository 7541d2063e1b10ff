//! ARMCI_Malloc / ARMCI_Free (collective, sizes may differ per rank) and the local-memory pair.

use crate::errors::{entry, R};
use crate::state::{registry, registry_mut, rt, world, Alloc};
use std::ffi::{c_int, c_void};

/// Allocates one block per rank, `bytes` on this rank (collective); returns every rank's base
/// (0 for a rank that asked for 0 bytes). One segment of the largest size serves everyone:
/// activerma's segments are symmetric, and a rank that asked for less simply owns a prefix
/// (the registry keeps each rank's own size, so accesses past it are refused).
// `long` is 64-bit on the (LP64) Linux targets activerma runs on: armci_size_t passes through.
pub(crate) fn malloc_all(bytes: libc::c_long) -> R<Vec<usize>> {
    let w = world()?;
    let mine = crate::state::nonneg(bytes, "bytes")? as u64;
    let all = w.allgather(&mine.to_le_bytes()).map_err(rt)?;
    let sizes: Vec<usize> = all.iter().map(|b| u64::from_le_bytes(b[..8].try_into().unwrap()) as usize).collect();
    let largest = sizes.iter().copied().max().unwrap_or(0);
    // Rounded up to 8 bytes: a 32-bit Rmw works on the aligned 64-bit word around its int
    // (atomics.rs), which must then lie inside the segment too.
    let seg = if largest > 0 { Some(w.alloc_segment(largest.div_ceil(8) * 8).map_err(rt)?) } else { None };
    let bases: Vec<usize> =
        sizes.iter().enumerate().map(|(r, &s)| if s > 0 { seg.as_ref().map_or(0, |g| g.addr_on(r)) } else { 0 }).collect();
    let mut reg = registry_mut();
    let seq = reg.next_seq;
    reg.next_seq += 1;
    reg.allocs.push(Alloc { seq, seg, bases: bases.clone(), sizes, group: None });
    Ok(bases)
}

/// Frees the allocation whose base on this rank is `ptr` (collective). A rank that allocated
/// 0 bytes passes NULL; the ranks agree on which allocation through its sequence number.
pub(crate) fn free_all(ptr: *mut c_void) -> R {
    let w = world()?;
    let me = w.rank();
    let mine: u64 = if ptr.is_null() {
        u64::MAX
    } else {
        registry()
            .allocs
            .iter()
            .find(|a| a.group.is_none() && a.sizes[me] > 0 && a.bases[me] == ptr as usize)
            .map(|a| a.seq)
            .ok_or_else(|| format!("argument ptr = {ptr:p} is not the base of an ARMCI_Malloc allocation of this rank"))?
    };
    let all = w.allgather(&mine.to_le_bytes()).map_err(rt)?;
    let named: Vec<u64> = all.iter().map(|b| u64::from_le_bytes(b[..8].try_into().unwrap())).filter(|&s| s != u64::MAX).collect();
    let seq = match named.first() {
        Some(&s) => {
            if let Some(o) = named.iter().find(|&&o| o != s) {
                return Err(format!("the ranks free different allocations (numbers {s} and {o}): ARMCI_Free is collective"));
            }
            s
        }
        // Every rank passed NULL: the oldest allocation in which every rank got 0 bytes.
        None => match registry().allocs.iter().find(|a| a.seg.is_none() && a.group.is_none()) {
            Some(a) => a.seq,
            None => return Ok(()),
        },
    };
    let alloc = {
        let mut reg = registry_mut();
        let i = reg.allocs.iter().position(|a| a.seq == seq).ok_or_else(|| format!("allocation number {seq} is not live on this rank"))?;
        if ptr.is_null() && reg.allocs[i].sizes[me] > 0 {
            return Err(format!(
                "argument ptr is NULL but this rank allocated {} bytes in the allocation the others free",
                reg.allocs[i].sizes[me]
            ));
        }
        reg.allocs.remove(i)
    };
    // Segment::free starts with a barrier: nobody still accesses the block.
    match alloc.seg {
        Some(s) => s.free().map_err(rt),
        None => w.barrier().map_err(rt),
    }
}

/// Collective: base_ptrs[i] receives rank i's address of the new block (NULL if rank i asked
/// for 0 bytes).
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Malloc(base_ptrs: *mut *mut c_void, size: libc::c_long) -> c_int {
    entry("ARMCI_Malloc", || {
        // Indexed by the default group's ranks (the job's, unless ARMCI_Group_set_default).
        crate::groups::malloc_into(base_ptrs, size, &crate::groups::default_members()?)
    });
    0
}

/// Collective: frees the block this rank's base `ptr` belongs to.
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Free(ptr: *mut c_void) -> c_int {
    entry("ARMCI_Free", || {
        // Nothing in flight may land in (or read from) memory about to go.
        crate::in_flight::complete_all()?;
        crate::groups::free_matching(ptr)
    });
    0
}

/// Plain local memory; valid as the local buffer of every call. From a page up it starts on a
/// page, as ARMCI_Malloc's blocks do: a copy between buffers whose addresses differ by a few
/// bytes within their cache lines is slower than between aligned ones, and malloc's large
/// blocks start 16 bytes into a page (docs/NOTES.md, issue 16, has the measurement). Given back
/// with ARMCI_Free_local (free).
#[no_mangle]
pub extern "C" fn ARMCI_Malloc_local(size: libc::c_long) -> *mut c_void {
    entry("ARMCI_Malloc_local", || {
        let n = crate::state::nonneg(size, "size")?;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(64) as usize;
        let align = if n >= page { page } else { 16 };
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: posix_memalign of at least one byte (a 0-byte request still gets a unique
        // pointer), with a power-of-two alignment that is a multiple of the pointer size.
        if unsafe { libc::posix_memalign(&mut p, align, n.max(1)) } != 0 || p.is_null() {
            return Err(format!("out of memory allocating {n} bytes"));
        }
        Ok(p)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_Free_local(ptr: *mut c_void) -> c_int {
    libc::free(ptr);
    0
}

/// ARMCI_Malloc on a named memory device (ARMCI-MPI's SICM extension): this runtime has one
/// kind of memory, so every device name gets the ordinary allocation.
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Malloc_memdev(base_ptrs: *mut *mut c_void, size: libc::c_long, _device: *const libc::c_char) -> c_int {
    ARMCI_Malloc(base_ptrs, size)
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_Malloc_group_memdev(
    base_ptrs: *mut *mut c_void,
    size: libc::c_long,
    group: *mut crate::groups::ArmciGroup,
    _device: *const libc::c_char,
) -> c_int {
    crate::groups::ARMCI_Malloc_group(base_ptrs, size, group)
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_Free_memdev(ptr: *mut c_void) -> c_int {
    ARMCI_Free(ptr)
}

/// Accepted and ignored: ARMCI allocations come from the job's segments, whose room is set by
/// ACTIVERMA_SEGMENT_SIZE when the job starts, not by the program.
#[no_mangle]
pub extern "C" fn ARMCI_Set_shm_limit(_limit: libc::c_ulong) {}
