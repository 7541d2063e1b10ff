//! One-sided operations at a `Target`: a window and a displacement in it (the conduit picks
//! the heap window or the dynamic one). Counts are `int` in MPI, so transfers are split into
//! chunks of at most 1 GiB. A put without `complete` lets the caller reuse its buffer at once:
//! up to BOUNCE_MAX bytes it is put from a copy kept until the next flush (so a window of small
//! puts overlaps on the wire; over TCP, completing each one locally made 64 KiB put bandwidth
//! 0.69-0.76x plain MPI's), larger ones are completed locally before returning.

use super::ffi::{check, replace_op, Mpi};
use crate::nest::Nest;
use crate::rma_calls::Call;
use crate::{AtomicOp, Element, Width};
use activerma_core::{Rank, Result};
use mpi_sys::*;
use std::os::raw::c_int;

/// Where an access lands: the window, the target rank and the byte displacement there.
#[derive(Clone, Copy)]
pub struct Target {
    pub win: MPI_Win,
    pub rank: Rank,
    pub disp: usize,
}

const CHUNK: usize = 1 << 30;
/// Largest implicit put sent from a copy: the copy costs a memcpy, which beyond this size
/// stops being small next to the transfer on a fast network (over TCP here, sending 1 MiB puts
/// from copies too made 1 MiB windows slower: 770-825 vs 850-1220 MB/s).
const BOUNCE_MAX: usize = 64 * 1024;
/// Bytes of copies kept at most; beyond it, everything kept is flushed first.
const BOUNCE_BUDGET: usize = 16 << 20;

/// Calls `op(offset, disp, count)` for each chunk of `len` bytes at displacement `addr`.
pub(super) fn by_chunks(addr: usize, len: usize, mut op: impl FnMut(usize, MPI_Aint, c_int) -> c_int, call: &'static str) -> Result<()> {
    let mut off = 0;
    while off < len {
        let n = (len - off).min(CHUNK);
        check(call, op(off, (addr + off) as MPI_Aint, n as c_int))?;
        off += n;
    }
    Ok(())
}

pub fn put(m: &mut Mpi, t: Target, src: &[u8], complete: bool) -> Result<()> {
    // By the call crate::rma_calls chose (or is measuring: timed until the flush completing it).
    let (call, sample) = m.put_calls.call(src.len());
    m.puts_since_flush.issued(src.len(), call, t.rank, sample);
    if !complete && src.len() <= BOUNCE_MAX {
        let copy = m.bounced.copy(src);
        // The copy's heap bytes do not move when the Vec is kept below.
        put_by(t, &copy, call)?;
        return m.keep_bounced(t.win, t.rank, copy, BOUNCE_BUDGET);
    }
    put_by(t, src, call)?;
    if complete {
        m.flush(t.win, Some(t.rank))
    } else {
        m.flush_local(t.win, t.rank)
    }
}

/// Starts the puts of `src` at `t` by `call` (see `put_from` and `replace_from`).
fn put_by(t: Target, src: &[u8], call: Call) -> Result<()> {
    match call {
        Call::Native => put_from(t, src),
        Call::Accumulate => replace_from(t, src),
    }
}

/// Starts the MPI_Puts of `src` (completed by a later flush or flush_local of `t`'s window).
fn put_from(t: Target, src: &[u8]) -> Result<()> {
    let Target { win, rank, disp: addr } = t;
    // SAFETY: `src` stays valid until the caller completes the puts (flush or flush_local), or
    // it is a copy kept until a flush.
    by_chunks(
        addr,
        src.len(),
        |off, disp, n| unsafe { MPI_Put(src[off..].as_ptr() as *const _, n, RSMPI_UINT8_T, rank as c_int, disp, n, RSMPI_UINT8_T, win) },
        "MPI_Put",
    )
}

