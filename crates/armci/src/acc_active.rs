//! Accumulate through Active Access (ACTIVERMA_ARMCI_ACC=active; ours, beyond the paper): an
//! accumulate is an active put whose handler at the target adds the data, instead of a get, a
//! combine and a put under the target's lock.
//!
//! ```text
//! init (collective): MAILBOX = a segment of HEADER + CHUNK bytes per rank; each rank marks its
//!     own W=0, WL=1, WLD=1 in domain ACC_DOMAIN (puts there are logged with their data, not
//!     written) and creates that domain's log, drained by a thread woken per entry
//! origin, per piece (src, dst, n), per CHUNK of it:
//!     record = [dst: u64][kind: u32][n: u32] ++ scale * src     (scaled here, element-wise)
//!     records packed into entries of at most HEADER + CHUNK bytes; each entry:
//!     put(MAILBOX on p, entry)                                  (an active put: logged at p)
//!     note p as having accumulates not yet applied (in_flight.rs)
//! target handler, per record: dst inside one of its ARMCI allocations?  dst[i] += data[i]
//! completion: whatever next touches p (a get, a fence, a barrier) first runs active_flush(p),
//!     which returns once p ran the handlers of every entry this rank logged there
//! ```
//!
//! Atomic per element across origins: a log's handler runs one entry at a time (its consumer
//! guard), so accumulates into the same elements never interleave, and no lock is taken. The
//! origin computes scale * src (`scale_into`, as for MPI_Accumulate).

use crate::accumulate::{scale_into, AccType, Scale};
use crate::errors::R;
use crate::in_flight;
use crate::state::{inside_allocation, rt};
use activerma::{Actions, Element, LogEntry, Notify, RemotePtr, Segment, World};
use std::sync::{Arc, OnceLock};

/// The domain of the accumulate log: the last one, out of the way of the program's own.
const ACC_DOMAIN: u16 = (activerma::MAX_DOMAINS - 1) as u16;
/// Data bytes per entry (a multiple of every element size).
const CHUNK: usize = 4096;
/// A record's header: dst (8), kind (4), n (4).
const HEADER: usize = 16;
/// An entry's bytes at most: one record of a whole CHUNK, or many small ones.
const MAILBOX_BYTES: usize = HEADER + CHUNK;
/// The accumulate log: room for many chunks from every origin (each origin has its own lane).
const LOG_BYTES: usize = 4 << 20;

/// Each rank's mailbox segment, marked for logging: set by `setup` when the run asks for it.
static MAILBOX: OnceLock<Segment> = OnceLock::new();

/// A record's element kind: Element as a number (complex types travel as pairs of their reals).
fn kind_code(e: Element) -> u32 {
    match e {
        Element::I32 => 0,
        Element::I64 => 1,
        Element::F32 => 2,
        Element::F64 => 3,
    }
}

/// Whether accumulates go through Active Access in this run.
pub(crate) fn enabled() -> bool {
    MAILBOX.get().is_some()
}

/// Collective, at ARMCI_Init, when ACTIVERMA_ARMCI_ACC=active: the mailbox, its log and marks.
pub(crate) fn setup(w: &World) -> R {
    let seg = w.alloc_segment(MAILBOX_BYTES).map_err(rt)?;
    let notify = if w.config().is_set(activerma::settings::AA_NOTIFY) {
        Notify::from_config(w.config()).map_err(rt)?
    } else {
        Notify::Wake { threshold: 1 }
    };
    let me = w.rank();
    w.create_log(ACC_DOMAIN, LOG_BYTES, notify, Arc::new(move |e: &LogEntry| apply_entry(me, e.data()))).map_err(rt)?;
    w.assoc_pages(seg.as_ptr(), seg.len(), Actions::WL | Actions::WLD, Some(ACC_DOMAIN)).map_err(rt)?;
    // Every mailbox is marked before anyone accumulates.
    w.barrier().map_err(rt)?;
    let _ = MAILBOX.set(seg);
    Ok(())
}

