//! Gets started with MPI_Rget (`Conduit::rma_get_started`), kept by ticket until the caller
//! tests or waits them complete. A request, not a flush, completes them: MPI can say whether
//! a request is complete without waiting, never whether a flush would be, so a caller can
//! test a get it does not want to wait for yet (ARMCI_Test). Except a list's: MPICH 4.0.2
//! completes the request of an MPI_Rget whose target side is a derived datatype before the
//! data is there (it lands at the next flush of the target; bench/mpi_probes/rget_datatype.c
//! shows it), so a list's get is also flushed once its request completed.

use super::ffi::{check, Request};
use super::rma::{by_chunks, with_hindexed, Target};
use crate::StartedGet;
use activerma_core::{Error, Result};
use mpi_sys::*;
use std::collections::HashMap;
use std::os::raw::c_int;

#[derive(Default)]
pub struct StartedGets {
    next: u64,
    live: HashMap<u64, Started>,
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
    /// Starts the MPI_Rgets of `len` bytes at `t` into `dst`.
    ///
    /// # Safety
    /// `dst` is writable for `len` bytes and nothing else touches it until `test` said true or
    /// `wait` returned.
    pub unsafe fn start(&mut self, t: Target, dst: *mut u8, len: usize) -> Result<StartedGet> {
        let mut requests = Vec::with_capacity(1);
        let started = by_chunks(
            t.disp,
            len,
            |off, disp, n| {
                // SAFETY: the caller's contract; the request is kept until it completed.
                let mut r: MPI_Request = unsafe { std::mem::zeroed() };
                let rc =
                    unsafe { MPI_Rget(dst.add(off) as *mut _, n, RSMPI_UINT8_T, t.rank as c_int, disp, n, RSMPI_UINT8_T, t.win, &mut r) };
                if rc == 0 {
                    requests.push(Request(r));
                }
                rc
            },
            "MPI_Rget",
        );
        if let Err(e) = started {
            // Chunks already started still write `dst`: they finish before the error returns.
            let _ = wait_all(&mut requests);
            return Err(e);
        }
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
        let base = local.iter().map(|l| l.0 as usize).min().unwrap_or(0);
        let offsets: Vec<(usize, usize)> = local.iter().map(|&(at, len)| (at as usize - base, len)).collect();
        // SAFETY: a handle MPI fills in before it is read.
        let mut r: MPI_Request = unsafe { std::mem::zeroed() };
        with_hindexed(disps, |target| {
            with_hindexed(&offsets, |origin| {
                // SAFETY: the caller's contract; the datatypes may be freed once the call
                // returns (MPI keeps what the pending get needs), the request is kept.
                check("MPI_Rget", unsafe { MPI_Rget(base as *mut _, 1, origin, rank as c_int, 0, 1, target, win, &mut r) })
            })
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

fn wait_all(requests: &mut [Request]) -> Result<()> {
    // SAFETY: live requests of ours (`Request` is one MPI_Request).
    check("MPI_Waitall", unsafe { MPI_Waitall(requests.len() as c_int, requests.as_mut_ptr() as *mut MPI_Request, RSMPI_STATUSES_IGNORE) })
}

fn unknown(get: StartedGet) -> Error {
    Error::InvalidArgument(format!("no started get {} on the mpi conduit (completed already, or never started)", get.0))
}