/// `put_from` as MPI_Accumulate(MPI_REPLACE) of bytes: the same data movement (see rma_calls).
fn replace_from(t: Target, src: &[u8]) -> Result<()> {
    let Target { win, rank, disp: addr } = t;
    // SAFETY: a predefined datatype handle, constant after MPI_Init.
    let (bytes, replace) = (unsafe { RSMPI_UINT8_T }, replace_op());
    // SAFETY: `src` stays valid until the caller completes the accumulates (as `put_from`).
    by_chunks(
        addr,
        src.len(),
        |off, disp, n| unsafe { MPI_Accumulate(src[off..].as_ptr() as *const _, n, bytes, rank as c_int, disp, n, bytes, replace, win) },
        "MPI_Accumulate",
    )
}

/// MPI_Gets of `dst.len()` bytes at `t` into `dst`, complete on return (a flush of `t`'s
/// window and rank).
pub fn get(m: &mut Mpi, t: Target, dst: &mut [u8]) -> Result<()> {
    let Target { win, rank, disp: addr } = t;
    let at = dst.as_mut_ptr();
    // SAFETY: `dst` is ours, borrowed until the flush below filled it.
    by_chunks(
        addr,
        dst.len(),
        |off, disp, n| unsafe { MPI_Get(at.add(off) as *mut _, n, RSMPI_UINT8_T, rank as c_int, disp, n, RSMPI_UINT8_T, win) },
        "MPI_Get",
    )?;
    m.flush(win, Some(rank))
}

/// MPI_Accumulate(MPI_SUM) of `src`, whole elements of `elem`, at `t`, in chunks whose element
/// counts fit an `int`; complete at the target on return.
pub fn accumulate(m: &mut Mpi, t: Target, elem: Element, src: &[u8]) -> Result<()> {
    let (ty, size) = (element_datatype(elem), elem.bytes() as c_int);
    // SAFETY: `src` stays valid until the flush below completes the operations; CHUNK is a
    // multiple of every element size, so each chunk holds whole elements.
    by_chunks(
        t.disp,
        src.len(),
        |off, disp, n| unsafe {
            MPI_Accumulate(src[off..].as_ptr() as *const _, n / size, ty, t.rank as c_int, disp, n / size, ty, RSMPI_SUM, t.win)
        },
        "MPI_Accumulate",
    )?;
    m.flush(t.win, Some(t.rank))
}

/// One MPI_Accumulate(MPI_SUM) of `packed` (the pieces' elements back to back) into the pieces
/// at `disps` (displacement, bytes: whole elements), whose target side is one hindexed datatype
/// of `elem` (see `put_list`). Complete at the target on return.
pub fn accumulate_list(m: &mut Mpi, win: MPI_Win, rank: Rank, elem: Element, disps: &[(usize, usize)], packed: &[u8]) -> Result<()> {
    let ty = element_datatype(elem);
    let count = (packed.len() / elem.bytes()) as c_int;
    with_hindexed_of(disps, ty, elem.bytes(), |target| {
        // SAFETY: `packed` holds every piece's elements and outlives the flush below.
        check("MPI_Accumulate", unsafe {
            MPI_Accumulate(packed.as_ptr() as *const _, count, ty, rank as c_int, 0, 1, target, RSMPI_SUM, win)
        })
    })?;
    m.flush(win, Some(rank))
}

fn element_datatype(elem: Element) -> MPI_Datatype {
    // SAFETY: the MPI library's predefined datatype handles, constant after MPI_Init.
    unsafe {
        match elem {
            Element::I32 => RSMPI_INT32_T,
            Element::I64 => RSMPI_INT64_T,
            Element::F32 => RSMPI_FLOAT,
            Element::F64 => RSMPI_DOUBLE,
        }
    }
}

/// One MPI_Put of the local pieces `from` (address, bytes) to the pieces at `disps` (each a
/// displacement in `win` and a length; the same bytes in the same order): a datatype on each
/// side, so the library reads the bytes where they are and moves the whole list as one
/// operation. Complete at the target on return.
pub fn put_list(m: &mut Mpi, win: MPI_Win, rank: Rank, disps: &[(usize, usize)], from: &[(usize, usize)]) -> Result<()> {
    with_list_types(disps, from, |base, origin, target| {
        // SAFETY: every local piece is readable and outlives the flush below.
        check("MPI_Put", unsafe { MPI_Put(base as *const _, 1, origin, rank as c_int, 0, 1, target, win) })
    })?;
    m.flush(win, Some(rank))
}

