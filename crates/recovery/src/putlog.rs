//! Sender-based logging of puts (section 4.4: "logging puts is simple — the origin keeps what
//! it sent"), for puts a target applies itself (an active put its log handler runs, an active
//! message): the sender keeps a record of each put per target, the target counts the puts it
//! applied per origin. A replacement of rank r asks every survivor s for
//!
//! ```text
//! applied  how many of r's puts s applied since the last trim (r's dead predecessor sent them):
//!          when r runs its steps again it skips that many of its puts to s — none twice
//! records  every put s sent to r since the last trim, in order: r applies them again after
//!          restoring its checkpoint — none lost
//! ```
//! Both sides forget at a trim, which follows a checkpoint taken when every put is applied.
//! What a record holds and how it is applied is the program's (a key for the DHT's insert).

use crate::ask::Answers;
use activerma::{Rank, Result, World};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const ASK_AM: u16 = activerma::FIRST_USER_HANDLER + 24;
const ANSWER_AM: u16 = activerma::FIRST_USER_HANDLER + 25;

/// Puts applied here per origin since the last trim: the program's handler counts each put it
/// applies (clone it into the handler).
#[derive(Clone)]
pub struct Applied(Arc<Vec<AtomicU64>>);

impl Applied {
    /// One put from `origin` is applied (its effect is in this rank's memory).
    pub fn count(&self, origin: Rank) {
        self.0[origin].fetch_add(1, Ordering::AcqRel);
    }

    fn of(&self, origin: Rank) -> u64 {
        self.0[origin].load(Ordering::Acquire)
    }
}

/// What one survivor told a replacement.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Incoming {
    /// How many of the replacement's rank's puts the survivor applied since the last trim.
    pub applied: u64,
    /// The puts the survivor sent to the replacement's rank since the last trim, in order.
    pub records: Vec<Vec<u8>>,
}

/// Every rank's sender-side records and target-side counts.
pub struct PutLog {
    w: World,
    sent: Arc<Mutex<Vec<Vec<Vec<u8>>>>>,
    applied: Applied,
    answers: Answers,
}

fn encode(applied: u64, records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = applied.to_le_bytes().to_vec();
    for r in records {
        out.extend((r.len() as u64).to_le_bytes());
        out.extend(r);
    }
    out
}

fn decode(bytes: &[u8]) -> Result<Incoming> {
    let bad = |what: &str| activerma::Error::InvalidArgument(format!("a put log answer {what}"));
    let word = |at: usize| bytes.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()));
    let applied = word(0).ok_or_else(|| bad("has no applied count"))?;
    let (mut records, mut at) = (Vec::new(), 8);
    while at < bytes.len() {
        let len = word(at).ok_or_else(|| bad("ends inside a record's length"))? as usize;
        let data = bytes.get(at + 8..at + 8 + len).ok_or_else(|| bad("ends inside a record"))?;
        records.push(data.to_vec());
        at += 8 + len;
    }
    Ok(Incoming { applied, records })
}

impl PutLog {
    /// Every rank, in the same order as its other handler registrations. `before_answer` runs
    /// at a survivor before it answers a replacement: it must apply whatever puts the dead
    /// process left to be applied (drain an active-put log, serve queued messages), so that the
    /// count it reports is final.
    pub fn new(w: &World, before_answer: impl Fn() + Send + Sync + 'static) -> Result<PutLog> {
        let n = w.size();
        let sent: Arc<Mutex<Vec<Vec<Vec<u8>>>>> = Arc::new(Mutex::new(vec![Vec::new(); n]));
        let applied = Applied(Arc::new((0..n).map(|_| AtomicU64::new(0)).collect()));
        let (s, a) = (sent.clone(), applied.clone());
        let answers = Answers::register(w, ASK_AM, ANSWER_AM, move |ctx| {
            before_answer();
            encode(a.of(ctx.src), &s.lock().unwrap()[ctx.src])
        })?;
        Ok(PutLog { w: w.clone(), sent, applied, answers })
    }

    /// The target side's counter, for the handler that applies puts.
    pub fn applied(&self) -> Applied {
        self.applied.clone()
    }

    /// Records a put this rank sent to `target` (call it when the put is issued).
    pub fn sent(&self, target: Rank, record: &[u8]) {
        self.sent.lock().unwrap()[target].push(record.to_vec());
    }

    /// Forgets every record and count — after a checkpoint that every rank took with all puts
    /// applied (active flush, barrier, checkpoint, trim, barrier).
    pub fn trim(&self) {
        self.sent.lock().unwrap().iter_mut().for_each(Vec::clear);
        self.applied.0.iter().for_each(|a| a.store(0, Ordering::Release));
    }

    /// A replacement's question to every other rank: what each applied of this rank's puts and
    /// what each sent here, indexed by rank (this rank's own entry empty). Fails with
    /// `Error::RankFailed` if a rank dies before it answered.
    pub fn recover(&self) -> Result<Vec<Incoming>> {
        let mut out = vec![Incoming::default(); self.w.size()];
        for (t, bytes) in self.answers.ask_everyone(&self.w, ASK_AM)? {
            out[t] = decode(&bytes)?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_round_trip() {
        let records = vec![vec![1u8, 2, 3], vec![], vec![9u8; 17]];
        assert_eq!(decode(&encode(5, &records)).unwrap(), Incoming { applied: 5, records });
        assert_eq!(decode(&encode(0, &[])).unwrap(), Incoming::default());
    }

    #[test]
    fn a_truncated_answer_is_an_error() {
        let bytes = encode(1, &[vec![7u8; 10]]);
        for cut in [0, 4, 12, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }
}
