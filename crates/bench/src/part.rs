//! `activerma bench part-latency` (the paper's Figures 7 and 9): blocking puts of 8 B to
//! 16 KiB into another rank's exposed private memory under PART — transfer only; the
//! origin touching its source pages first, present or not (Touch-Pres / Touch-NoPres);
//! pinning them with mlock first (Pin); a real fault at the target resolved by ERR or by a
//! 100 µs / 1 ms time-out; a fault in the origin's own source buffer (resolved on the spot,
//! or avoided by PART's pre-touch) — and the same put into mlock-pinned memory (pin-all).
//!
//! Each configuration is a 2-rank job of its own (the settings are job-wide); sizes loop
//! inside it. Per iteration, outside the timed region, the pages are evicted (contents kept)
//! by the rank that owns them (`World::part_evict`), or the plain source buffer is dropped
//! (MADV_DONTNEED), then rank 0 times its touch / pin and the put. Rank 1 makes progress (app
//! mode) while it waits, so it serves the NACK at once, as a target's fault handler would.

use super::page_buf::PageBuf;
use super::part_pair::{self, Pair};
use super::rows;
use super::timing::{percentile, Measured};
use super::{BResult, BenchArgs};
use activerma::RemotePtr;
use serde_json::json;
use std::time::Instant;

const CASE_ENV: &str = "ACTIVERMA_BENCH_PART_CASE";
const OUT_ENV: &str = "ACTIVERMA_BENCH_PART_OUT";
/// The paper's Figures 7 and 9 go from a few bytes to a few pages.
const SIZES: [usize; 5] = [8, 64, 512, 4096, 16384];
/// The size the target is judged at (one page).
const TARGET_SIZE: usize = 4096;

#[derive(Clone, Copy, PartialEq)]
enum Prep {
    /// Everything resident: the put alone.
    None,
    /// Rank 1 evicts the target pages (PART, untimed).
    EvictTarget,
    /// Rank 0 evicts its exposed source pages (PART, untimed): the origin resolves the fault.
    EvictSource,
    /// The source is a plain buffer, resident; rank 0 reads and writes the first byte of each
    /// of its pages, timed, before the put (the paper's Touch-Pres).
    TouchPresent,
    /// The same buffer dropped first (MADV_DONTNEED, untimed), so each touch is a kernel minor
    /// fault (the paper's Touch-NoPres).
    TouchNotPresent,
    /// The same dropped buffer pinned with mlock before the put, timed (the paper's Pin: the
    /// pin faults the pages in); munlock afterwards, untimed.
    Pin,
}

struct Case {
    name: &'static str,
    env: &'static [(&'static str, &'static str)],
    prep: Prep,
    iters: usize,
}

const PART: (&str, &str) = ("ACTIVERMA_REGISTRATION", "part");

const CASES: [Case; 10] = [
    Case { name: "transfer only (no fault)", env: &[PART], prep: Prep::None, iters: 3000 },
    Case { name: "touch, pages present", env: &[PART], prep: Prep::TouchPresent, iters: 3000 },
    Case { name: "touch, pages not present", env: &[PART], prep: Prep::TouchNotPresent, iters: 3000 },
    Case { name: "pin (mlock), pages not present", env: &[PART], prep: Prep::Pin, iters: 3000 },
    Case { name: "fault at target, ERR", env: &[PART, ("ACTIVERMA_PART_RETRANSMIT", "err")], prep: Prep::EvictTarget, iters: 3000 },
    Case {
        name: "fault at target, time-out 100 us",
        env: &[PART, ("ACTIVERMA_PART_RETRANSMIT", "timeout:100us")],
        prep: Prep::EvictTarget,
        iters: 600,
    },
    Case {
        name: "fault at target, time-out 1 ms",
        env: &[PART, ("ACTIVERMA_PART_RETRANSMIT", "timeout:1ms")],
        prep: Prep::EvictTarget,
        iters: 120,
    },
    Case { name: "fault at source, origin resolves", env: &[PART], prep: Prep::EvictSource, iters: 3000 },
    Case {
        name: "fault at source, PART pre-touch",
        env: &[PART, ("ACTIVERMA_PART_PRETOUCH", "16K")],
        prep: Prep::EvictSource,
        iters: 3000,
    },
    Case { name: "mlock-pinned target (pin-all)", env: &[("ACTIVERMA_REGISTRATION", "pin-all")], prep: Prep::None, iters: 3000 },
];

