//! Active-message fragments over MPI point-to-point. Each fragment is one message with tag
//! TAG: [deliver_at u64][am header 2 × u64][payload]. Sends are non-blocking and keep their
//! buffer until MPI is done with it; at most SEND_WINDOW are in flight (back-pressure beyond).
//! RECEIVES receives are kept posted; they are consumed strictly in posting order, which keeps
//! each sender's messages in order (MPI matches receives in posting order).

use super::ffi::{check, Mpi, Request};
use crate::inbox::NotYetDue;
use crate::FragHeader;
use activerma_core::{Rank, Result};
use mpi_sys::*;
use std::collections::VecDeque;
use std::os::raw::c_int;
use std::sync::Mutex;

pub const FRAGMENT: usize = 64 * 1024;
pub const HEADER: usize = 24;
const TAG: c_int = 0x5a7a;
const SEND_WINDOW: usize = 256;
const RECEIVES: usize = 16;

struct Posted {
    req: Request,
    buf: Vec<u8>,
}

struct State {
    sends: VecDeque<(Request, Vec<u8>)>,
    recvs: VecDeque<Posted>,
    /// Arrived but not yet due (modelled network), or behind one of its sender's that is not:
    /// the shared-memory inboxes' holding pen, so a late sender does not hold up the others.
    early: NotYetDue,
}

pub struct Endpoints {
    state: Mutex<State>,
}

fn post(m: &mut Mpi) -> Result<Posted> {
    let mut buf = vec![0u8; FRAGMENT];
    // SAFETY: the buffer is kept with the request until it completes or is cancelled.
    unsafe {
        let mut r: MPI_Request = std::mem::zeroed();
        check("MPI_Irecv", MPI_Irecv(buf.as_mut_ptr() as *mut _, FRAGMENT as c_int, RSMPI_UINT8_T, RSMPI_ANY_SOURCE, TAG, m.comm, &mut r))?;
        Ok(Posted { req: Request(r), buf })
    }
}

impl Endpoints {
    pub fn new(m: &mut Mpi, _size: usize) -> Result<Endpoints> {
        let recvs = (0..RECEIVES).map(|_| post(m)).collect::<Result<VecDeque<_>>>()?;
        Ok(Endpoints { state: Mutex::new(State { sends: VecDeque::new(), recvs, early: NotYetDue::default() }) })
    }

    fn reap_sends(m: &mut Mpi, st: &mut State) -> Result<()> {
        while let Some((req, _)) = st.sends.front_mut() {
            if !m.test(req)? {
                break;
            }
            st.sends.pop_front();
        }
        Ok(())
    }

    pub fn try_send(&self, m: &mut Mpi, dst: Rank, header: FragHeader, payload: &[u8], deliver_at: u64) -> Result<bool> {
        let mut st = self.state.lock().unwrap();
        Self::reap_sends(m, &mut st)?;
        if st.sends.len() >= SEND_WINDOW {
            return Ok(false);
        }
        let mut buf = Vec::with_capacity(HEADER + payload.len());
        buf.extend_from_slice(&deliver_at.to_le_bytes());
        buf.extend_from_slice(&header[0].to_le_bytes());
        buf.extend_from_slice(&header[1].to_le_bytes());
        buf.extend_from_slice(payload);
        // SAFETY: `buf` moves into the queue with its request and lives until MPI is done.
        unsafe {
            let mut r: MPI_Request = std::mem::zeroed();
            check("MPI_Isend", MPI_Isend(buf.as_ptr() as *const _, buf.len() as c_int, RSMPI_UINT8_T, dst as c_int, TAG, m.comm, &mut r))?;
            st.sends.push_back((Request(r), buf));
        }
        Ok(true)
    }

    /// Fragments that arrived (and are due), oldest first.
    pub fn poll(&self, m: &mut Mpi, budget: usize) -> Vec<(Rank, FragHeader, Vec<u8>)> {
        let mut st = self.state.lock().unwrap();
        let _ = Self::reap_sends(m, &mut st);
        let mut out = Vec::new();
        let now = activerma_core::clock::now_ns();
        st.early.take_due(now, budget, &mut |src, _, _, am, payload| out.push((src as Rank, am, payload)));
        while out.len() < budget {
            let Some(front) = st.recvs.front_mut() else { break };
            let mut flag: c_int = 0;
            // SAFETY: MPI_Status is plain data filled by MPI_Test.
            let mut status: MPI_Status = unsafe { std::mem::zeroed() };
            // SAFETY: a live receive of ours.
            if unsafe { MPI_Test(&mut front.req.0, &mut flag, &mut status) } != MPI_SUCCESS as c_int || flag == 0 {
                break;
            }
            let mut count: c_int = 0;
            // SAFETY: status of a completed receive.
            unsafe { MPI_Get_count(&status, RSMPI_UINT8_T, &mut count) };
            let mut done = st.recvs.pop_front().unwrap();
            match post(m) {
                Ok(p) => st.recvs.push_back(p),
                Err(e) => eprintln!("activerma: cannot post an MPI receive: {e}"),
            }
            done.buf.truncate(count.max(0) as usize);
            if done.buf.len() < HEADER {
                continue;
            }
            let word = |i: usize| u64::from_le_bytes(done.buf[i..i + 8].try_into().unwrap());
            let (at, header) = (word(0), [word(8), word(16)]);
            let payload = done.buf.split_off(HEADER);
            let src = status.MPI_SOURCE as Rank;
            if at > now || st.early.holds(src as u32) {
                st.early.hold_owned(src as u32, 0, at, header, payload);
            } else {
                out.push((src, header, payload));
            }
        }
        out
    }

    /// Withdraws the posted receives before MPI is finalized.
    pub fn cancel(&self, m: &mut Mpi) {
        let mut st = self.state.lock().unwrap();
        for p in st.recvs.iter_mut() {
            // SAFETY: cancelling and completing our own receives.
            unsafe {
                MPI_Cancel(&mut p.req.0);
                MPI_Wait(&mut p.req.0, RSMPI_STATUS_IGNORE);
            }
        }
        st.recvs.clear();
        while !st.sends.is_empty() {
            if Self::reap_sends(m, &mut st).is_err() {
                break;
            }
        }
    }
}
