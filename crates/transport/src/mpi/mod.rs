//! The `mpi` conduit: ranks are MPI processes, possibly on many hosts, started by the
//! cluster's own `mpirun` / `srun`.
//!
//! - bootstrap: MPI (rank, size, non-blocking barrier and allgather, so handlers keep running)
//! - active messages: point-to-point, fragments of up to FRAGMENT bytes (`am.rs`)
//! - one-sided: a dynamic window under a `lock_all` epoch; attaching memory is this conduit's
//!   registration (`rma.rs`)
//! - no memory of another rank is mapped here and no other rank's translation table is
//!   readable: upper layers check segments against their own segment map and send private
//!   memory accesses to the target.
//!
//! All MPI calls are serialized by one lock, so MPI_THREAD_SERIALIZED suffices.

mod am;
mod ffi;
mod rma;

use crate::mapping::{Mapping, HEAP_HINT};
use crate::{AtomicOp, Conduit, FragHeader, PeerStatus, Window};
use activerma_core::clock::Deadline;
use activerma_core::{settings, Error, Rank, Result};
use ffi::Mpi;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub struct MpiConduit {
    rank: Rank,
    size: usize,
    mpi: Arc<Mutex<Mpi>>,
    /// Bumped by every MPI call of ours: the progress thread stays out of the way of a rank
    /// that is calling MPI anyway.
    calls: Arc<std::sync::atomic::AtomicU64>,
    /// Drives MPI's progress engine in the background (see `progress_pump`).
    pump: Mutex<Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>>,
    heap: Mapping,
    table: Mapping,
    heap_bases: Vec<usize>,
    am: am::Endpoints,
    /// Per target: puts not yet remotely complete. MPI does not order a get or an atomic after
    /// them, so those flush first — a get sees this origin's earlier puts, as on one host.
    unflushed: Vec<AtomicBool>,
    finalized: AtomicBool,
    /// See `Conduit::cpu_atomics_coherent`: Open MPI applies one-sided atomics with CPU atomics
    /// at the target (and its osc/rdma crashes on an atomic to oneself over shared memory);
    /// MPICH runs them in software that a CPU atomic does not take part in.
    cpu_atomics_coherent: bool,
    /// One poller at a time, from taking fragments to the end of their handlers: fragments of
    /// one message must be handled in order.
    poll_lock: AtomicBool,
    timeout_s: f64,
}

impl MpiConduit {
    /// Initializes MPI and the job: heap, table, window, active-message endpoints.
    pub fn init(heap_size: usize, table_bytes: usize) -> Result<MpiConduit> {
        let mut mpi = Mpi::init()?;
        let (rank, size) = (mpi.rank(), mpi.size());
        let heap = Mapping::anonymous(heap_size, HEAP_HINT)?;
        let table = Mapping::anonymous(table_bytes, 0)?;
        let bases = mpi.allgather_u64(heap.ptr as u64)?;
        let am = am::Endpoints::new(&mut mpi, size)?;
        let mpi = Arc::new(Mutex::new(mpi));
        let calls = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let pump = progress_pump(mpi.clone(), calls.clone(), settings::get_u64(settings::MPI_ASYNC_PROGRESS_US)?)?;
        Ok(MpiConduit {
            rank,
            size,
            heap_bases: bases.into_iter().map(|b| b as usize).collect(),
            mpi,
            calls,
            pump: Mutex::new(pump),
            heap,
            table,
            am,
            unflushed: (0..size).map(|_| AtomicBool::new(false)).collect(),
            finalized: AtomicBool::new(false),
            cpu_atomics_coherent: Mpi::library_version().starts_with("Open MPI"),
            poll_lock: AtomicBool::new(false),
            timeout_s: settings::get_f64(settings::TIMEOUT_S)?,
        })
    }

    fn order_after_puts(&self, mpi: &mut Mpi, rank: Rank) -> Result<()> {
        if self.unflushed[rank].swap(false, Ordering::Relaxed) {
            mpi.flush(Some(rank))?;
        }
        Ok(())
    }