/// The parent: one job per configuration (the settings are job-wide), sizes inside each job;
/// then the table.
pub fn latency(args: &BenchArgs) -> BResult<()> {
    let out = super::jobs::rows_file("part-latency");
    let _ = std::fs::remove_file(&out);
    println!(
        "activerma bench part-latency: blocking put of 8 B - 16 KiB to rank 1's exposed private memory (the paper's \
         Figures 7 and 9), load {}",
        super::load_avg()
    );
    println!("{}", super::machine::header_line());
    for (i, c) in CASES.iter().enumerate() {
        let mut env = vec![(CASE_ENV.to_string(), i.to_string()), (OUT_ENV.to_string(), out.to_string_lossy().into_owned())];
        env.extend(c.env.iter().map(|&(k, v)| (k.to_string(), v.to_string())));
        if args.quick {
            env.push(("ACTIVERMA_BENCH_PART_QUICK".into(), "1".into()));
        }
        let code = super::jobs::run_with_env(2, &["bench", "part-latency", "--rank-worker"], &env, 300.0)?;
        if code != 0 {
            return Err(format!("the job of \"{}\" failed (exit code {code})", c.name).into());
        }
    }
    let text = std::fs::read_to_string(&out)?;
    let _ = std::fs::remove_file(&out);
    // (case, size, median, faults/put, resends/put); each also a report row (its puts' spread).
    let mut rows: Vec<(String, usize, f64, f64, f64)> = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [name, size, med, min, max, puts, faults, resends] = f[..] else {
            return Err(format!("malformed part-latency row {line:?}").into());
        };
        let (size, med): (usize, f64) = (size.parse()?, med.parse()?);
        let m = Measured { value: med, min: min.parse()?, median: med, max: max.parse()?, reps: puts.parse()? };
        let case = CASES.iter().find(|c| c.name == name).ok_or("unknown part-latency case")?;
        let env: Vec<(String, String)> = case.env.iter().map(|&(k, v)| (k.to_string(), v.to_string())).collect();
        rows::emit("part-latency", name, rows::params([("size", json!(size))]), "us", m, &env);
        rows.push((name.into(), size, med, faults.parse()?, resends.parse()?));
    }
    let m = |n: &str, z: usize| rows.iter().find(|r| r.0 == n && r.1 == z).map_or(f64::NAN, |r| r.2);
    println!("# median latency (us) by size");
    print!("# {:<38}", "case");
    for z in SIZES {
        print!(" {:>9}", if z >= 1024 { format!("{} KiB", z >> 10) } else { format!("{z} B") });
    }
    println!("   faults/put resends/put (at {} KiB)", TARGET_SIZE >> 10);
    for c in &CASES {
        print!("{:<40}", c.name);
        for z in SIZES {
            print!(" {:>9.2}", m(c.name, z));
        }
        let at = rows.iter().find(|r| r.0 == c.name && r.1 == TARGET_SIZE);
        println!("   {:>10.2} {:>11.2}", at.map_or(f64::NAN, |r| r.3), at.map_or(f64::NAN, |r| r.4));
    }
    let base = |z: usize| m("transfer only (no fault)", z);
    println!("# overhead over transfer only (us), ours vs the paper's (Fig. 7: ~4 us base; pin +6 us, touch not present +3 us, touch present ~+0.1 us for small transfers)");
    for (case, paper) in [("pin (mlock), pages not present", 6.0), ("touch, pages not present", 3.0), ("touch, pages present", 0.1)] {
        let d: Vec<String> = SIZES.iter().map(|&z| format!("{:+.2}", m(case, z) - base(z))).collect();
        println!("#   {:<34} {}   paper +{paper} (small)", case, d.join(" "));
        // The overheads are the operating system's (a pin, a minor fault), so microseconds are
        // comparable across machines here, unlike the transfers: reported beside the paper's.
        let params =
            rows::params([("size", json!(8)), ("paper", json!(paper)), ("what", json!(format!("{case} minus transfer only, 8 B (us)")))]);
        rows::emit("part-latency-check", &format!("{case} - transfer"), params, "us", Measured::single(m(case, 8) - base(8)), &[]);
    }
    println!(
        "# paper (Fig. 9): 4 KiB write with a fault at the destination ~38 us with ERR; time-outs add ~100 us / ~1 ms; flat up to 4 KiB"
    );
    let resolved = m("fault at target, ERR", TARGET_SIZE) - base(TARGET_SIZE);
    let params = rows::params([
        ("size", json!(TARGET_SIZE)),
        ("target", json!("<= 10")),
        ("what", json!("one-page fault at the target resolved with ERR, minus transfer only (us)")),
    ]);
    rows::emit("part-latency-check", "fault resolved (ERR) - transfer", params, "us", Measured::single(resolved), &[]);
    println!(
        "# fault resolved (one page, fault at target with ERR minus transfer only): {resolved:.2} us median; target <= 10 us: {}",
        if resolved <= 10.0 { "PASS" } else { "MISS" }
    );
    println!("# load at the end: {}", super::load_avg());
    Ok(())
}

/// True in a rank of one of this benchmark's jobs.
pub fn is_worker() -> bool {
    std::env::var_os(CASE_ENV).is_some()
}

