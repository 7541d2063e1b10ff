//! The DSM's messages: handler ids and the layout of their payloads (little-endian words).
//!
//! ```text
//! FETCH      [ref][seq][receive buffer offset or NONE][its capacity]   requester -> home
//! REPLY      body (token = seq)                                        home -> requester
//!            or, into the receive buffer by RMA: [seq (put last)][body]
//! DIFF       [ref][diff ranges]                                        writer -> home
//! DIFF_ACK   body                                                      home -> writer
//! LOCK, UNLOCK, WAIT   [ref];  NOTIFY [ref][all]                       rank -> home
//! GRANT      [ref] body                                                home -> the new owner
//! RECALL     [ref]      the home wants a lock back that a rank keeps (lock_cache.rs): it
//!            answers with UNLOCK when it is not inside, else at its unlock
//! ALLOC      [bytes][chunk]  ->  ANSWER body [ref]                     rank -> the home it names
//! FREE       [ref]           ->  ANSWER body                           rank -> home
//! FREED_NOTICE [ref] -> NOTICE_ACK   the freeing rank tells every rank a region is gone
//! JOIN       [ref]           ->  ANSWER body [len][meta]               update-in-place, first touch
//! SUBSCRIBE  [ref][copy]     ->  ANSWER body: the master is in the copy and its twin
//! FAILED     body            a sync call a home refused, reported at the rank's next call
//! PLACE      [ref]           ->  ANSWER body [offset][len]             page-granular mode: where a
//!            region lies in its home's heap (so in the home's mirror), asked once per region
//! DIFF_PAGE  [page offset][diff ranges] -> DIFF_ACK                    page-granular mode: a
//!            written mirror page's changes against its twin, into the home's heap
//! PING       -> ANSWER body                                            the round trip a lock's
//!            lease is fitted to, measured once by `Dsm::new`
//! body = [status: 0 ok, 1 error][payload: the data, or the error's text]
//! REPLY's payload (and the RMA reply's) = [len][the region's bytes]
//! ```
//! Handler ids: `FIRST_USER_HANDLER + 100 ..= + 120` (a program that registers its own
//! handlers next to the DSM must keep clear of them).

use activerma::FIRST_USER_HANDLER;

pub(crate) const FETCH: u16 = FIRST_USER_HANDLER + 100;
pub(crate) const REPLY: u16 = FIRST_USER_HANDLER + 101;
pub(crate) const DIFF: u16 = FIRST_USER_HANDLER + 102;
pub(crate) const DIFF_ACK: u16 = FIRST_USER_HANDLER + 103;
pub(crate) const LOCK: u16 = FIRST_USER_HANDLER + 104;
pub(crate) const UNLOCK: u16 = FIRST_USER_HANDLER + 105;
pub(crate) const WAIT: u16 = FIRST_USER_HANDLER + 106;
pub(crate) const NOTIFY: u16 = FIRST_USER_HANDLER + 107;
pub(crate) const GRANT: u16 = FIRST_USER_HANDLER + 108;
pub(crate) const ALLOC: u16 = FIRST_USER_HANDLER + 109;
pub(crate) const ANSWER: u16 = FIRST_USER_HANDLER + 110;
pub(crate) const FREE: u16 = FIRST_USER_HANDLER + 111;
pub(crate) const FREED_NOTICE: u16 = FIRST_USER_HANDLER + 112;
pub(crate) const FAILED: u16 = FIRST_USER_HANDLER + 113;
pub(crate) const JOIN: u16 = FIRST_USER_HANDLER + 114;
pub(crate) const SUBSCRIBE: u16 = FIRST_USER_HANDLER + 115;
pub(crate) const NOTICE_ACK: u16 = FIRST_USER_HANDLER + 116;
pub(crate) const RECALL: u16 = FIRST_USER_HANDLER + 117;
pub(crate) const PLACE: u16 = FIRST_USER_HANDLER + 118;
pub(crate) const DIFF_PAGE: u16 = FIRST_USER_HANDLER + 119;
pub(crate) const PING: u16 = FIRST_USER_HANDLER + 120;

/// "No receive buffer": the reply comes as a message.
pub(crate) const NONE: u64 = u64::MAX;
/// The RMA reply's bytes before the body: the sequence word the requester spins on.
pub(crate) const RDMA_FLAG: usize = 8;

pub(crate) fn word(b: &[u8], i: usize) -> Option<u64> {
    b.get(i * 8..i * 8 + 8).map(|w| u64::from_le_bytes(w.try_into().unwrap()))
}

pub(crate) fn words(ws: &[u64]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// A successful body carrying `payload`.
pub(crate) fn ok(prefix: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(prefix.len() + 1 + payload.len());
    b.extend_from_slice(prefix);
    b.push(0);
    b.extend_from_slice(payload);
    b
}

/// A refusal carrying why.
pub(crate) fn refused(prefix: &[u8], why: &str) -> Vec<u8> {
    let mut b = prefix.to_vec();
    b.push(1);
    b.extend_from_slice(why.as_bytes());
    b
}

/// The payload of a body, or the refusal's text.
pub(crate) fn body(b: &[u8]) -> Result<&[u8], String> {
    match b.first() {
        Some(0) => Ok(&b[1..]),
        Some(1) => Err(String::from_utf8_lossy(&b[1..]).into_owned()),
        _ => Err("a DSM reply without a status".into()),
    }
}
