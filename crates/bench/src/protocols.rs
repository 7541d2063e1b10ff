//! `activerma bench armci-protocols`: the ARMCI paper's study of contiguous protocols (§4),
//! with the calls ARMCI's Put/Get make (`World::put_by` / `get_by`, docs/design/transfer.md),
//! every protocol side by side in one job:
//! - Figure 2: what registering a user buffer costs (mlock + munlock, what a dynamic
//!   registration does per call) against copying the same bytes (memcpy);
//! - Figures 3, 4 and Table 1: put and get to rank 1's segment per protocol (zero-copy,
//!   buffered, pipelined, dynamic registration) against the raw core's put/get in this run;
//! - Figures 5 and 6: the gets again with rank 1 busy (computing, entering the runtime once
//!   per BUSY_SLICE_US), and each protocol's busy / idle bandwidth: judged for the protocols
//!   that need no target CPU, reported for those that do.

use super::osu_tables::{Row, Style};
use super::rows;
use super::timing::{measure, Measured, Stats};
use super::{BResult, Origin, BUSY_SLICE_US, CMD_BUSY, CMD_SERVE};
use activerma::{RemotePtr, Transfer};
use serde_json::json;
use std::hint::black_box;

const SIZES: [usize; 7] = [8, 1 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20];
const SIZES_QUICK: [usize; 4] = [8, 4 << 10, 64 << 10, 1 << 20];
/// The protocols compared; `auto` picks zero-copy for a segment, so it is not a row of its own.
const PROTOCOLS: [Transfer; 4] = [Transfer::ZeroCopy, Transfer::Buffered, Transfer::Pipelined, Transfer::DynamicRegistration];
/// Busy / idle bandwidth the protocols that need no target CPU keep at least (issue 16).
const BUSY_KEEPS: f64 = 0.9;
/// The raw core's put/get: the baseline of every protocol row.
const CORE: &str = "core";

