//! Gets started with MPI_Rget (`Conduit::rma_get_started`), kept by ticket until the caller
//! tests or waits them complete. A request, not a flush, completes them: MPI can say whether
//! a request is complete without waiting, never whether a flush would be, so a caller can
//! test a get it does not want to wait for yet (ARMCI_Test). Except a list's: MPICH 4.0.2
//! completes the request of an MPI_Rget whose target side is a derived datatype before the
//! data is there (it lands at the next flush of the target; bench/mpi_probes/rget_datatype.c
//! shows it), so a list's get is also flushed once its request completed.

use super::ffi::{check, no_op, Request};
use super::rma::{by_chunks, with_list_types, Target};
use crate::rma_calls::{Call, Chooser};
use crate::StartedGet;
use activerma_core::{Error, Result};
use mpi_sys::*;
use std::collections::HashMap;
use std::os::raw::c_int;
use std::time::Instant;

#[derive(Default)]
pub struct StartedGets {
    next: u64,
    live: HashMap<u64, Started>,
    /// Which call moves a contiguous get (crate::rma_calls): MPI_Rget or MPI_Rget_accumulate.
    pub calls: Chooser,
}

struct Started {
    /// One per chunk of at most `rma::CHUNK` bytes (a list: one).
    requests: Vec<Request>,
    /// A list's window and target, flushed once the request completed (see above).
    then_flush: Option<(MPI_Win, c_int)>,
}

impl Started {
    /// After the requests completed: the flush a list needs.
    fn finish(&self) -> Result<()> {
        match self.then_flush {
            // SAFETY: a window of ours, in its passive epoch for the job's life.
            Some((win, rank)) => check("MPI_Win_flush", unsafe { MPI_Win_flush(rank, win) }),
            None => Ok(()),
        }
    }
}

impl StartedGets {
    /// Starts the gets of `len` bytes at `t` into `dst`, by the call `calls` chose. While its
    /// size class is still measured, a burst of gets of both calls into `dst` runs first, each
    /// waited for and timed: reading the same bytes again changes nothing, and measuring them
    /// here keeps a program's computing between start and wait out of the samples.
    ///
    /// # Safety
    /// `dst` is writable for `len` bytes and nothing else touches it until `test` said true or
    /// `wait` returned.
    pub unsafe fn start(&mut self, t: Target, dst: *mut u8, len: usize) -> Result<StartedGet> {
        while let (call, true) = self.calls.call(len) {
            let at = Instant::now();
            // SAFETY: the caller's contract; waited for at once.
            let mut requests = unsafe { issue(t, dst, len, call)? };
            wait_all(&mut requests)?;
            self.calls.record(len, call, at.elapsed().as_nanos() as u64);
        }
        // SAFETY: the caller's contract; the requests are kept until they completed.
        let requests = unsafe { issue(t, dst, len, self.calls.call(len).0)? };
        self.next += 1;
        self.live.insert(self.next, Started { requests, then_flush: None });
        Ok(StartedGet(self.next))
    }

    /// Starts one MPI_Rget of the pieces at `disps` in `win` (displacement, bytes) into the
    /// buffers `local` (pointer, bytes; the same bytes in the same order): a hindexed datatype
    /// on each side, so the library moves the list as one operation straight into the
    /// buffers, with nothing packed or copied after (list_target keeps the counts in an int).
    ///
    /// # Safety
    /// Every buffer is writable for its bytes and nothing else touches it until `test` said
    /// true or `wait` returned.
    pub unsafe fn start_list(
        &mut self,
        win: MPI_Win,
        rank: usize,
        disps: &[(usize, usize)],
        local: &[(*mut u8, usize)],
    ) -> Result<StartedGet> {
        let local: Vec<(usize, usize)> = local.iter().map(|&(at, len)| (at as usize, len)).collect();
        // SAFETY: a handle MPI fills in before it is read.
        let mut r: MPI_Request = unsafe { std::mem::zeroed() };
        with_list_types(disps, &local, |base, origin, target| {
            // SAFETY: the caller's contract; the datatypes may be freed once the call returns
            // (MPI keeps what the pending get needs), the request is kept.
            check("MPI_Rget", unsafe { MPI_Rget(base as *mut _, 1, origin, rank as c_int, 0, 1, target, win, &mut r) })
        })?;
        self.next += 1;
        self.live.insert(self.next, Started { requests: vec![Request(r)], then_flush: Some((win, rank as c_int)) });
        Ok(StartedGet(self.next))
    }