/// One MPI_Get of the pieces at `disps` into the local pieces `into` (address, bytes; as
/// `put_list`), straight into place. Complete on return.
pub fn get_list(m: &mut Mpi, win: MPI_Win, rank: Rank, disps: &[(usize, usize)], into: &[(usize, usize)]) -> Result<()> {
    with_list_types(disps, into, |base, origin, target| {
        // SAFETY: every local piece is writable, ours, and filled by the flush below.
        check("MPI_Get", unsafe { MPI_Get(base as *mut _, 1, origin, rank as c_int, 0, 1, target, win) })
    })?;
    m.flush(win, Some(rank))
}

/// Runs `f(base, origin, target)` with the datatypes of a list on both sides: `target` of the
/// pieces at `disps`, `origin` of the local pieces (address, bytes) relative to `base`, their
/// lowest address.
pub(super) fn with_list_types(
    disps: &[(usize, usize)],
    local: &[(usize, usize)],
    f: impl FnOnce(usize, MPI_Datatype, MPI_Datatype) -> Result<()>,
) -> Result<()> {
    let base = local.iter().map(|l| l.0).min().unwrap_or(0);
    let offsets: Vec<(usize, usize)> = local.iter().map(|&(at, len)| (at - base, len)).collect();
    with_hindexed(disps, |target| with_hindexed(&offsets, |origin| f(base, origin, target)))
}

/// Runs `f` with a committed datatype of the bytes at `disps` (displacement, bytes), freed
/// afterwards (MPI keeps what pending operations need of it): nested vectors when the pieces
/// have a regular shape (`Nest`), else an hindexed datatype of one entry per piece.
fn with_hindexed(disps: &[(usize, usize)], f: impl FnOnce(MPI_Datatype) -> Result<()>) -> Result<()> {
    // SAFETY: a predefined datatype handle, constant after MPI_Init.
    with_hindexed_of(disps, unsafe { RSMPI_UINT8_T }, 1, f)
}

/// `with_hindexed` over elements of `ty` (`size` bytes each; every piece holds whole elements).
fn with_hindexed_of(disps: &[(usize, usize)], ty_of: MPI_Datatype, size: usize, f: impl FnOnce(MPI_Datatype) -> Result<()>) -> Result<()> {
    let mut ty = match Nest::of(disps) {
        Some(nest) => nested_type(&nest, ty_of, size)?,
        None => indexed_type(disps, ty_of, size)?,
    };
    // SAFETY: `ty` was just created.
    let committed = check("MPI_Type_commit", unsafe { MPI_Type_commit(&mut ty) });
    let r = committed.and_then(|()| f(ty));
    // SAFETY: our own datatype, freed once.
    unsafe { MPI_Type_free(&mut ty) };
    r
}

/// One hindexed entry per piece.
fn indexed_type(disps: &[(usize, usize)], ty_of: MPI_Datatype, size: usize) -> Result<MPI_Datatype> {
    let lens: Vec<c_int> = disps.iter().map(|d| (d.1 / size) as c_int).collect();
    let offs: Vec<MPI_Aint> = disps.iter().map(|d| d.0 as MPI_Aint).collect();
    // SAFETY: a handle MPI fills in; an all-zero value is never read before that.
    let mut ty: MPI_Datatype = unsafe { std::mem::zeroed() };
    // SAFETY: both arrays hold `disps.len()` entries and live across the call.
    check("MPI_Type_create_hindexed", unsafe {
        MPI_Type_create_hindexed(lens.len() as c_int, lens.as_ptr(), offs.as_ptr(), ty_of, &mut ty)
    })?;
    Ok(ty)
}

