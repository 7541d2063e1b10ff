//! The benchmarks through activerma's public API: put / get latency and bandwidth, atomics and
//! the active-message round trip. The timed loops only call the operation: buffers, remote
//! pointers and slices are prepared outside them, nothing is allocated per operation.

use super::limits::raw_cma;
use super::osu_tables::{Row, Style};
use super::timing::{measure, measure_limit, Stats};
use super::{BResult, Origin, ACK_OFF, ATOMIC_OFF, PING, WINDOW};
use activerma::{AtomicOp, AtomicPath, RemotePtr, Transfer};
use std::convert::Infallible;
use std::hint::black_box;
use std::sync::atomic::Ordering;

const TARGETS: [&str; 2] = ["segment", "private"];
/// Size of the same-bytes check (see `same_bytes`).
const SAME_BYTES_SIZE: usize = 1 << 20;

impl Origin<'_> {
    /// Times blocking transfers of `size` bytes between `self.local` and `at` with the latency
    /// plan: the core's plain put/get, or `put_by`/`get_by` by `protocol`.
    pub(crate) fn time_blocking(&mut self, put: bool, at: RemotePtr, size: usize, protocol: Option<Transfer>) -> BResult<Stats> {
        let (world, plan) = (self.world, self.cfg.lat);
        Ok(if put {
            let src = &self.local[..size];
            measure(&plan, |n| {
                for _ in 0..n {
                    match protocol {
                        None => world.put(at, src)?,
                        Some(p) => drop(world.put_by(p, at, src)?),
                    }
                }
                Ok::<(), activerma::Error>(())
            })?
        } else {
            let dst = &mut self.local[..size];
            measure(&plan, |n| {
                for _ in 0..n {
                    match protocol {
                        None => world.get(at, dst)?,
                        Some(p) => drop(world.get_by(p, at, dst)?),
                    }
                }
                Ok::<(), activerma::Error>(())
            })?
        })
    }

    fn target(&self, target: &str) -> RemotePtr {
        if target == "segment" {
            self.data.remote(1, 0)
        } else {
            self.private
        }
    }

    /// Who runs handlers on rank 1, for the table notes.
    pub(crate) fn target_progress(&self) -> String {
        let mode = self.world.progress_mode().name();
        let thread = if mode == "app" { "" } else { " and from its progress thread" };
        format!("its idle loop of World::progress() calls (progress mode {mode}{thread})")
    }

    /// The protocol activerma picks for `op` of `len` bytes at `at`, for the table header.
    fn protocol(&self, at: RemotePtr, len: usize, op: &str) -> String {
        match self.world.explain(at, len, op) {
            Ok((p, why)) => format!("protocol: {} ({why})", p.name()),
            Err(e) => format!("protocol: unknown ({e})"),
        }
    }

    /// Reads `len` bytes at `at` back (untimed) and compares them with our buffer at `off`.
    pub(crate) fn verify(&mut self, at: RemotePtr, off: usize, len: usize, what: &str) -> BResult<()> {
        let check = &mut self.scratch[..len];
        check.fill(!self.local[off]);
        self.world.get(at, check)?;
        if check != &self.local[off..off + len] {
            return Err(format!("{what}: the target's bytes differ from the origin's after the benchmark (data error)").into());
        }
        Ok(())
    }

    /// Blocking put / get latency: one operation at a time, each remotely complete on return.
    pub fn latency(&mut self, put: bool) -> BResult<()> {
        let (op, bench) = if put { ("put", "put_latency") } else { ("get", "get_latency") };
        let world = self.world;
        for target in TARGETS {
            let at = self.target(target);
            let limit = match (target, put) {
                ("segment", _) => ("limit_memcpy", "memcpy of the same size in one process"),
                (_, true) => ("limit_cma_write", "one raw process_vm_writev of the same size"),
                (_, false) => ("limit_cma_read", "one raw process_vm_readv of the same size"),
            };
            let ratio_note = if target == "private" && !self.host_limits {
                format!(
                    "limit: n/a on the {} conduit (no raw system call reaches another rank's memory; see bench/compare_mpi_conduit.sh)",
                    world.conduit_name()
                )
            } else {
                format!("ratio-to-limit = latency / {} (1.00 = at the limit)", limit.1)
            };
            let notes = [self.protocol(at, 8, op), ratio_note];
            self.report.section(
                &format!("activerma {op} latency, blocking (remote complete), rank 0 -> rank 1 {target}"),
                &notes,
                Style::Latency,
                true,
            );
            for size in self.cfg.sizes.clone() {
                if target == "segment" && size == SAME_BYTES_SIZE {
                    // The judged size: its limit measured again right beside it, so that the
                    // VM's speed changing during the run cannot put the limit above us.
                    self.memcpy_limit(size)?;
                }
                let st = self.time_blocking(put, at, size, None)?;
                let limit_ns = self.report.ns(limit.0, "", size);
                self.report.row(Row { bench, target: Some(target), size: Some(size), stats: st, bytes: 0, limit_ns });
                self.verify(at, 0, size, &format!("{op} {target} {size} B"))?;
                if target == "segment" && size == SAME_BYTES_SIZE {
                    self.same_bytes(put)?;
                }
            }
        }
        Ok(())
    }

    /// At 1 MiB the source and destination together fill this core's L2, so where the pages
    /// happen to sit moves a copy by several percent. To separate activerma's own cost from that
    /// luck, a put / get into rank 0's own copy of the segment (same protocol, put_direct /
    /// get_direct) is timed against a memcpy to / from exactly the same bytes.
    fn same_bytes(&mut self, put: bool) -> BResult<()> {
        let (world, plan, size) = (self.world, self.cfg.lat, SAME_BYTES_SIZE);
        let (at, mine) = (self.data.remote(0, 0), self.data.as_ptr());
        let (ours, limit) = if put {
            let src = &self.local[..size];
            let ours = measure(&plan, |n| {
                for _ in 0..n {
                    world.put(at, src)?;
                }
                Ok::<(), activerma::Error>(())
            })?;
            let limit = measure::<Infallible>(&plan, |n| {
                for _ in 0..n {
                    // SAFETY: our own segment copy holds `size` bytes; `src` is a distinct buffer.
                    unsafe { std::ptr::copy_nonoverlapping(black_box(src.as_ptr()), black_box(mine), size) };
                }
                Ok(())
            })?;
            (ours, limit)
        } else {
            let dst = &mut self.local[..size];
            let ours = measure(&plan, |n| {
                for _ in 0..n {
                    world.get(at, dst)?;
                }
                Ok::<(), activerma::Error>(())
            })?;
            let limit = measure::<Infallible>(&plan, |n| {
                for _ in 0..n {
                    // SAFETY: as above, in the other direction.
                    unsafe { std::ptr::copy_nonoverlapping(black_box(mine as *const u8), black_box(dst.as_mut_ptr()), size) };
                }
                Ok(())
            })?;
            (ours, limit)
        };
        let (bench, lim_bench, op) =
            if put { ("put_latency", "limit_memcpy_same_bytes_put", "put") } else { ("get_latency", "limit_memcpy_same_bytes_get", "get") };
        self.report.record(Row { bench: lim_bench, target: None, size: Some(size), stats: limit, bytes: 0, limit_ns: None });
        self.report.record(Row {
            bench,
            target: Some("own_segment"),
            size: Some(size),
            stats: ours,
            bytes: 0,
            limit_ns: Some(limit.median_ns),
        });
        self.report.note(&format!(
            "same bytes: 1 MiB {op} {} rank 0's own segment copy {:.2} us vs memcpy {} the same bytes {:.2} us = {:.2} (activerma's cost without page-placement luck)",
            if put { "into" } else { "from" },
            ours.median_us(),
            if put { "into" } else { "out of" },
            limit.median_us(),
            ours.median_ns / limit.median_ns
        ));
        Ok(())
    }

    /// Bandwidth like osu_put_bw: a window of 64 implicit non-blocking operations to distinct
    /// offsets, then one flush; MB/s = bytes of the window / time per window.
    pub fn bandwidth(&mut self, put: bool) -> BResult<()> {
        let (op, bench) = if put { ("put", "put_bw") } else { ("get", "get_bw") };
        let world = self.world;
        let plan = self.cfg.bw;
        for target in TARGETS {
            let at = self.target(target);
            let limit = if target == "segment" {
                "memcpy or non-temporal copy, the faster (rank 0 buffer -> rank 0's own copy of the segment)"
            } else if put {
                "raw process_vm_writev"
            } else {
                "raw process_vm_readv"
            };
            let limit_note = if target == "private" && !self.host_limits {
                format!(
                    "limit: n/a on the {} conduit (no raw system call reaches another rank's memory; see bench/compare_mpi_conduit.sh)",
                    world.conduit_name()
                )
            } else {
                format!("limit: the same window of {WINDOW} {limit} calls at offsets j*size, best batch, measured in this run (same memory footprint)")
            };
            let notes = [
                self.protocol(at, 8, op),
                format!("window: {WINDOW} x {op}_nbi to offsets j*size, then flush(1); MB/s = 10^6 B/s"),
                limit_note,
                "ratio-to-limit = bandwidth / limit bandwidth (1.00 = at the limit)".into(),
            ];
            self.report.section(&format!("activerma {op} bandwidth, rank 0 -> rank 1 {target}"), &notes, Style::Bandwidth, true);
            for size in self.cfg.sizes.clone() {
                let window = WINDOW * size;
                let limit_ns = self.window_limit(target, put, size)?;
                let st = if put {
                    let src = &self.local[..window];
                    measure(&plan, |n| {
                        for _ in 0..n {
                            for (j, chunk) in src.chunks_exact(size).enumerate() {
                                world.put_nbi(at.offset(j * size), chunk)?;
                            }
                            world.flush(1)?;
                        }
                        Ok::<(), activerma::Error>(())
                    })?
                } else {
                    let dst = &mut self.local[..window];
                    measure(&plan, |n| {
                        for _ in 0..n {
                            for (j, chunk) in dst.chunks_exact_mut(size).enumerate() {
                                world.get_nbi(at.offset(j * size), chunk)?;
                            }
                            world.flush(1)?;
                        }
                        Ok::<(), activerma::Error>(())
                    })?
                };
                self.report.row(Row { bench, target: Some(target), size: Some(size), stats: st, bytes: window, limit_ns });
                let last = (WINDOW - 1) * size;
                self.verify(at.offset(last), last, size, &format!("{op}_bw {target} {size} B"))?;
            }
        }
        Ok(())
    }

    /// Time of the bandwidth window's physical limit: the same 64 copies at offsets j*size as a
    /// plain memcpy in this process (segment), or as raw system calls (private). Measured once
    /// per size and kind, and recorded as `limit_memcpy_window` / `limit_cma_*_window` rows.
    /// None for private memory on a conduit whose ranks may be on two hosts (mpi).
    fn window_limit(&mut self, target: &str, put: bool, size: usize) -> BResult<Option<f64>> {
        let bench = match (target, put) {
            ("segment", _) => "limit_memcpy_window",
            (_, true) => "limit_cma_write_window",
            (_, false) => "limit_cma_read_window",
        };
        if target != "segment" && !self.host_limits {
            return Ok(None);
        }
        if let Some(ns) = self.report.ns(bench, "", size) {
            return Ok(Some(ns));
        }
        let plan = self.cfg.bw;
        let st = if target == "segment" {
            // Into rank 0's own copy of the segment: the same kind of memory (and pages) as the
            // puts' destination, so that the limit is a bound; best batch, as every limit; the
            // faster of plain copies and non-temporal ones (what large put windows use).
            let (src, dst) = (self.local.as_ptr(), self.data.as_ptr());
            assert!(WINDOW * size <= self.data.len(), "the data segment holds a window");
            let window = |streaming: bool| {
                measure_limit::<Infallible>(&plan, |n| {
                    for _ in 0..n {
                        for j in 0..WINDOW {
                            let (s, d) = (black_box(unsafe { src.add(j * size) }), black_box(unsafe { dst.add(j * size) }));
                            // SAFETY: both buffers hold a whole window; they do not overlap.
                            unsafe {
                                if streaming {
                                    activerma_core::copy::copy_streaming(d, s, size)
                                } else {
                                    std::ptr::copy_nonoverlapping(s, d, size)
                                }
                            }
                        }
                    }
                    Ok(())
                })
            };
            let (plain, streamed) = (window(false)?, window(true)?);
            if streamed.median_ns < plain.median_ns {
                streamed
            } else {
                plain
            }
        } else {
            let (pid, buf, addr) = (self.peer_pid, self.local.as_mut_ptr(), self.private.addr);
            measure_limit(&plan, |n| {
                for _ in 0..n {
                    for j in 0..WINDOW {
                        // SAFETY (pointer arithmetic): our buffer holds a whole window.
                        raw_cma(put, pid, unsafe { buf.add(j * size) }, addr + j * size, size)?;
                    }
                }
                Ok::<(), String>(())
            })?
        };
        self.report.record(Row { bench, target: None, size: Some(size), stats: st, bytes: WINDOW * size, limit_ns: None });
        Ok(Some(st.median_ns))
    }

    /// 8-byte fetch-add latency; the private word is served by rank 1's progress loop.
    pub fn atomics(&mut self) -> BResult<()> {
        let world = self.world;
        let plan = self.cfg.lat;
        let words = [self.ctrl.remote(1, ATOMIC_OFF), self.private.offset(self.cfg.window_bytes())];
        let notes = [
            format!("segment: {}", self.protocol(words[0], 8, "atomic")),
            format!("private: {}", self.protocol(words[1], 8, "atomic")),
            format!("rank 1 serves private-memory atomics from {}", self.target_progress()),
            "rows: segment (one-sided), private (rank 1's CPU on request), segment-by-target (the segment word run by rank 1's CPU on request: ACTIVERMA_ATOMICS=target)".into(),
            if self.host_limits {
                "ratio-to-limit = latency / limit: segment vs a local atomic fetch-add, private vs the cache-line hand-off round trip"
                    .into()
            } else {
                "ratio-to-limit = latency / limit: segment vs a local atomic fetch-add; private: n/a on this conduit (no hand-off limit)"
                    .into()
            },
        ];
        self.report.section("activerma atomic latency: 8 B fetch-add, blocking, rank 0 -> rank 1", &notes, Style::Latency, true);
        // The segment word once more, run by rank 1's CPU on request (ARMCI's server-based
        // atomics, ACTIVERMA_ATOMICS=target), beside the one-sided row of the same word.
        let cases = [
            ("segment", words[0], AtomicPath::OneSided),
            ("private", words[1], AtomicPath::OneSided),
            ("segment-by-target", words[0], AtomicPath::Target),
        ];
        for (target, at, path) in cases {
            let before = world.fetch(at)?;
            let mut ops = 0u64;
            let st = measure(&plan, |n| {
                for _ in 0..n {
                    world.atomic_by(path, at, AtomicOp::FetchAdd(1))?;
                }
                ops += n;
                Ok::<(), activerma::Error>(())
            })?;
            let after = world.fetch(at)?;
            if after.wrapping_sub(before) != ops {
                return Err(format!(
                    "atomic {target}: {ops} fetch-adds of 1 moved the counter by {} (lost updates)",
                    after.wrapping_sub(before)
                )
                .into());
            }
            let limit_ns = if target == "segment" {
                self.report.ns("limit_atomic_local", "", 8)
            } else {
                self.report.ns("limit_handoff_roundtrip", "", 0)
            };
            self.report.row(Row { bench: "atomic_latency", target: Some(target), size: Some(8), stats: st, bytes: 0, limit_ns });
        }
        if let (Some(one_sided), Some(by_target)) =
            (self.report.ns("atomic_latency", "segment", 8), self.report.ns("atomic_latency", "segment-by-target", 8))
        {
            self.report.note(&format!(
                "one-sided / server-based latency on the segment word = {:.3} (the ARMCI paper, over InfiniBand: one-sided 23 % faster, and no target CPU; on one host the one-sided path is a CPU atomic)",
                one_sided / by_target
            ));
            let what = "8-byte fetch-add on a segment word: one-sided latency / server-based (rank 1's CPU)";
            let params = super::rows::params([("what", serde_json::json!(what)), ("paper", serde_json::json!("~0.81"))]);
            super::rows::emit(
                "atomic-check",
                "one-sided / server-based",
                params,
                "x",
                super::timing::Measured::single(one_sided / by_target),
                &[],
            );
        }
        Ok(())
    }

    /// Short active message to rank 1, whose handler replies; rank 0 polls for the reply.
    pub fn am_roundtrip(&mut self) -> BResult<()> {
        let world = self.world;
        let plan = self.cfg.lat;
        let notes = [
            format!("rank 0: send_am(1, handler {PING}, 8 B) then World::progress() until the pong handler bumped a counter"),
            format!("rank 1: the ping handler answers with ctx.reply; it runs from {}", self.target_progress()),
            if self.host_limits {
                "ratio-to-limit = round trip / cache-line hand-off round trip".into()
            } else {
                "ratio-to-limit: n/a on this conduit (no hand-off limit)".into()
            },
        ];
        self.report.section("activerma active-message round trip (short, polling)", &notes, Style::Latency, true);
        let pongs = &*self.pongs;
        let payload = [0u8; 8];
        let mut expected = pongs.load(Ordering::Acquire);
        let st = measure(&plan, |n| {
            for _ in 0..n {
                world.send_am(1, PING, 0, &payload)?;
                expected += 1;
                while pongs.load(Ordering::Acquire) < expected {
                    world.progress();
                }
            }
            Ok::<(), activerma::Error>(())
        })?;
        let limit_ns = self.report.ns("limit_handoff_roundtrip", "", 0);
        self.report.row(Row { bench: "am_roundtrip", target: None, size: Some(8), stats: st, bytes: 0, limit_ns });
        Ok(())
    }

    /// One 8-byte active put to a page of rank 1 marked W=0, WL=1, WLD=1: from the call until
    /// rank 1's poll-mode handler ran and its acknowledging put arrived (so the time includes
    /// a one-way trip more than "until the handler ran").
    pub fn active_put(&mut self) -> BResult<()> {
        let Some(at) = self.active_page else {
            self.report.section(
                "activerma active put (8 B, polling)",
                &["n/a on this conduit: Active Access marks on segments need every origin on the target's host".to_string()],
                Style::Latency,
                false,
            );
            return Ok(());
        };
        let (world, plan) = (self.world, self.cfg.lat);
        let notes = [
            "rank 0: put(8 B) into rank 1's page marked W=0 WL=1 WLD=1 (nothing written, the access logged with its data), then spin until the ack".to_string(),
            format!("rank 1: its domain-1 log handler (notify=poll) puts seq+1 into rank 0's segment; it runs from {}", self.target_progress()),
            "ratio-to-limit = active put round trip / cache-line hand-off round trip".into(),
        ];
        self.report.section("activerma active put round trip (8 B, polling)", &notes, Style::Latency, true);
        // SAFETY: ACK_OFF is an 8-aligned word of our own control segment, written by rank 1's puts.
        let ack = unsafe { &*(self.ctrl.as_ptr().add(ACK_OFF) as *const std::sync::atomic::AtomicU64) };
        let payload = [7u8; 8];
        let mut sent = ack.load(Ordering::Acquire);
        let st = measure(&plan, |n| {
            for _ in 0..n {
                world.put(at, &payload)?;
                sent += 1;
                while ack.load(Ordering::Acquire) < sent {
                    std::hint::spin_loop();
                }
            }
            Ok::<(), activerma::Error>(())
        })?;
        let limit_ns = self.report.ns("limit_handoff_roundtrip", "", 0);
        self.report.row(Row { bench: "active_put_roundtrip", target: None, size: Some(8), stats: st, bytes: 0, limit_ns });
        Ok(())
    }
}