    /// Whether every chunk of `get` landed (then its ticket is spent), without waiting.
    pub fn test(&mut self, get: StartedGet) -> Result<bool> {
        let started = self.live.get_mut(&get.0).ok_or_else(|| unknown(get))?;
        let requests = &mut started.requests;
        let mut flag: c_int = 0;
        // SAFETY: live requests of ours; MPI frees those it reports complete.
        let tested = check("MPI_Testall", unsafe {
            MPI_Testall(requests.len() as c_int, requests.as_mut_ptr() as *mut MPI_Request, &mut flag, RSMPI_STATUSES_IGNORE)
        });
        if tested.is_err() || flag != 0 {
            let started = self.live.remove(&get.0).expect("tested above");
            tested?;
            started.finish()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Waits until every chunk of `get` landed; the ticket is spent either way.
    pub fn wait(&mut self, get: StartedGet) -> Result<()> {
        let mut started = self.live.remove(&get.0).ok_or_else(|| unknown(get))?;
        wait_all(&mut started.requests)?;
        started.finish()
    }
}

/// Starts the requests that get `len` bytes at `t` into `dst` by `call`: MPI_Rget, or
/// MPI_Rget_accumulate(MPI_NO_OP), in chunks whose counts fit an `int`. On an error the chunks
/// already started are waited for first (they still write `dst`).
///
/// # Safety
/// `dst` is writable for `len` bytes and untouched until the requests completed.
unsafe fn issue(t: Target, dst: *mut u8, len: usize, call: Call) -> Result<Vec<Request>> {
    let mut requests = Vec::with_capacity(1);
    let started = by_chunks(
        t.disp,
        len,
        |off, disp, n| {
            // SAFETY: the caller's contract; a handle MPI fills in before it is read.
            let mut r: MPI_Request = unsafe { std::mem::zeroed() };
            let (at, bytes, rank) = (unsafe { dst.add(off) } as *mut _, unsafe { RSMPI_UINT8_T }, t.rank as c_int);
            let rc = match call {
                // SAFETY: as above.
                Call::Native => unsafe { MPI_Rget(at, n, bytes, rank, disp, n, bytes, t.win, &mut r) },
                // SAFETY: as above; MPI_NO_OP reads no origin data.
                Call::Accumulate => unsafe {
                    MPI_Rget_accumulate(std::ptr::null(), 0, bytes, at, n, bytes, rank, disp, n, bytes, no_op(), t.win, &mut r)
                },
            };
            if rc == 0 {
                requests.push(Request(r));
            }
            rc
        },
        if call == Call::Native { "MPI_Rget" } else { "MPI_Rget_accumulate" },
    );
    if let Err(e) = started {
        let _ = wait_all(&mut requests);
        return Err(e);
    }
    Ok(requests)
}

fn wait_all(requests: &mut [Request]) -> Result<()> {
    // SAFETY: live requests of ours (`Request` is one MPI_Request).
    check("MPI_Waitall", unsafe { MPI_Waitall(requests.len() as c_int, requests.as_mut_ptr() as *mut MPI_Request, RSMPI_STATUSES_IGNORE) })
}

fn unknown(get: StartedGet) -> Error {
    Error::InvalidArgument(format!("no started get {} on the mpi conduit (completed already, or never started)", get.0))
}
