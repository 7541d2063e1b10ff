//! `activerma bench strided`: a 2-D patch (rows of one size, twice that size apart at the
//! target, packed at the origin) read from and written to rank 1's segment and its exposed
//! private memory, by every ACTIVERMA_NONCONTIG method in the same job: host-assisted (one
//! check, then CPU copies or scatter/gather lists of process_vm_readv/writev), per piece (one
//! blocking get/put per row) and packed (one active message the target unpacks). The ARMCI
//! paper's Figures 9 and 10 compare the same three ways to move non-contiguous data (with the
//! target idle here: rank 1 sits in its progress loop).

use super::osu_tables::{Row, Style};
use super::timing::measure;
use super::{BResult, Origin};
use activerma::{Noncontig, RemotePtr};

/// Rows of the patch (the paper's 2-D patches have up to 1024 rows).
const ROWS: usize = 1024;
const ROWS_QUICK: usize = 256;
/// Bytes per row.
const ROW_SIZES: [usize; 4] = [8, 64, 1024, 8192];
const ROW_SIZES_QUICK: [usize; 3] = [8, 64, 1024];

impl Origin<'_> {
    pub fn strided(&mut self) -> BResult<()> {
        let world = self.world;
        let plan = self.cfg.bw;
        let (rows, sizes) = if self.cfg.quick { (ROWS_QUICK, &ROW_SIZES_QUICK[..]) } else { (ROWS, &ROW_SIZES[..]) };
        for put in [false, true] {
            let (op, bench) = if put { ("put", "strided_put") } else { ("get", "strided_get") };
            for target in ["segment", "private"] {
                let base = if target == "segment" { self.data.remote(1, 0) } else { self.private };
                for method in Noncontig::ALL {
                    let case = format!("{target}-{}", method.name());
                    let baseline = format!("{target}-{}", Noncontig::HostAssisted.name());
                    let compared = if method == Noncontig::HostAssisted {
                        "limit column: none (this is the baseline of the next tables)".to_string()
                    } else {
                        "limit column: the host-assisted patch of the same size in this run (not a physical limit); ratio = this method / host-assisted".to_string()
                    };
                    self.report.section(
                        &format!("activerma strided {op}, {rows} rows, rank 0 -> rank 1 {target}, ACTIVERMA_NONCONTIG={}", method.name()),
                        &[format!("rows twice their size apart at the target, contiguous at the origin; rank 1 serves from {}", self.target_progress()), compared],
                        Style::Bandwidth,
                        true,
                    );
                    for &size in sizes {
                        let bytes = rows * size;
                        let addrs: Vec<usize> = (0..rows).map(|r| base.addr + r * 2 * size).collect();
                        let st = if put {
                            let src = &self.local[..bytes];
                            let list: Vec<(usize, &[u8])> = addrs.iter().enumerate().map(|(r, &a)| (a, &src[r * size..(r + 1) * size])).collect();
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
                        self.verify(RemotePtr::new(1, addrs[rows - 1]), (rows - 1) * size, size, &format!("strided {op} {case} {size} B rows"))?;
                    }
                }
            }
        }
        Ok(())
    }
}
