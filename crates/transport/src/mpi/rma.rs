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

pub fn put(m: &mut Mpi, rank: Rank, addr: usize, src: &[u8], complete: bool) -> Result<()> {
    for (i, piece) in src.chunks(CHUNK).enumerate() {
        let disp = (addr + i * CHUNK) as MPI_Aint;
        // SAFETY: `src` stays valid until the flush or flush_local below.
        check("MPI_Put", unsafe {
            MPI_Put(
                piece.as_ptr() as *const _,
                piece.len() as c_int,
                RSMPI_UINT8_T,
                rank as c_int,
                disp,
                piece.len() as c_int,
                RSMPI_UINT8_T,
                m.win,
            )
        })?;
    }
    if complete {
        m.flush(Some(rank))
    } else {
        m.flush_local(rank)
    }
}

pub fn get(m: &mut Mpi, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
    for (i, piece) in dst.chunks_mut(CHUNK).enumerate() {
        let disp = (addr + i * CHUNK) as MPI_Aint;
        // SAFETY: `dst` is ours and filled by the flush below.
        check("MPI_Get", unsafe {
            MPI_Get(
                piece.as_mut_ptr() as *mut _,
                piece.len() as c_int,
                RSMPI_UINT8_T,
                rank as c_int,
                disp,
                piece.len() as c_int,
                RSMPI_UINT8_T,
                m.win,
            )
        })?;
    }
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