    fn live(&self) -> Result<std::sync::MutexGuard<'_, Mpi>> {
        if self.finalized.load(Ordering::Acquire) {
            return Err(Error::Finalized);
        }
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(self.mpi.lock().unwrap())
    }

    /// Runs `start` once, then tests the request it returns until it completes, releasing the
    /// MPI lock and running `progress` between tests (so handlers run while we wait).
    fn wait_collective(&self, what: &str, progress: &mut dyn FnMut(), mut test: impl FnMut(&mut Mpi) -> Result<bool>) -> Result<()> {
        let deadline = Deadline::after_secs(self.timeout_s);
        let mut backoff = activerma_core::backoff::Backoff::new();
        loop {
            if test(&mut *self.live()?)? {
                return Ok(());
            }
            progress();
            if backoff.snooze() && deadline.expired() {
                return Err(Error::Timeout { what: what.into(), secs: deadline.secs() });
            }
        }
    }
}

impl Conduit for MpiConduit {
    fn name(&self) -> &'static str {
        "mpi"
    }
    fn rank(&self) -> Rank {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }

    fn barrier(&self, progress: &mut dyn FnMut()) -> Result<()> {
        let mut req = self.live()?.ibarrier()?;
        self.wait_collective("a barrier", progress, |m| m.test(&mut req))
    }

    fn allgather(&self, mine: &[u8], progress: &mut dyn FnMut()) -> Result<Vec<Vec<u8>>> {
        let mut lens = vec![0u64; self.size];
        let my_len = mine.len() as u64;
        let mut req = self.live()?.iallgather_u64(&my_len, &mut lens)?;
        self.wait_collective("an allgather", progress, |m| m.test(&mut req))?;
        let total: u64 = lens.iter().sum();
        if total == 0 {
            return Ok(vec![Vec::new(); self.size]); // MPI refuses an allgatherv of nothing
        }
        if total > i32::MAX as u64 {
            return Err(Error::SizeLimit(format!("allgather of {total} bytes in all: at most 2 GiB")));
        }
        let mut out = vec![0u8; total as usize];
        // Counts and displacements must outlive the operation: they live here until it ends.
        let counts: Vec<i32> = lens.iter().map(|&l| l as i32).collect();
        let displs: Vec<i32> = lens.iter().scan(0i32, |off, &l| Some(std::mem::replace(off, *off + l as i32))).collect();
        let mut req = self.live()?.iallgatherv(mine, &mut out, &counts, &displs)?;
        self.wait_collective("an allgather", progress, |m| m.test(&mut req))?;
        let mut parts = Vec::with_capacity(self.size);
        let mut off = 0;
        for l in lens {
            parts.push(out[off..off + l as usize].to_vec());
            off += l as usize;
        }
        Ok(parts)
    }

    fn am_fragment_capacity(&self) -> usize {
        am::FRAGMENT - am::HEADER
    }

    fn am_try_send(&self, dst: Rank, header: FragHeader, payload: &[u8], deliver_at_ns: u64) -> Result<bool> {
        let mut mpi = self.live()?;
        self.am.try_send(&mut mpi, dst, header, payload, deliver_at_ns)
    }

    fn am_poll(&self, budget: usize, f: &mut dyn FnMut(Rank, FragHeader, &[u8])) -> usize {
        if self.poll_lock.swap(true, Ordering::Acquire) {
            return 0; // another thread of this rank is polling
        }
        // Take arrived fragments out under the MPI lock, run handlers without it: a handler
        // may itself send.
        let arrived = match self.live() {
            Ok(mut mpi) => self.am.poll(&mut mpi, budget),
            Err(_) => Vec::new(),
        };
        let n = arrived.len();
        for (src, header, bytes) in arrived {
            f(src, header, &bytes);
        }
        self.poll_lock.store(false, Ordering::Release);
        n
    }

    fn heap_window(&self, rank: Rank) -> Option<Window> {
        (rank == self.rank).then_some(Window { local: self.heap.ptr, remote_base: self.heap.ptr as usize, len: self.heap.len })
    }

    fn heap_base(&self, rank: Rank) -> usize {
        self.heap_bases[rank]
    }

    fn table_window(&self, rank: Rank) -> Option<Window> {
        (rank == self.rank).then_some(Window { local: self.table.ptr, remote_base: 0, len: self.table.len })
    }

    fn register(&self, addr: usize, len: usize) -> Result<()> {
        self.live()?.attach(addr, len)
    }

    fn deregister(&self, addr: usize, _len: usize) -> Result<()> {
        self.live()?.detach(addr)
    }

    fn rma_put(&self, rank: Rank, addr: usize, src: &[u8], complete: bool) -> Result<()> {
        let mut mpi = self.live()?;
        rma::put(&mut mpi, rank, addr, src, complete)?;
        self.unflushed[rank].store(!complete, Ordering::Relaxed);
        Ok(())
    }

    fn rma_get(&self, rank: Rank, addr: usize, dst: &mut [u8]) -> Result<()> {
        let mut mpi = self.live()?;
        self.order_after_puts(&mut mpi, rank)?;
        rma::get(&mut mpi, rank, addr, dst)
    }

    fn rma_atomic(&self, rank: Rank, addr: usize, op: AtomicOp) -> Result<u64> {
        let mut mpi = self.live()?;
        self.order_after_puts(&mut mpi, rank)?;
        rma::atomic(&mut mpi, rank, addr, op)
    }

    fn rma_flush(&self, rank: Option<Rank>) -> Result<()> {
        let mut mpi = self.live()?;
        mpi.flush(rank)?;
        match rank {
            Some(r) => self.unflushed[r].store(false, Ordering::Relaxed),
            None => self.unflushed.iter().for_each(|u| u.store(false, Ordering::Relaxed)),
        }
        Ok(())
    }

    fn cpu_atomics_coherent(&self) -> bool {
        self.cpu_atomics_coherent
    }

    fn rma_fence(&self) -> Result<()> {
        // MPI does not order puts: complete those still pending, target by target.
        let mut mpi = self.live()?;
        for (r, u) in self.unflushed.iter().enumerate() {
            if u.swap(false, Ordering::Relaxed) {
                mpi.flush(Some(r))?;
            }
        }
        Ok(())
    }

    fn cma_write(&self, rank: Rank, _addr: usize, _src: &[u8]) -> Result<()> {
        Err(Error::Unsupported(format!("cross-memory attach to rank {rank}: the mpi conduit reaches private memory through the target")))
    }

    fn cma_read(&self, rank: Rank, _addr: usize, _dst: &mut [u8]) -> Result<()> {
        Err(Error::Unsupported(format!("cross-memory attach to rank {rank}: the mpi conduit reaches private memory through the target")))
    }

    fn wake(&self, _rank: Rank) {
        // No cross-host futex: a sleeping progress thread polls every WAKE_INTERVAL_US.
    }

    fn sleep(&self, timeout_ns: u64, still_idle: &mut dyn FnMut() -> bool) {
        if still_idle() {
            // Short naps: MPI has no wake-up we can wait on without holding the MPI lock.
            std::thread::sleep(std::time::Duration::from_nanos(timeout_ns.min(50_000)));
        }
    }

    fn peer_status(&self, _rank: Rank) -> PeerStatus {
        // MPI reports failed processes by aborting the job (mpirun stops every rank).
        PeerStatus::Running
    }

    fn mark_finalized(&self) {
        if !self.finalized.swap(true, Ordering::AcqRel) {
            if let Some((stop, thread)) = self.pump.lock().unwrap().take() {
                stop.store(true, Ordering::Release);
                let _ = thread.join();
            }
            let mut mpi = self.mpi.lock().unwrap();
            self.am.cancel(&mut mpi);
            if let Err(e) = mpi.finalize() {
                eprintln!("activerma: rank {}: MPI finalize: {e}", self.rank);
            }
        }
    }
}