impl Origin<'_> {
    pub fn armci_protocols(&mut self) -> BResult<()> {
        let sizes: Vec<usize> = if self.cfg.quick { &SIZES_QUICK[..] } else { &SIZES[..] }
            .iter()
            .copied()
            .filter(|&s| s <= self.cfg.max_size && s <= self.local.len())
            .collect();
        self.registration_cost(&sizes)?;
        for (put, busy) in [(true, false), (false, false), (false, true)] {
            if busy {
                self.command(CMD_BUSY)?;
            }
            let measured = self.protocol_tables(put, busy, &sizes);
            if busy {
                self.command(CMD_SERVE)?;
            }
            measured?;
        }
        self.protocol_checks(&[sizes[sizes.len() / 2], sizes[sizes.len() - 1]]);
        // What moved the transfers, by this rank's own count (the `transfer_*` counters).
        let moved: Vec<String> = self
            .world
            .counters()
            .snapshot()
            .into_iter()
            .filter(|&(k, v)| k.starts_with("transfer_") && v != 0)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        self.report.note(&format!("rank 0's transfer counters: {}", moved.join(" ")));
        Ok(())
    }

    /// Figure 2: mlock + munlock of a page-aligned user buffer against memcpy of it.
    fn registration_cost(&mut self, sizes: &[usize]) -> BResult<()> {
        let plan = self.cfg.lat;
        self.report.section(
            "registration cost: mlock + munlock of a user buffer (what a dynamic registration adds per call), rank 0",
            &["limit column: memcpy of the same bytes in this run (not a bound); ratio = memcpy time / registration time, < 1: registering costs more than copying".into()],
            Style::Latency,
            true,
        );
        for &size in sizes {
            let buf = self.local.as_ptr() as *const libc::c_void;
            let pinned = measure(&plan, |n| {
                for _ in 0..n {
                    // SAFETY: [buf, buf + size) is our own mapped buffer; mlock changes residency only.
                    if unsafe { libc::mlock(black_box(buf), size) } != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // SAFETY: as above.
                    unsafe { libc::munlock(buf, size) };
                }
                Ok(())
            });
            let (src, dst) = (self.local.as_ptr(), self.scratch.as_mut_ptr());
            let copied = measure::<std::convert::Infallible>(&plan, |n| {
                for _ in 0..n {
                    // SAFETY: both buffers hold at least `size` bytes and do not overlap.
                    unsafe { std::ptr::copy_nonoverlapping(black_box(src), black_box(dst), size) };
                }
                Ok(())
            })?;
            self.report.record(Row {
                bench: "registration_cost",
                target: Some("memcpy"),
                size: Some(size),
                stats: copied,
                bytes: size,
                limit_ns: None,
            });
            match pinned {
                Ok(st) => self.report.row(Row {
                    bench: "registration_cost",
                    target: Some("mlock-munlock"),
                    size: Some(size),
                    stats: st,
                    bytes: size,
                    limit_ns: Some(copied.median_ns),
                }),
                Err(e) => self.report.note(&format!("{size} B: mlock refused ({e}): raise `ulimit -l` to measure registration")),
            }
        }
        Ok(())
    }

    /// One direction, target idle or busy: the raw core, then every protocol, per size.
    fn protocol_tables(&mut self, put: bool, busy: bool, sizes: &[usize]) -> BResult<()> {
        let (op, bench) = if put { ("put", "protocol_put") } else { ("get", "protocol_get") };
        let state = if busy { format!("computing, entering the runtime every {BUSY_SLICE_US} us (busy)") } else { self.target_progress() };
        let at = self.data.remote(1, 0);
        for protocol in [None].into_iter().chain(PROTOCOLS.map(Some)) {
            let name = protocol.map_or(CORE, |p| p.name());
            let case = protocol_case(name, busy);
            let compared = match protocol {
                None => "limit column: none; this is the baseline: the core's plain blocking put/get".to_string(),
                Some(_) => "limit column: the core's plain put/get of the same size in this run (not a physical limit); ratio = this protocol's bandwidth / the core's".to_string(),
            };
            self.report.section(
                &format!("activerma contiguous {op} by protocol {name}, rank 0 -> rank 1 segment"),
                &[format!("World::{op}_by, as ARMCI_{} calls it; rank 1: {state}", if put { "Put" } else { "Get" }), compared],
                Style::Bandwidth,
                true,
            );
            for &size in sizes {
                let st = self.time_blocking(put, at, size, protocol)?;
                let limit_ns = protocol.and_then(|_| self.report.ns(bench, &protocol_case(CORE, busy), size));
                self.report.row_mbs(Row { bench, target: Some(&case), size: Some(size), stats: st, bytes: size, limit_ns });
                self.verify(RemotePtr::new(1, at.addr), 0, size, &format!("{op} by {name}, {size} B"))?;
            }
        }
        Ok(())
    }

    /// Busy / idle get bandwidth per protocol at `sizes`, printed and written as
    /// `protocol-check` rows: judged for zero-copy and dynamic registration (no target CPU),
    /// reported for buffered and pipelined (the paper: their bandwidth drops "very
    /// significantly" with a busy target; here by how much).
    fn protocol_checks(&mut self, sizes: &[usize]) {
        let mut lines = Vec::new();
        for &size in sizes {
            for protocol in PROTOCOLS {
                let get =
                    |busy: bool| self.report.get("protocol_get", &protocol_case(protocol.name(), busy), size).map(|s: Stats| s.median_ns);
                let (Some(idle), Some(busy)) = (get(false), get(true)) else { continue };
                let keeps = idle / busy;
                let what = format!("contiguous get {size} B, {}: busy / idle bandwidth", protocol.name());
                let mut params = rows::params([("what", json!(what)), ("size", json!(size))]);
                let judged = matches!(protocol, Transfer::ZeroCopy | Transfer::DynamicRegistration);
                let verdict = match (judged, keeps >= BUSY_KEEPS) {
                    (false, _) => "info",
                    (true, true) => "PASS",
                    (true, false) => "MISS",
                };
                if judged {
                    params.insert("target".into(), json!(format!(">= {BUSY_KEEPS}")));
                }
                lines.push(format!("# {what:<76} {keeps:>6.2}  {verdict}"));
                rows::emit("protocol-check", &format!("{} {size} B busy/idle", protocol.name()), params, "x", Measured::single(keeps), &[]);
            }
        }
        self.report.section("contiguous gets with the target busy against idle (the paper's Figures 5 and 6)", &[], Style::Note, true);
        for l in lines {
            self.report.note(&l[2..]);
        }
    }
}

/// The report case of a protocol's row: "buffered", "zero-copy-busy", "core", ...
fn protocol_case(name: &str, busy: bool) -> String {
    format!("{name}{}", if busy { "-busy" } else { "" })
}