/// Logs already-checked pieces (local src, remote dst, bytes) at rank p, scaled here: records
/// of [dst, kind, n] ++ data packed into entries of up to CHUNK data bytes, so a strided
/// accumulate of many small rows is a few log entries (a few handler runs), not one per row.
pub(crate) unsafe fn apply(w: &World, t: AccType, scale: Scale, p: usize, pieces: &[(usize, usize, usize)]) -> R {
    let mailbox = RemotePtr::new(p, MAILBOX.get().ok_or("accumulate through Active Access is not set up")?.remote(p, 0).addr);
    let mut entry = Vec::with_capacity(MAILBOX_BYTES);
    for &(src, dst, n) in pieces {
        let src = std::slice::from_raw_parts(src as *const u8, n);
        for (k, part) in src.chunks(CHUNK).enumerate() {
            if entry.len() + HEADER + part.len() > MAILBOX_BYTES {
                w.put(mailbox, &entry).map_err(rt)?;
                entry.clear();
            }
            entry.extend_from_slice(&((dst + k * CHUNK) as u64).to_ne_bytes());
            entry.extend_from_slice(&kind_code(t.element()).to_ne_bytes());
            entry.extend_from_slice(&(part.len() as u32).to_ne_bytes());
            let at = entry.len();
            entry.resize(at + part.len(), 0);
            scale_into(scale, &mut entry[at..], part);
        }
    }
    if !entry.is_empty() {
        w.put(mailbox, &entry).map_err(rt)?;
    }
    in_flight::note_active_accumulate(p);
    Ok(())
}

/// The target's handler: adds each record of an entry to its destination, after checking that
/// the destination lies in one of this rank's ARMCI allocations (a record that does not is
/// reported and dropped, with the rest of its entry: nothing is written outside them).
fn apply_entry(me: usize, mut data: &[u8]) {
    while !data.is_empty() {
        let Some((head, rest)) = data.split_at_checked(HEADER) else {
            eprintln!("ARMCI [rank {me}]: dropped a malformed accumulate record of {} bytes", data.len());
            return;
        };
        let dst = u64::from_ne_bytes(head[..8].try_into().unwrap()) as usize;
        let kind = u32::from_ne_bytes(head[8..12].try_into().unwrap());
        let n = u32::from_ne_bytes(head[12..16].try_into().unwrap()) as usize;
        let size = match kind {
            0 | 2 => 4,
            1 | 3 => 8,
            _ => 0,
        };
        if n > rest.len() || size == 0 || !n.is_multiple_of(size) || !inside_allocation(me, dst, n) {
            eprintln!("ARMCI [rank {me}]: dropped an accumulate record for {dst:#x}+{n} (kind {kind}): not inside an ARMCI allocation of this rank, or malformed");
            return;
        }
        let (body, next) = rest.split_at(n);
        // SAFETY: [dst, dst + n) lies in one of our ARMCI allocations (checked above).
        add(kind, unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, n) }, body);
        data = next;
    }
}

/// d[i] += s[i] for elements of `kind`.
fn add(kind: u32, d: &mut [u8], s: &[u8]) {
    fn each<const N: usize>(d: &mut [u8], s: &[u8], f: impl Fn([u8; N], [u8; N]) -> [u8; N]) {
        for (d, s) in d.chunks_exact_mut(N).zip(s.chunks_exact(N)) {
            let r = f((&*d).try_into().unwrap(), s.try_into().unwrap());
            d.copy_from_slice(&r);
        }
    }
    match kind {
        0 => each::<4>(d, s, |a, b| i32::from_ne_bytes(a).wrapping_add(i32::from_ne_bytes(b)).to_ne_bytes()),
        1 => each::<8>(d, s, |a, b| i64::from_ne_bytes(a).wrapping_add(i64::from_ne_bytes(b)).to_ne_bytes()),
        2 => each::<4>(d, s, |a, b| (f32::from_ne_bytes(a) + f32::from_ne_bytes(b)).to_ne_bytes()),
        _ => each::<8>(d, s, |a, b| (f64::from_ne_bytes(a) + f64::from_ne_bytes(b)).to_ne_bytes()),
    }
}
