//! Gets started with MPI_Rget (`Conduit::rma_get_started`), kept by ticket until the caller
//! tests or waits them complete. A request, not a flush, completes them: MPI can say whether
//! a request is complete without waiting, never whether a flush would be, so a caller can
//! test a get it does not want to wait for yet (ARMCI_Test).

use super::ffi::{check, Request};
use super::rma::{by_chunks, Target};
use crate::StartedGet;
use activerma_core::{Error, Result};
use mpi_sys::*;
use std::collections::HashMap;
use std::os::raw::c_int;

#[derive(Default)]
pub struct StartedGets {
    next: u64,
    /// Each get's requests: one per chunk of at most `rma::CHUNK` bytes.
    live: HashMap<u64, Vec<Request>>,
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
        self.live.insert(self.next, requests);
        Ok(StartedGet(self.next))
    }

    /// Whether every chunk of `get` landed (then its ticket is spent), without waiting.
    pub fn test(&mut self, get: StartedGet) -> Result<bool> {
        let requests = self.live.get_mut(&get.0).ok_or_else(|| unknown(get))?;
        let mut flag: c_int = 0;
        // SAFETY: live requests of ours; MPI frees those it reports complete.
        let tested = check("MPI_Testall", unsafe {
            MPI_Testall(requests.len() as c_int, requests.as_mut_ptr() as *mut MPI_Request, &mut flag, RSMPI_STATUSES_IGNORE)
        });
        if tested.is_err() || flag != 0 {
            self.live.remove(&get.0);
        }
        tested.map(|_| flag != 0)
    }

    /// Waits until every chunk of `get` landed; the ticket is spent either way.
    pub fn wait(&mut self, get: StartedGet) -> Result<()> {
        let mut requests = self.live.remove(&get.0).ok_or_else(|| unknown(get))?;
        wait_all(&mut requests)
    }
}

fn wait_all(requests: &mut [Request]) -> Result<()> {
    // SAFETY: live requests of ours (`Request` is one MPI_Request).
    check("MPI_Waitall", unsafe { MPI_Waitall(requests.len() as c_int, requests.as_mut_ptr() as *mut MPI_Request, RSMPI_STATUSES_IGNORE) })
}

fn unknown(get: StartedGet) -> Error {
    Error::InvalidArgument(format!("no started get {} on the mpi conduit (completed already, or never started)", get.0))
}
