//! Logging the gets a rank serves, so that an origin that dies can replay them (section 4.4,
//! Figure 5), in the four designs of `bench get-logging`:
//!
//! ```text
//! no-ft  nothing is logged (a replacement fetches everything again)
//! aa     the served pages are marked R=1, RL=1, RLD=1: the get leaves a copy of what it read
//!        in the target's access log; the target's handler files it under its origin
//! rma    the origin, after its get, claims room in the target's log with a fetch-add and puts
//!        the record there: the data goes back over the network. Its records are framed
//!        (magic, CRC-32, 8-byte aligned) because an origin that dies between its claim and
//!        its put leaves a hole of unknown length: readers step over it 8 bytes at a time
//!        to the next whole record, and a trim zeroes the log so no old record reads as new
//! am     the origin sends the record to the target in an active message and waits until it
//!        has arrived (as the rma design's put completes remotely); the handler files it
//! ```
//! A record is (origin, address, length, bytes). A replacement asks every target for the
//! records of its origin (aa, am: a request the target answers from its store; rma: it reads
//! the target's log with gets), in the order the gets were made.

use crate::ask::Answers;
use activerma::{Actions, AmCtx, Error, LogEntry, LogOp, Notify, Rank, RemotePtr, Result, Segment, World};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    NoFt,
    Aa,
    Rma,
    Am,
}

impl Variant {
    pub const ALL: [Variant; 4] = [Variant::NoFt, Variant::Aa, Variant::Rma, Variant::Am];

    pub fn name(self) -> &'static str {
        match self {
            Variant::NoFt => "no-ft",
            Variant::Aa => "aa",
            Variant::Rma => "rma",
            Variant::Am => "am",
        }
    }

    pub fn parse(text: &str) -> Result<Variant> {
        Variant::ALL
            .into_iter()
            .find(|v| v.name() == text)
            .ok_or_else(|| Error::InvalidArgument(format!("get-logging design {text:?}: expected one of no-ft, aa, rma, am")))
    }
}

/// How the aa design's access log is handled at each target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AaLog {
    /// Nobody files a record while the program runs (`Notify::Hold`): the log is the store,
    /// as the paper's IOMMU leaves it, and the target's CPU does nothing for a get. It is made
    /// at the first `arm` to hold everything one origin gets here between trims.
    Hold,
    /// The target's progress files records into its store as they come (`Notify::Poll`): a log
    /// of `bytes`; when it is full origins wait (back-pressure), nothing is lost.
    Poll { bytes: usize },
}

/// The Active Access domain of the logged pages.
const DOMAIN: u16 = 10;
const LOG_AM: u16 = activerma::FIRST_USER_HANDLER + 20;
const ASK_AM: u16 = activerma::FIRST_USER_HANDLER + 21;
const ANSWER_AM: u16 = activerma::FIRST_USER_HANDLER + 22;
const FENCE_AM: u16 = activerma::FIRST_USER_HANDLER + 23;
/// A record's header: origin, address, length (u64 each); the bytes follow.
pub(crate) const HEADER: usize = 24;
/// The rma log: the claimed byte count, then records.
const RMA_RECORDS_AT: usize = 64;
/// An rma record: magic (4), CRC-32 of the rest (4), origin, address, length (u64 each), then
/// the bytes, padded to 8.
const RMA_HEADER: usize = 8 + HEADER;
const RMA_MAGIC: u32 = u32::from_le_bytes(*b"GLOG");

/// One logged get, as a replacement replays it.
#[derive(Debug)]
pub struct Record {
    pub addr: u64,
    pub data: Vec<u8>,
}

/// An rma record's bytes in the log: header and data, padded to 8.
fn rma_record_len(data_len: usize) -> usize {
    RMA_HEADER + data_len.next_multiple_of(8)
}

