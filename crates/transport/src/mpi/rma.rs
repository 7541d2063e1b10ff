//! One-sided operations through the dynamic window: the target's address is the displacement
//! (dynamic windows use absolute addresses). Counts are `int` in MPI, so transfers are split
//! into chunks of at most 1 GiB. A put without `complete` is completed locally before it
//! returns (the caller may reuse its buffer at once) and remotely by a later flush.

use super::ffi::{check, Mpi};
use crate::AtomicOp;
use activerma_core::{Rank, Result};
use mpi_sys::*;
use std::os::raw::c_int;

const CHUNK: usize = 1 << 30;

/// Calls `op(offset, disp, count)` for each chunk of `len` bytes at target address `addr`.
fn by_chunks(addr: usize, len: usize, mut op: impl FnMut(usize, MPI_Aint, c_int) -> c_int, call: &'static str) -> Result<()> {
    let mut off = 0;
    while off < len {
        let n = (len - off).min(CHUNK);
        check(call, op(off, (addr + off) as MPI_Aint, n as c_int))?;
        off += n;
    }
    Ok(())
}

pub fn put(m: &mut Mpi, rank: Rank, addr: usize, src: &[u8], complete: bool) -> Result<()> {
    let win = m.win;
    // SAFETY: `src` stays valid until the flush or flush_local below.
    by_chunks(
        addr,
        src.len(),
        |off, disp, n| unsafe { MPI_Put(src[off..].as_ptr() as *const _, n, RSMPI_UINT8_T, rank as c_int, disp, n, RSMPI_UINT8_T, win) },
        "MPI_Put",
    )?;
    if complete {
        m.flush(Some(rank))
    } else {
        m.flush_local(rank)
    }
}

pub fn get(m: &mut Mpi, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
    let win = m.win;
    let base = dst.as_mut_ptr();
    // SAFETY: `dst` is ours and filled by the flush below.
    by_chunks(
        addr,
        dst.len(),
        |off, disp, n| unsafe { MPI_Get(base.add(off) as *mut _, n, RSMPI_UINT8_T, rank as c_int, disp, n, RSMPI_UINT8_T, win) },
        "MPI_Get",
    )?;
    m.flush(Some(rank))
}

fn fetch_add(m: &mut Mpi, rank: Rank, addr: usize, v: u64) -> Result<u64> {
    let mut old = 0u64;
    // SAFETY: one u64 in and out, completed by the flush.
    check("MPI_Fetch_and_op", unsafe {
        MPI_Fetch_and_op(
            &v as *const u64 as *const _,
            &mut old as *mut u64 as *mut _,
            RSMPI_UINT64_T,
            rank as c_int,
            addr as MPI_Aint,
            RSMPI_SUM,
            m.win,
        )
    })?;
    m.flush(Some(rank))?;
    Ok(old)
}

fn compare_swap(m: &mut Mpi, rank: Rank, addr: usize, expected: u64, new: u64) -> Result<u64> {
    let mut old = 0u64;
    // SAFETY: as above.
    check("MPI_Compare_and_swap", unsafe {
        MPI_Compare_and_swap(
            &new as *const u64 as *const _,
            &expected as *const u64 as *const _,
            &mut old as *mut u64 as *mut _,
            RSMPI_UINT64_T,
            rank as c_int,
            addr as MPI_Aint,
            m.win,
        )
    })?;
    m.flush(Some(rank))?;
    Ok(old)
}

pub fn atomic(m: &mut Mpi, rank: Rank, addr: usize, op: AtomicOp) -> Result<u64> {
    match op {
        // A fetch is an atomic add of zero (the bindings expose no MPI_NO_OP).
        AtomicOp::Fetch => fetch_add(m, rank, addr, 0),
        AtomicOp::FetchAdd(v) => fetch_add(m, rank, addr, v),
        AtomicOp::CompareSwap { expected, new } => compare_swap(m, rank, addr, expected, new),
        // No MPI_REPLACE in the bindings: swap by compare-and-swap until it sticks.
        AtomicOp::Swap(v) => {
            let mut seen = fetch_add(m, rank, addr, 0)?;
            loop {
                let old = compare_swap(m, rank, addr, seen, v)?;
                if old == seen {
                    return Ok(old);
                }
                seen = old;
            }
        }
    }
}
