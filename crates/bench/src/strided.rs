//! `activerma bench strided`: a 2-D patch (rows of one size, twice that size apart at the
//! target, packed at the origin) read from and written to rank 1's segment and its exposed
//! private memory, by every ACTIVERMA_NONCONTIG method in the same job: host-assisted (one
//! check, then CPU copies or scatter/gather lists of process_vm_readv/writev), per piece (one
//! blocking get/put per row), packed (one active message the target unpacks) and
//! target-assisted (the row list in one message, the target's progress makes the
//! scatter/gather calls into or out of the origin's buffer). The ARMCI
//! paper's Figures 9 and 10 compare the same ways to move non-contiguous data with the target
//! idle (rank 1 in its progress loop) and busy (rank 1 computing, entering the runtime once
//! per BUSY_SLICE_US): gets are measured both ways, and each method's busy / idle bandwidth is
//! checked (the zero-copy paths need no target CPU, so they should keep it).

use super::osu_tables::{Row, Style};
use super::rows;
use super::timing::{measure, Measured, Stats};
use super::{BResult, Origin, BUSY_SLICE_US, CMD_BUSY, CMD_SERVE};
use activerma::{Noncontig, RemotePtr};
use serde_json::json;

/// Rows of the patch (the paper's 2-D patches have up to 1024 rows).
const ROWS: usize = 1024;
const ROWS_QUICK: usize = 256;
/// Bytes per row.
const ROW_SIZES: [usize; 4] = [8, 64, 1024, 8192];
const ROW_SIZES_QUICK: [usize; 3] = [8, 64, 1024];
/// Busy / idle bandwidth the zero-copy paths keep at least (issue 16's target).
const BUSY_KEEPS: f64 = 0.9;

impl Origin<'_> {
    pub fn strided(&mut self) -> BResult<()> {
        let (rows, sizes) = if self.cfg.quick { (ROWS_QUICK, &ROW_SIZES_QUICK[..]) } else { (ROWS, &ROW_SIZES[..]) };
        for (put, busy) in [(false, false), (false, true), (true, false)] {
            if busy {
                self.command(CMD_BUSY)?;
            }
            let measured = self.strided_tables(put, busy, rows, sizes);
            if busy {
                self.command(CMD_SERVE)?;
            }
            measured?;
        }
        // Small rows (where the packed path pays the target's absence most) and large ones.
        self.busy_checks(&[sizes[0], sizes[sizes.len() - 1]]);
        Ok(())
    }

    /// The tables of one direction, target idle or busy: per target, per method, per row size.
    fn strided_tables(&mut self, put: bool, busy: bool, rows: usize, sizes: &[usize]) -> BResult<()> {
        let world = self.world;
        let plan = self.cfg.bw;
        let (op, bench) = if put { ("put", "strided_put") } else { ("get", "strided_get") };
        let state = if busy { format!("computing, entering the runtime every {BUSY_SLICE_US} us (busy)") } else { self.target_progress() };
        for target in ["segment", "private"] {
            let base = if target == "segment" { self.data.remote(1, 0) } else { self.private };
            for method in Noncontig::ALL {
                let case = strided_case(target, method, busy);
                let baseline = strided_case(target, Noncontig::HostAssisted, busy);
                let compared = if method == Noncontig::HostAssisted {
                    "limit column: none (this is the baseline of the next tables)".to_string()
                } else {
                    "limit column: the host-assisted patch of the same size in this run (not a physical limit); ratio = this method / host-assisted".to_string()
                };
                self.report.section(
                    &format!("activerma strided {op}, {rows} rows, rank 0 -> rank 1 {target}, ACTIVERMA_NONCONTIG={}", method.name()),
                    &[format!("rows twice their size apart at the target, contiguous at the origin; rank 1: {state}"), compared],
                    Style::Bandwidth,
                    true,
                );
                for &size in sizes {
                    let bytes = rows * size;
                    let addrs: Vec<usize> = (0..rows).map(|r| base.addr + r * 2 * size).collect();
                    let st = if put {
                        let src = &self.local[..bytes];
                        let list: Vec<(usize, &[u8])> =
                            addrs.iter().enumerate().map(|(r, &a)| (a, &src[r * size..(r + 1) * size])).collect();
                        measure(&plan, |n| {
                            for _ in 0..n {
                                world.put_vector_by(method, 1, &list)?;
                            }
                            Ok::<(), activerma::Error>(())
                        })?
                    } else {
                        let dst = &mut self.local[..bytes];
                        let mut list: Vec<(usize, &mut [u8])> = addrs.iter().copied().zip(dst.chunks_mut(size)).collect();
                        measure(&plan, |n| {
                            for _ in 0..n {
                                world.get_vector_by(method, 1, &mut list)?;
                            }
                            Ok::<(), activerma::Error>(())
                        })?
                    };
                    let limit_ns = if method == Noncontig::HostAssisted { None } else { self.report.ns(bench, &baseline, size) };
                    self.report.row(Row { bench, target: Some(&case), size: Some(size), stats: st, bytes, limit_ns });
                    // The last row is where the pattern says (checked untimed).
                    self.verify(
                        RemotePtr::new(1, addrs[rows - 1]),
                        (rows - 1) * size,
                        size,
                        &format!("strided {op} {case} {size} B rows"),
                    )?;
                }
            }
        }
        Ok(())
    }

    /// Busy / idle get bandwidth per method at each of `sizes`-byte rows, printed and written as
    /// `strided-check` rows: judged for the paths that need no target CPU (host-assisted, and
    /// per-row gets on one host: CPU copies or cross-memory attach), reported for packed.
    fn busy_checks(&mut self, sizes: &[usize]) {
        let zero_copy = |_: &str, method: Noncontig| method == Noncontig::HostAssisted || method == Noncontig::PerPiece && self.host_limits;
        let mut lines = Vec::new();
        for (&size, target) in sizes.iter().flat_map(|s| ["segment", "private"].map(|t| (s, t))) {
            for method in Noncontig::ALL {
                let get =
                    |busy: bool| self.report.get("strided_get", &strided_case(target, method, busy), size).map(|s: Stats| s.median_ns);
                let (Some(idle), Some(busy)) = (get(false), get(true)) else { continue };
                let keeps = idle / busy; // bandwidth busy / idle (same bytes per operation)
                let what = format!("strided get {size} B rows, {target}, {}: busy / idle bandwidth", method.name());
                let mut params = rows::params([("what", json!(what)), ("size", json!(size))]);
                let verdict = if zero_copy(target, method) {
                    params.insert("target".into(), json!(format!(">= {BUSY_KEEPS}")));
                    if keeps >= BUSY_KEEPS {
                        "PASS"
                    } else {
                        "MISS"
                    }
                } else {
                    "info"
                };
                lines.push(format!("# {what:<76} {keeps:>6.2}  {verdict}"));
                rows::emit(
                    "strided-check",
                    &format!("{target} {} {size} B busy/idle", method.name()),
                    params,
                    "x",
                    Measured::single(keeps),
                    &[],
                );
            }
        }
        self.report.section("strided gets with the target busy against idle (the paper's Figures 9 and 10)", &[], Style::Note, true);
        for l in lines {
            self.report.note(&l[2..]);
        }
    }
}

/// The report case of a method's row: "private-packed", "segment-host-assisted-busy", ...
fn strided_case(target: &str, method: Noncontig, busy: bool) -> String {
    format!("{target}-{}{}", method.name(), if busy { "-busy" } else { "" })
}