/// Builds an rma record of `data` into `out` (cleared first).
fn rma_record(out: &mut Vec<u8>, origin: Rank, addr: u64, data: &[u8]) {
    out.clear();
    out.extend_from_slice(&RMA_MAGIC.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&header(origin, addr, data.len()));
    out.extend_from_slice(data);
    out.resize(rma_record_len(data.len()), 0);
    let crc = crc32fast::hash(&out[8..]);
    out[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// The records of `origin` in an rma log's `used` bytes. A stretch that is not a whole record
/// — room an origin claimed and died before writing, or wrote in part — is stepped over 8
/// bytes at a time up to the next whole one (a trim zeroed the log, so no older record is
/// left to pass for one; a stray match of magic and CRC-32 is a 2^-64 chance).
fn parse_rma(bytes: &[u8], origin: Rank) -> Vec<Record> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + RMA_HEADER <= bytes.len() {
        let len = word(bytes, at + 24) as usize;
        let whole = word(bytes, at) as u32 == RMA_MAGIC
            && len <= bytes.len()
            && at + rma_record_len(len) <= bytes.len()
            && crc32fast::hash(&bytes[at + 8..at + rma_record_len(len)]).to_le_bytes() == bytes[at + 4..at + 8];
        if !whole {
            at += 8;
            continue;
        }
        if word(bytes, at + 8) as Rank == origin {
            out.push(Record { addr: word(bytes, at + 16), data: bytes[at + RMA_HEADER..at + RMA_HEADER + len].to_vec() });
        }
        at += rma_record_len(len);
    }
    out
}

/// Records filed per origin (aa, am): header + bytes, one after another.
type Store = Arc<Mutex<Vec<Vec<u8>>>>;

/// Every design's state at once (handlers, the aa log, the rma log), so that one job can run
/// the designs side by side; each call names the design it is for.
pub struct GetLog {
    w: World,
    store: Store,
    aa_mode: AaLog,
    /// The aa design's access log, once made (a Hold log's size depends on the buckets).
    aa_log: Option<usize>,
    /// The rma design's log at each rank (every rank's copy of the same segment).
    rma_log: Segment,
    /// Answers to a replacement's requests for its records.
    answers: Answers,
    /// Bytes this rank sent back to targets to log its gets (rma, am).
    pub bytes_sent_back: u64,
    /// The record being sent (rma, am): one buffer for every get, no allocation per get.
    record: Vec<u8>,
    /// Trim fences that arrived from each origin and were not consumed yet.
    fences: Arc<Vec<AtomicU64>>,
    /// Failure injection (rma): this process dies right after its n-th claim of room in a
    /// target's log, before the record goes in — the hole readers must step over (0: never).
    pub kill_after_claims: u64,
    claims: u64,
}

fn header(origin: Rank, addr: u64, len: usize) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..8].copy_from_slice(&(origin as u64).to_le_bytes());
    h[8..16].copy_from_slice(&addr.to_le_bytes());
    h[16..].copy_from_slice(&(len as u64).to_le_bytes());
    h
}

fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The records of `origin` among filed records (header + bytes).
fn parse(bytes: &[u8], origin: Rank) -> Result<Vec<Record>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if at + HEADER > bytes.len() {
            return Err(Error::InvalidArgument(format!("a get log ends inside a record header at byte {at}")));
        }
        let (o, addr, len) = (word(bytes, at) as Rank, word(bytes, at + 8), word(bytes, at + 16) as usize);
        let end = at + HEADER + len;
        if end > bytes.len() {
            return Err(Error::InvalidArgument(format!("a get log ends inside a record of {len} bytes at byte {at}")));
        }
        if o == origin {
            out.push(Record { addr, data: bytes[at + HEADER..end].to_vec() });
        }
        at = end;
    }
    Ok(out)
}

impl GetLog {
    /// Sets up the logs (every rank, in the same order as its other allocations): between two
    /// trims one rank serves at most `max_gets` gets of `max_bytes` in all.
    pub fn new(w: &World, max_gets: usize, max_bytes: usize, aa_mode: AaLog) -> Result<GetLog> {
        let n = w.size();
        let store: Store = Arc::new(Mutex::new(vec![Vec::new(); n]));
        let rma_bytes = RMA_RECORDS_AT + max_bytes + max_gets * (RMA_HEADER + 7);
        let rma_log = w.alloc_segment(rma_bytes)?;
        let s = store.clone();
        w.register_handler(
            LOG_AM,
            Arc::new(move |ctx: &AmCtx, p: &[u8]| {
                s.lock().unwrap()[ctx.src].extend_from_slice(p);
            }),
        )?;
        let fences: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
        let f = fences.clone();
        w.register_handler(
            FENCE_AM,
            Arc::new(move |ctx: &AmCtx, _: &[u8]| {
                f[ctx.src].fetch_add(1, Ordering::AcqRel);
            }),
        )?;
        let (s, wc) = (store.clone(), w.clone());
        let answers = Answers::register(w, ASK_AM, ANSWER_AM, move |ctx: &AmCtx| {
            // Whatever the origin's gets left in our access log is filed first (a rank that
            // never ran aa has no log: nothing to file).
            let _ = wc.drain_log(DOMAIN);
            s.lock().unwrap()[ctx.src].clone()
        })?;
        Ok(GetLog {
            w: w.clone(),
            store,
            aa_mode,
            aa_log: None,
            rma_log,
            answers,
            bytes_sent_back: 0,
            record: Vec::new(),
            fences,
            kill_after_claims: 0,
            claims: 0,
        })
    }

