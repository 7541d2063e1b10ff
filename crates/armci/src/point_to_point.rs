//! armci_msg_snd / armci_msg_rcv / armci_msg_rcvany: tagged point-to-point messages (Global
//! Arrays' tree collectives use them), carried by one activerma active message each; and the
//! collectives over part of the job (groups) built on the same messages.
//!
//! ```text
//! snd(tag, buf, len, to):   active message to `to`, tag in its token (blocking: the bytes are
//!                           copied out when it returns)
//! handler at the receiver:  MAILBOX.push((source, kind, tag, bytes))
//! rcv(tag, buf, cap, len, from): progress until MAILBOX holds a message from `from` with `tag`;
//!                           take the oldest (messages of one source arrive in order)
//! group_allgather(members, mine):   (kind GROUP, tag = a hash of the member list)
//!     members[0] takes one message from each other member in order, then sends every one of
//!     them the whole list; the others send theirs to members[0] and take the list back
//! ```
//! User messages and the runtime's group messages are told apart by their kind, so a program's
//! tags never meet a collective's.

use crate::errors::{entry, R};
use crate::state::{local_arg, lock, nonneg, proc_arg, rt, world};
use activerma::{AmCtx, HandlerId, World};
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

/// The last handler id: out of the way of programs that use activerma's API beside ARMCI.
const MESSAGE_AM: HandlerId = (activerma::MAX_HANDLERS - 1) as HandlerId;

/// A user message (armci_msg_snd) or one of a group collective.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    User,
    Group,
}

struct Message {
    source: usize,
    kind: Kind,
    tag: c_int,
    bytes: Vec<u8>,
}

/// The token bit that marks a group collective's message.
const GROUP_BIT: u64 = 1 << 32;

static MAILBOX: Mutex<Vec<Message>> = Mutex::new(Vec::new());

/// Installs the receiving handler; called by ARMCI_Init before its first collective, so that
/// no rank sends before every rank can receive.
pub(crate) fn install(w: &World) -> R {
    w.register_handler(
        MESSAGE_AM,
        Arc::new(|ctx: &AmCtx, msg: &[u8]| {
            let kind = if ctx.token & GROUP_BIT != 0 { Kind::Group } else { Kind::User };
            lock(&MAILBOX).push(Message { source: ctx.src, kind, tag: ctx.token as u32 as c_int, bytes: msg.to_vec() })
        }),
    )
    .map_err(rt)
}

/// Waits (making progress) for the oldest message of `kind` with `tag` from `from` (any
/// source: None).
fn take(w: &World, kind: Kind, tag: c_int, from: Option<usize>) -> Message {
    loop {
        {
            let mut mb = lock(&MAILBOX);
            if let Some(i) = mb.iter().position(|m| m.kind == kind && m.tag == tag && from.is_none_or(|f| m.source == f)) {
                return mb.remove(i);
            }
        }
        if w.progress() == 0 {
            std::thread::yield_now();
        }
    }
}

unsafe fn receive(tag: c_int, buf: *mut c_void, cap: c_int, len: *mut c_int, from: Option<usize>) -> R<usize> {
    let w = world()?;
    let cap = nonneg(cap.into(), "buflen")?;
    local_arg(buf, cap, "buffer")?;
    let m = take(w, Kind::User, tag, from);
    if m.bytes.len() > cap {
        return Err(format!("a message of {} bytes from rank {} (tag {tag}) does not fit the {cap}-byte buffer", m.bytes.len(), m.source));
    }
    std::ptr::copy_nonoverlapping(m.bytes.as_ptr(), buf as *mut u8, m.bytes.len());
    if let Some(l) = len.as_mut() {
        *l = m.bytes.len() as c_int;
    }
    Ok(m.source)
}

#[no_mangle]
pub unsafe extern "C" fn armci_msg_snd(tag: c_int, buffer: *mut c_void, len: c_int, to: c_int) {
    entry("armci_msg_snd", || {
        let w = world()?;
        let p = proc_arg(w, to, "to")?;
        let n = nonneg(len.into(), "len")?;
        local_arg(buffer, n, "buffer")?;
        let bytes = if n > 0 { std::slice::from_raw_parts(buffer as *const u8, n) } else { &[] };
        w.send_am(p, MESSAGE_AM, tag as u32 as u64, bytes).map_err(rt)
    })
}

/// Receives the oldest message with `tag` from `from` into buffer (at most buflen bytes; a
/// longer message is an error); its length goes to *msglen (if not NULL).
#[no_mangle]
pub unsafe extern "C" fn armci_msg_rcv(tag: c_int, buffer: *mut c_void, buflen: c_int, msglen: *mut c_int, from: c_int) {
    entry("armci_msg_rcv", || {
        let src = proc_arg(world()?, from, "from")?;
        receive(tag, buffer, buflen, msglen, Some(src)).map(|_| ())
    })
}

/// As armci_msg_rcv from any source; returns the source.
#[no_mangle]
pub unsafe extern "C" fn armci_msg_rcvany(tag: c_int, buffer: *mut c_void, buflen: c_int, msglen: *mut c_int) -> c_int {
    entry("armci_msg_rcvany", || receive(tag, buffer, buflen, msglen, None).map(|s| s as c_int))
}

/// Every member's `mine`, in member order; collective over `members` (job ranks, this rank
/// among them), which every member passes alike.
pub(crate) fn group_allgather(members: &[usize], mine: &[u8]) -> R<Vec<Vec<u8>>> {
    let w = world()?;
    let me = w.rank();
    if !members.contains(&me) {
        return Err(format!("rank {me} is not a member of the group"));
    }
    // FNV-1a of the member list: collectives of different groups never take each other's
    // messages.
    let tag = members.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &m| (h ^ m as u64).wrapping_mul(0x100_0000_01b3)) as u32;
    let token = GROUP_BIT | tag as u64;
    let root = members[0];
    if me != root {
        w.send_am(root, MESSAGE_AM, token, mine).map_err(rt)?;
        return decode(&take(w, Kind::Group, tag as c_int, Some(root)).bytes);
    }
    let mut all = vec![mine.to_vec()];
    for &m in &members[1..] {
        all.push(take(w, Kind::Group, tag as c_int, Some(m)).bytes);
    }
    let packed: Vec<u8> = all.iter().flat_map(|p| (p.len() as u64).to_le_bytes().into_iter().chain(p.iter().copied())).collect();
    for &m in &members[1..] {
        w.send_am(m, MESSAGE_AM, token, &packed).map_err(rt)?;
    }
    Ok(all)
}

/// The member list's contributions from the root's packed reply (length-prefixed parts).
fn decode(mut b: &[u8]) -> R<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let n = b.get(..8).map(|l| u64::from_le_bytes(l.try_into().unwrap()) as usize).filter(|&n| n <= b.len() - 8);
        let n = n.ok_or("a malformed group collective reply")?;
        out.push(b[8..8 + n].to_vec());
        b = &b[8 + n..];
    }
    Ok(out)
}
