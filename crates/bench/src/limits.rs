//! The physical limits, measured in the same run as the benchmarks (every ratio needs them;
//! `limits` only decides whether their tables are printed):
//!
//! - memcpy bandwidth in rank 0, the fastest of three placements: the buffer puts read from
//!   into a private scratch buffer, into rank 0's own copy of the segment, and back out of it;
//! - the cache-line hand-off between the two processes, bound to the CPUs the ranks run on:
//!   ping-pong on one word (one cache line goes back and forth) and on two words (flag and ack
//!   on their own lines) of a raw shared page, with plain atomic loads and stores; the limit is
//!   the faster of the two (one-way = round trip / 2); and the round trip of "copy data + set a
//!   flag + wait for the ack" with 8 B and 4 KiB of data;
//! - one raw process_vm_writev / process_vm_readv call into rank 1's exposed buffer (the same
//!   buffer the private-memory benchmarks use), bypassing activerma;
//! - a local atomic fetch-add (the floor of an atomic on shared memory nobody else touches).
//!
//! A limit must be a lower bound (if our code beats it, the limit is mis-measured): each is
//! taken as its best batch of three times the usual repetitions (`measure_limit`), and the
//! summary flags any ratio that beats its limit.
//!
//! On the mpi conduit (`Origin::host_limits` false) the hand-off and the raw system calls are
//! not measured: they need both ranks on one host, and there the limit is what the MPI library
//! itself does with the same operation (`bench/compare_mpi_conduit.sh` runs the MPI peers).

use super::osu_tables::{Row, Style};
use super::timing::{measure, measure_limit, Stats};
use super::{BResult, Origin, CMD_ECHO, CMD_PONG, CMD_SERVE};
use std::convert::Infallible;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

/// One raw process_vm_writev (`write`) or process_vm_readv of `size` bytes between our
/// `local` buffer and `remote` in process `pid`.
#[inline]
pub fn raw_cma(write: bool, pid: i32, local: *mut u8, remote: usize, size: usize) -> Result<(), String> {
    let l = libc::iovec { iov_base: local as *mut _, iov_len: size };
    let r = libc::iovec { iov_base: remote as *mut _, iov_len: size };
    // SAFETY: the caller's local buffer holds `size` bytes; the kernel checks the remote range.
    let got = unsafe {
        if write {
            libc::process_vm_writev(pid, &l, 1, &r, 1, 0)
        } else {
            libc::process_vm_readv(pid, &l, 1, &r, 1, 0)
        }
    };
    if got == size as isize {
        return Ok(());
    }
    let call = if write { "process_vm_writev" } else { "process_vm_readv" };
    Err(if got < 0 {
        format!("{call} of {size} bytes failed: {}", std::io::Error::last_os_error())
    } else {
        format!("{call} of {size} bytes moved only {got}")
    })
}