    /// Makes the aa design's log (see `AaLog`). A Hold log's lanes must hold everything an
    /// origin gets here between trims: `max_bucket` bytes in `chunk`-byte gets.
    fn make_aa_log(&mut self, max_bucket: usize, chunk: usize) -> Result<()> {
        if self.aa_log.is_some() {
            return Ok(());
        }
        let (capacity, notify) = match self.aa_mode {
            AaLog::Hold => {
                // A half more for buckets larger than the ones this first arm is told of.
                let gets = (max_bucket / chunk.max(1) + 2) * 3 / 2;
                let capacity = activerma::log_capacity_to_hold(self.w.size(), gets, chunk).ok_or_else(|| {
                    Error::OutOfResources(format!("a get log holding {gets} gets of {chunk} B per origin exceeds a log's largest size"))
                })?;
                (capacity, Notify::Hold)
            }
            AaLog::Poll { bytes } => (bytes, Notify::Poll),
        };
        let s = self.store.clone();
        self.w.create_log(
            DOMAIN,
            capacity,
            notify,
            Arc::new(move |e: &LogEntry| {
                if e.meta.op != LogOp::Get {
                    return;
                }
                let mut s = s.lock().unwrap();
                let filed = &mut s[e.meta.origin as usize];
                if e.meta.offset == 0 {
                    filed.extend_from_slice(&header(e.meta.origin as usize, e.meta.addr, e.meta.total_len as usize));
                }
                filed.extend_from_slice(e.data());
            }),
        )?;
        self.aa_log = Some(capacity);
        Ok(())
    }

    /// Marks this rank's served pages so that gets to them are logged (aa), or not (the
    /// others); again after a replacement's restore, whose table starts empty. `max_bucket`:
    /// the most bytes one origin gets from this rank, in `chunk`-byte gets.
    pub fn arm(&mut self, variant: Variant, served: &Segment, max_bucket: usize, chunk: usize) -> Result<()> {
        if variant == Variant::Aa {
            self.make_aa_log(max_bucket, chunk)?;
        }
        let actions = match variant {
            Variant::Aa => Actions::W | Actions::R | Actions::RL | Actions::RLD,
            _ => Actions::W | Actions::R,
        };
        let domain = (variant == Variant::Aa).then_some(DOMAIN);
        self.w.assoc_pages(served.as_ptr(), served.len(), actions, domain)?;
        Ok(())
    }

    /// Logs a get this rank made of `data` at `at` (rma, am; aa logged it in the get).
    pub fn after_get(&mut self, variant: Variant, at: RemotePtr, data: &[u8]) -> Result<()> {
        if matches!(variant, Variant::Aa | Variant::NoFt) {
            return Ok(());
        }
        match variant {
            Variant::Rma => {
                rma_record(&mut self.record, self.w.rank(), at.addr as u64, data);
                let size = self.record.len() as u64;
                let claimed = self.w.fetch_add(self.rma_log.remote(at.rank, 0), size)? as usize;
                let place = RMA_RECORDS_AT + claimed;
                if place + size as usize > self.rma_log.len() {
                    return Err(Error::OutOfResources(format!("rank {}'s get log is full ({} bytes)", at.rank, self.rma_log.len())));
                }
                self.claims += 1;
                if self.claims == self.kill_after_claims {
                    // SAFETY: raise(2) on our own process.
                    unsafe { libc::raise(libc::SIGKILL) };
                }
                self.bytes_sent_back += size + 8;
                // Readers take records only after a trim's fences or a death: header and data
                // in one put need no order between them.
                let put = self.w.put(self.rma_log.remote(at.rank, place), &self.record);
                if let Err(Error::RankFailed { rank, .. }) = put {
                    // The target died between the claim and the record: once it is back, the
                    // record goes in anew (its replacement's log is a new one; nothing is
                    // written at the old claim, which may be another origin's room there).
                    self.w.wait_for_rank(rank)?;
                    return self.after_get(variant, at, data);
                }
                put?;
            }
            _ => {
                self.record.clear();
                self.record.extend_from_slice(&header(self.w.rank(), at.addr as u64, data.len()));
                self.record.extend_from_slice(data);
                // The same guarantee as the other designs: the rma design's blocking put and
                // the aa design's get (whose entry is written before it completes) return
                // with the record at the target. On a network a record still on the wire is
                // not there yet, so the origin waits for its arrival, which the modelled
                // network charges as it charges the put's remote completion.
                self.w.send_am_arrived(at.rank, LOG_AM, 0, &self.record)?;
                self.bytes_sent_back += self.record.len() as u64;
            }
        }
        Ok(())
    }