/// The source of the touch and pin cases: a plain anonymous buffer (not exposed, not
/// PART-managed), whose pages MADV_DONTNEED makes not present again.
fn drop_pages(buf: &PageBuf) -> BResult<()> {
    // SAFETY: our own mapping; its contents do not matter to the benchmark.
    if unsafe { libc::madvise(buf.as_ptr() as *mut _, buf.len(), libc::MADV_DONTNEED) } != 0 {
        return Err(format!("madvise: {}", std::io::Error::last_os_error()).into());
    }
    Ok(())
}

/// Reads and writes the first byte of each page of the first `len` bytes of `buf`.
fn touch(buf: &PageBuf, len: usize, ps: usize) {
    for a in (buf.as_ptr() as usize..buf.as_ptr() as usize + len).step_by(ps) {
        // SAFETY: inside our own read-write mapping.
        unsafe { std::ptr::write_volatile(a as *mut u8, std::ptr::read_volatile(a as *const u8).wrapping_add(1)) };
    }
}

/// One rank of a configuration's job.
pub fn worker() -> BResult<()> {
    let case: usize = std::env::var(CASE_ENV)?.parse()?;
    let c = &CASES[case];
    let quick = std::env::var_os("ACTIVERMA_BENCH_PART_QUICK").is_some();
    let ps = activerma_core::page::page_size();
    let max = SIZES[SIZES.len() - 1];
    // The timed range starts at the first whole page of the exposed buffers.
    let world = part_pair::join("part-latency")?;
    let pair = Pair::expose(&world, max)?;
    let (w, me, page) = (pair.w, pair.me, pair.base);
    // Every page written once (present), as the touch cases expect.
    let plain = PageBuf::filled(max, |_| 0);
    let mut rows = String::new();
    let mut seq = 0u64;
    for size in SIZES {
        // The whole pages the access touches: what an eviction must cover.
        let pages_len = size.div_ceil(ps) * ps;
        let iters = if quick { c.iters / 4 } else { c.iters };
        let warm = 20;
        let mut times = Vec::with_capacity(iters);
        let s0 = w.part_stats().snapshot();
        for i in 0..warm + iters {
            seq += 1;
            if me == 1 {
                if c.prep == Prep::EvictTarget && w.part_evict(page, pages_len)? as usize != pages_len / ps {
                    return Err("rank 1: the target pages were not all evicted".into());
                }
                pair.owner_go(seq)?;
                continue;
            }
            match c.prep {
                Prep::EvictSource if w.part_evict(page, pages_len)? as usize != pages_len / ps => {
                    return Err("rank 0: the source pages were not all evicted".into())
                }
                Prep::TouchNotPresent | Prep::Pin => drop_pages(&plain)?,
                _ => {}
            }
            pair.origin_wait(seq);
            let from_plain = matches!(c.prep, Prep::TouchPresent | Prep::TouchNotPresent | Prep::Pin);
            let src_addr = if from_plain { plain.as_ptr() as usize } else { page };
            // SAFETY: our own memory (exposed page or plain buffer); nobody writes it meanwhile.
            let src = unsafe { std::slice::from_raw_parts(src_addr as *const u8, size) };
            let t0 = Instant::now();
            match c.prep {
                Prep::TouchPresent | Prep::TouchNotPresent => touch(&plain, size, ps),
                // SAFETY: mlock of our own mapping.
                Prep::Pin if unsafe { libc::mlock(src_addr as *const _, size) } != 0 => {
                    return Err(format!("mlock: {} (raise `ulimit -l`)", std::io::Error::last_os_error()).into());
                }
                _ => {}
            }
            w.put(RemotePtr::new(1, pair.peer_base), src)?;
            let t = t0.elapsed().as_secs_f64() * 1e6;
            if c.prep == Prep::Pin {
                // SAFETY: undoing the mlock above.
                unsafe { libc::munlock(src_addr as *const _, size) };
            }
            if i >= warm {
                times.push(t);
            }
            pair.origin_done(seq)?;
        }
        w.barrier()?;
        if me == 0 {
            times.sort_by(f64::total_cmp);
            let s1 = w.part_stats().snapshot();
            let get = |k: &str| {
                let v = |s: &[(&str, u64)]| s.iter().find(|&&(n, _)| n == k).map_or(0, |&(_, v)| v);
                v(&s1) - v(&s0)
            };
            let puts = (warm + iters) as f64;
            rows += &format!(
                "{}\t{}\t{:.2}\t{:.2}\t{:.2}\t{}\t{:.2}\t{:.2}\n",
                c.name,
                size,
                percentile(&times, 0.5),
                times[0],
                times[times.len() - 1],
                times.len(),
                (get("faults_dst") + get("faults_src")) as f64 / puts,
                get("retransmissions") as f64 / puts
            );
        }
    }
    if me == 0 {
        pair.append_rows(OUT_ENV, &rows)?;
    }
    pair.finish()
}