/// Some MPI libraries (MPICH over UCX among them) complete one-sided operations on a dynamic
/// window only while the *target* calls into MPI. A rank whose code computes, or spins on a
/// flag a put will set, would stall its origins. This thread drives MPI's progress engine
/// every `interval_us` (an `MPI_Iprobe` that matches nothing) — only when the rank made no MPI
/// call of its own since the last wake-up, and only if the MPI lock is free. It runs no
/// active-message handlers: those follow ACTIVERMA_PROGRESS as on one host.
fn progress_pump(
    mpi: Arc<Mutex<Mpi>>,
    calls: Arc<std::sync::atomic::AtomicU64>,
    interval_us: u64,
) -> Result<Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>> {
    if interval_us == 0 {
        return Ok(None);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::Builder::new()
        .name("activerma-mpi-progress".into())
        .spawn(move || {
            let mut seen = calls.load(Ordering::Relaxed);
            while !s.load(Ordering::Acquire) {
                std::thread::sleep(std::time::Duration::from_micros(interval_us));
                let now = calls.load(Ordering::Relaxed);
                if now == seen {
                    if let Ok(mut m) = mpi.try_lock() {
                        m.poke();
                    }
                }
                seen = now;
            }
        })
        .map_err(|e| Error::Os { call: "spawn the MPI progress thread", errno_text: e.to_string() })?;
    Ok(Some((stop, thread)))
}