    /// Drops every record (after a checkpoint: gets before it are never replayed).
    /// Collective, with no gets in flight: it first waits until every record sent before it
    /// is filed — am records travel on their own, so each rank sends every other a fence
    /// behind its records (messages between two ranks arrive in order) — and no rank gets
    /// again before every rank has trimmed (a barrier at the end): a record of a later get is
    /// never dropped. Records sent to a rank that died are gone with it. A rank that dies
    /// during the trim makes it fail with `Error::RankFailed` (the fences it owed never come)
    /// once every live rank's fence is in: each survivor still sends its fences to all the
    /// others and takes theirs, so that no survivor waits for a fence a failing one kept back,
    /// and none is left over to pass for the next trim's. The trim is then not retried: the
    /// records are as they were — see docs/design/recovery.md.
    pub fn trim(&mut self) -> Result<()> {
        let w = self.w.clone();
        let (me, n) = (w.rank(), w.size());
        let mut failed = None;
        for t in (0..n).filter(|&t| t != me) {
            if let Err(e) = w.send_am(t, FENCE_AM, 0, &[]) {
                failed.get_or_insert(e);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        for o in (0..n).filter(|&o| o != me) {
            while self.fences[o].load(Ordering::Acquire) == 0 {
                w.progress();
                if let Err(e) = w.check_alive(o) {
                    failed.get_or_insert(e);
                    break;
                }
                if Instant::now() > deadline {
                    return Err(Error::Timeout { what: format!("rank {o}'s logged gets to arrive"), secs: 60.0 });
                }
            }
            if self.fences[o].load(Ordering::Acquire) > 0 {
                self.fences[o].fetch_sub(1, Ordering::AcqRel);
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        if self.aa_log.is_some() {
            w.drain_log(DOMAIN)?;
        }
        self.store.lock().unwrap().iter_mut().for_each(Vec::clear);
        // Zeroed, not only emptied: a hole a dying origin leaves later must not read as an
        // older record.
        let used = (self.rma_log.read_u64(0) as usize).min(self.rma_log.len() - RMA_RECORDS_AT);
        self.rma_log.write_local(RMA_RECORDS_AT, &vec![0; used]);
        self.rma_log.write_local(0, &0u64.to_le_bytes());
        w.barrier()
    }

    /// The records of this rank's gets, per target, in the order it made them: what a
    /// replacement replays. Asks every other rank (they serve requests while they wait for it).
    /// Other ranks may go on logging meanwhile: the rma design reads the targets' logs with
    /// gets, and a record another origin has claimed but not yet written (or only in part) is
    /// not whole, so it is stepped over like a dead origin's hole; this rank's own records
    /// were all written before it died.
    pub fn my_records(&self, variant: Variant) -> Result<Vec<Vec<Record>>> {
        let (me, n) = (self.w.rank(), self.w.size());
        let mut out: Vec<Vec<Record>> = (0..n).map(|_| Vec::new()).collect();
        match variant {
            Variant::NoFt => {}
            Variant::Rma => {
                for (t, records) in out.iter_mut().enumerate().filter(|(t, _)| *t != me) {
                    let used = self.w.fetch(self.rma_log.remote(t, 0))? as usize;
                    let mut bytes = vec![0u8; used];
                    self.w.get(self.rma_log.remote(t, RMA_RECORDS_AT), &mut bytes)?;
                    *records = parse_rma(&bytes, me);
                }
            }
            Variant::Aa | Variant::Am => {
                for (t, bytes) in self.answers.ask_everyone(&self.w, ASK_AM)? {
                    out[t] = parse(&bytes, me)?;
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rma_readers_step_over_holes_and_torn_records() {
        let mut log = Vec::new();
        let mut record = Vec::new();
        let mut append = |log: &mut Vec<u8>, origin: Rank, addr: u64, data: &[u8]| {
            rma_record(&mut record, origin, addr, data);
            log.extend_from_slice(&record);
        };
        append(&mut log, 1, 0x1000, &[1, 2, 3]);
        // Room an origin claimed and died before writing (a zeroed log reads zeros).
        log.extend_from_slice(&vec![0; rma_record_len(13)]);
        append(&mut log, 2, 0x2000, &[4; 16]);
        // A record cut short: its header went in, its bytes did not.
        let torn_at = log.len();
        append(&mut log, 1, 0x3000, &[5; 40]);
        log[torn_at + RMA_HEADER..torn_at + RMA_HEADER + 40].fill(0);
        append(&mut log, 1, 0x4000, &[6; 8]);
        let got: Vec<(u64, Vec<u8>)> = parse_rma(&log, 1).into_iter().map(|r| (r.addr, r.data)).collect();
        assert_eq!(got, vec![(0x1000, vec![1, 2, 3]), (0x4000, vec![6; 8])]);
        assert_eq!(parse_rma(&log, 2).len(), 1);
        // Cut off inside the last record: that one is not whole.
        assert_eq!(parse_rma(&log[..log.len() - 8], 1).len(), 1);
    }
}