/// `nest` as hvectors inside one another (innermost first), placed at its first byte by a
/// one-entry hindexed datatype, so that the result reads as `indexed_type` would.
fn nested_type(nest: &Nest, ty_of: MPI_Datatype, size: usize) -> Result<MPI_Datatype> {
    let (mut inner, mut block, mut made) = (ty_of, (nest.len / size) as c_int, Vec::new());
    // SAFETY: a handle MPI fills in; an all-zero value is never read before that.
    let mut placed: MPI_Datatype = unsafe { std::mem::zeroed() };
    let built = (|| {
        for &(count, stride) in &nest.levels {
            // SAFETY: a handle MPI fills in; an all-zero value is never read before that.
            let mut ty: MPI_Datatype = unsafe { std::mem::zeroed() };
            // SAFETY: `inner` is a predefined or just-created datatype.
            check("MPI_Type_create_hvector", unsafe {
                MPI_Type_create_hvector(count as c_int, block, stride as MPI_Aint, inner, &mut ty)
            })?;
            made.push(ty);
            (inner, block) = (ty, 1);
        }
        let at = nest.first as MPI_Aint;
        // SAFETY: one entry, whose arrays live across the call.
        check("MPI_Type_create_hindexed", unsafe { MPI_Type_create_hindexed(1, &block, &at, inner, &mut placed) })
    })();
    // The levels may be freed once the type built on them exists (MPI keeps what it needs).
    for mut ty in made {
        // SAFETY: our own datatypes, freed once.
        unsafe { MPI_Type_free(&mut ty) };
    }
    built.map(|()| placed)
}

/// The MPI datatype of a word of `width`. Values travel in a u64 whose first bytes are the
/// word (little-endian, as x86-64 and every platform this builds for).
fn datatype(width: Width) -> MPI_Datatype {
    // SAFETY: the MPI library's predefined datatype handles, constant after MPI_Init.
    unsafe {
        match width {
            Width::W32 => RSMPI_UINT32_T,
            Width::W64 => RSMPI_UINT64_T,
        }
    }
}
const _: () = assert!(cfg!(target_endian = "little"), "atomics pass 32-bit words in the low bytes of a u64");

fn fetch_add(m: &mut Mpi, t: Target, v: u64, width: Width) -> Result<u64> {
    let mut old = 0u64;
    // SAFETY: one word in and out, completed by the flush.
    check("MPI_Fetch_and_op", unsafe {
        MPI_Fetch_and_op(
            &v as *const u64 as *const _,
            &mut old as *mut u64 as *mut _,
            datatype(width),
            t.rank as c_int,
            t.disp as MPI_Aint,
            RSMPI_SUM,
            t.win,
        )
    })?;
    m.flush(t.win, Some(t.rank))?;
    Ok(old)
}

fn compare_swap(m: &mut Mpi, t: Target, expected: u64, new: u64, width: Width) -> Result<u64> {
    let mut old = 0u64;
    // SAFETY: as above.
    check("MPI_Compare_and_swap", unsafe {
        MPI_Compare_and_swap(
            &new as *const u64 as *const _,
            &expected as *const u64 as *const _,
            &mut old as *mut u64 as *mut _,
            datatype(width),
            t.rank as c_int,
            t.disp as MPI_Aint,
            t.win,
        )
    })?;
    m.flush(t.win, Some(t.rank))?;
    Ok(old)
}

pub fn atomic(m: &mut Mpi, t: Target, op: AtomicOp, width: Width) -> Result<u64> {
    let mask = if width == Width::W32 { u32::MAX as u64 } else { u64::MAX };
    match op {
        // A fetch is an atomic add of zero (the bindings expose no MPI_NO_OP).
        AtomicOp::Fetch => fetch_add(m, t, 0, width),
        AtomicOp::FetchAdd(v) => fetch_add(m, t, v & mask, width),
        AtomicOp::CompareSwap { expected, new } => compare_swap(m, t, expected & mask, new & mask, width),
        // No MPI_REPLACE in the bindings: swap by compare-and-swap until it sticks.
        AtomicOp::Swap(v) => {
            let mut seen = fetch_add(m, t, 0, width)?;
            loop {
                let old = compare_swap(m, t, seen, v & mask, width)?;
                if old == seen {
                    return Ok(old);
                }
                seen = old;
            }
        }
    }
}