impl Origin<'_> {
    /// Measures every physical limit; `show` prints their tables. Called at the start of the
    /// run and again at its end: a limit is a best case, so the report keeps the better of the
    /// two (`Report::record`), and a machine that speeds up during the run does not turn the
    /// operations measured after the first pass into "faster than the limit".
    pub fn limits(&mut self, show: bool) -> BResult<()> {
        let plan = self.cfg.lat;

        self.report.section(
            "limit: memcpy bandwidth in one process (rank 0; pre-touched buffers, copied over and over)",
            &["what a put to / get from a segment copies; MB/s = 10^6 B/s".into()],
            Style::Bandwidth,
            show,
        );
        for size in self.cfg.memcpy_sizes() {
            let stats = self.memcpy_limit(size)?;
            self.report.row(Row { bench: "limit_memcpy", target: None, size: Some(size), stats, bytes: size, limit_ns: None });
        }

        self.handoff(show)?;

        if !self.host_limits && show {
            self.report.section(
                &format!("limits: cache-line hand-off, raw process_vm_writev / process_vm_readv: n/a on the {} conduit", self.world.conduit_name()),
                &[
                    "they need both ranks on one host, reaching each other's memory through the kernel; the ranks of an MPI job may be on two".into(),
                    "the limits for this conduit are plain MPI_Put / MPI_Get + MPI_Win_flush on the same MPI: bench/compare_mpi_conduit.sh".into(),
                ],
                Style::Note,
                true,
            );
        }
        let pid = self.peer_pid;
        let addr = self.private.addr;
        let calls: &[bool] = if self.host_limits { &[true, false] } else { &[] };
        for &write in calls {
            let (call, bench) = if write { ("process_vm_writev", "limit_cma_write") } else { ("process_vm_readv", "limit_cma_read") };
            self.report.section(
                &format!("limit: one raw {call} call per operation, into rank 1's exposed private buffer (pid {pid})"),
                &["what a put / get to private memory costs without activerma".into()],
                Style::Latency,
                show,
            );
            for size in self.cfg.sizes.clone() {
                let buf = self.local.as_mut_ptr();
                let st = measure_limit(&plan, |n| {
                    for _ in 0..n {
                        raw_cma(write, pid, buf, addr, size)?;
                    }
                    Ok::<(), String>(())
                })?;
                self.report.row(Row { bench, target: None, size: Some(size), stats: st, bytes: 0, limit_ns: None });
            }
        }

        self.report.section(
            "limit: local atomic fetch-add (lock xadd on a cache line nobody else touches)",
            &["the floor of an atomic on a segment word that the target does not touch".into()],
            Style::Latency,
            show,
        );
        let fallback = AtomicU64::new(0);
        let word = self.shm.map_or(&fallback, |s| s.local_word());
        let st = measure_limit::<Infallible>(&plan, |n| {
            for _ in 0..n {
                black_box(word.fetch_add(1, Ordering::SeqCst));
            }
            Ok(())
        })?;
        self.report.row(Row { bench: "limit_atomic_local", target: None, size: Some(8), stats: st, bytes: 0, limit_ns: None });
        Ok(())
    }

    /// Measures memcpy of `size` bytes and records it as the `limit_memcpy` row (the report
    /// keeps the fastest measurement of a limit). A put to a segment copies from `local` into
    /// segment memory, a get the other way; which kind of pages (private, or the segment's
    /// shared file) copies faster differs between machines, so it takes the fastest of three
    /// placements: a slower one would let our own copy "beat" the limit. Returns that fastest.
    pub(crate) fn memcpy_limit(&mut self, size: usize) -> BResult<Stats> {
        let plan = self.cfg.lat;
        let (local, scratch, own) = (self.local.as_mut_ptr(), self.scratch.as_mut_ptr(), self.data.as_ptr());
        assert!(size <= self.local.len() && size <= self.scratch.len());
        let mut placements = vec![(local as *const u8, scratch)];
        if size <= self.data.len() {
            // Into rank 0's own segment copy and back out: the bytes copied back are those
            // just copied in, so `local` keeps its pattern.
            placements.extend([(local as *const u8, own), (own as *const u8, local)]);
        }
        let mut best: Option<Stats> = None;
        for (src, dst) in placements {
            let stats = measure_limit::<Infallible>(&plan, |n| {
                for _ in 0..n {
                    // SAFETY: both buffers hold at least `size` bytes and do not overlap.
                    unsafe { std::ptr::copy_nonoverlapping(black_box(src), black_box(dst), size) };
                }
                Ok(())
            })?;
            self.report.record(Row { bench: "limit_memcpy", target: None, size: Some(size), stats, bytes: size, limit_ns: None });
            best = Some(best.map_or(stats, |b: Stats| if stats.median_ns < b.median_ns { stats } else { b }));
        }
        Ok(best.expect("at least one placement"))
    }

    /// Cache-line hand-off between rank 0 and rank 1 (rank 1 runs `SharedPage::echo`).
    fn handoff(&mut self, show: bool) -> BResult<()> {
        let Some(shm) = self.shm else {
            if self.host_limits {
                eprintln!("activerma bench: no shared page between the ranks: hand-off limits not measured");
            }
            return Ok(());
        };
        let plan = self.cfg.lat;
        self.report.section(
            "limit: cache-line hand-off between the two processes (raw shared memory, plain atomic loads/stores, busy polling)",
            &[
                "one line: rank 0 makes a word odd, rank 1 (polling it) makes it even, rank 0 polls for that: one cache line back and forth".into(),
                "two lines: rank 0 stores a flag word, rank 1 polls it and stores an ack word (other cache line), rank 0 polls that".into(),
                "limit = the faster of the two, best batch of 3x the repetitions (median = min): a lower bound, as the ratios need".into(),
                "Size '-': round trip and one-way (= round trip / 2); Size N: copy N bytes + flag, rank 1 copies them out, ack (round trip)".into(),
            ],
            Style::Latency,
            show,
        );
        self.command(CMD_PONG)?;
        let word = shm.pingpong();
        // Even: rank 1's turn is over. Rank 1 answers an odd ping with the next even value.
        let mut even = word.load(Ordering::Acquire) & !1;
        let one_line = measure_limit::<Infallible>(&plan, |n| {
            for _ in 0..n {
                word.store(even + 1, Ordering::Release);
                even += 2;
                while word.load(Ordering::Acquire) != even {}
            }
            Ok(())
        })?;
        self.command(CMD_ECHO)?;
        let (flag, len, ack) = (shm.flag(), shm.len(), shm.ack());
        let mut seq = flag.load(Ordering::Relaxed);
        len.store(0, Ordering::Relaxed);
        while ack.load(Ordering::Acquire) != seq {}
        let two_lines = measure_limit::<Infallible>(&plan, |n| {
            for _ in 0..n {
                seq += 1;
                flag.store(seq, Ordering::Release);
                while ack.load(Ordering::Acquire) != seq {}
            }
            Ok(())
        })?;
        let rtt = if one_line.median_ns <= two_lines.median_ns { one_line } else { two_lines };
        let mut oneway = rtt;
        oneway.median_ns /= 2.0;
        oneway.min_ns /= 2.0;
        oneway.max_ns /= 2.0;
        self.report.row(Row { bench: "limit_handoff_one_line", target: None, size: None, stats: one_line, bytes: 0, limit_ns: None });
        self.report.row(Row { bench: "limit_handoff_two_lines", target: None, size: None, stats: two_lines, bytes: 0, limit_ns: None });
        self.report.row(Row { bench: "limit_handoff_roundtrip", target: None, size: None, stats: rtt, bytes: 0, limit_ns: None });
        self.report.row(Row { bench: "limit_handoff_oneway", target: None, size: None, stats: oneway, bytes: 0, limit_ns: None });
        for size in [8usize, 4096] {
            let (src, data) = (self.local.as_ptr(), shm.data());
            let st = measure::<Infallible>(&plan, |n| {
                for _ in 0..n {
                    seq += 1;
                    // SAFETY: `size` <= DATA_MAX bytes inside the shared page's data area.
                    unsafe { std::ptr::copy_nonoverlapping(src, data, size) };
                    len.store(size as u64, Ordering::Relaxed);
                    flag.store(seq, Ordering::Release);
                    while ack.load(Ordering::Acquire) != seq {}
                }
                Ok(())
            })?;
            self.report.row(Row { bench: "limit_put_flag_ack", target: None, size: Some(size), stats: st, bytes: 0, limit_ns: None });
        }
        len.store(0, Ordering::Relaxed);
        self.command(CMD_SERVE)?;
        Ok(())
    }
}
