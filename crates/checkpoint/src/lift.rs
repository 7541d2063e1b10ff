//! Atomics on trap-first-write's pages. The trap scheme keeps a protected page W=0 (puts are
//! logged with their data and its handler writes them) until the first put lifts the trap.
//! An atomic cannot go through that log — its handler would have to return the old value —
//! so the table refuses atomics on a W=0 page (a protection error). Here the origin asks the
//! target to lift the trap first, the way its put handler would: the target marks the page
//! dirty and makes it plain, then answers; the atomic that follows runs directly and the next
//! checkpoint writes the page and traps it again.
//!
//! ```text
//! origin before_remote_atomic(at):
//!     scheme is not trap, or tracking not started, or (at.rank, its incarnation, page) lifted
//!         since our last checkpoint: return
//!     LIFT [addr][len] to at.rank (token = a fresh number); progress until LIFTED(token)
//!     remember (at.rank, incarnation, page)             # cleared when the checkpoint traps again
//! target LIFT:  for every page of [addr, addr+len) in a protected region that carries the
//!               trap marks: dirty |= page, then marks = plain (here only: a handler waits for
//!               nobody); reply LIFTED [0] or [1][why]
//! ```
//! Dirty first, then plain: a checkpoint that reads the marks meanwhile counts a plain page as
//! its own only if it is dirty (`remote::tracked_runs`).
//!
//! Handler ids `FIRST_USER_HANDLER + 130` and `+ 131` are this crate's (a program that registers
//! its own handlers next to a trap-first-write checkpointer keeps clear of them).

use crate::dirty::DirtyPages;
use crate::remote;
use activerma::{AmCtx, Error, HandlerId, Rank, RemotePtr, Result, World, FIRST_USER_HANDLER};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const LIFT: HandlerId = FIRST_USER_HANDLER + 130;
const LIFTED: HandlerId = FIRST_USER_HANDLER + 131;

/// A trap-first-write checkpointer's pages, as LIFT's handler needs them.
pub(crate) struct Trapped {
    pub world: World,
    pub dirty: Arc<DirtyPages>,
    pub page: usize,
    pub domain: u16,
}

/// The trapping checkpointers of this process (one, unless a program runs several).
static TRAPPED: Mutex<Vec<Arc<Trapped>>> = Mutex::new(Vec::new());
/// Answers that arrived: (token, None when lifted or Some(why not)).
static ANSWERS: Mutex<Vec<(u64, Option<String>)>> = Mutex::new(Vec::new());
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// Installs the handlers (once per job: a later checkpointer finds them there) and makes `t`'s
/// pages liftable.
pub(crate) fn start(t: Arc<Trapped>) -> Result<()> {
    for (id, h) in [(LIFT, Arc::new(on_lift) as activerma::Handler), (LIFTED, Arc::new(on_lifted))] {
        match t.world.register_handler(id, h) {
            Err(Error::InvalidArgument(why)) if why.contains("already registered") => {}
            r => r?,
        }
    }
    TRAPPED.lock().unwrap().push(t);
    Ok(())
}

/// `t`'s pages are no longer liftable (its checkpointer is gone).
pub(crate) fn stop(t: &Arc<Trapped>) {
    TRAPPED.lock().unwrap().retain(|x| !Arc::ptr_eq(x, t));
}

fn on_lift(ctx: &AmCtx, msg: &[u8]) {
    let word = |i: usize| msg.get(i * 8..i * 8 + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()) as usize);
    let answer = match (word(0), word(1)) {
        (Some(addr), Some(len)) => {
            let all: Vec<Arc<Trapped>> = TRAPPED.lock().unwrap().clone();
            all.iter().try_for_each(|t| lift_here(t, addr, len)).err()
        }
        _ => Some(format!("a lift request of {} bytes (expected 16)", msg.len())),
    };
    let mut reply = vec![answer.is_some() as u8];
    reply.extend_from_slice(answer.unwrap_or_default().as_bytes());
    ctx.reply(LIFTED, ctx.token, &reply);
}

fn on_lifted(ctx: &AmCtx, msg: &[u8]) {
    let why = (msg.first() != Some(&0)).then(|| String::from_utf8_lossy(msg.get(1..).unwrap_or_default()).into_owned());
    ANSWERS.lock().unwrap().push((ctx.token, why));
}

/// Lifts the trap on every page of `[addr, addr+len)` that is one of `t`'s and trapped now;
/// other pages (unprotected memory, the application's own marks, pages lifted already) are
/// left as they are: the atomic meets whatever they say.
fn lift_here(t: &Trapped, addr: usize, len: usize) -> std::result::Result<(), String> {
    let trap = (remote::tracking_marks(true), Some(t.domain));
    let first = addr / t.page * t.page;
    let end = (addr + len.max(1)).div_ceil(t.page) * t.page;
    for page in (first..end).step_by(t.page) {
        if !t.dirty.regions().any(|r| page >= r.addr && page < r.addr + r.len) {
            continue;
        }
        let marks = t.world.page_marks(page as *const u8, t.page).map_err(|e| e.to_string())?;
        if marks.first() == Some(&trap) {
            t.dirty.mark(page, t.page);
            t.world.assoc_pages_here(page as *const u8, t.page, remote::untracked_marks(), None).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// The origin's side: which pages of which target incarnation it had lifted since its last
/// checkpoint.
#[derive(Default)]
pub(crate) struct Lifted {
    pages: Mutex<HashSet<(Rank, u32, usize)>>,
}

impl Lifted {
    /// Forgets every lift: the checkpoint trapped the pages again.
    pub fn clear(&self) {
        self.pages.lock().unwrap().clear();
    }

    /// Asks `at.rank` to lift the trap on the page of the `len` bytes at `at` (once per page
    /// and checkpoint interval), and waits for its answer.
    pub fn lift(&self, w: &World, page: usize, at: RemotePtr, len: usize) -> Result<()> {
        w.check_alive(at.rank)?;
        let incarnation = w.wait_for_rank(at.rank)?; // at once: the rank is up
        let key = (at.rank, incarnation, at.addr / page);
        if self.pages.lock().unwrap().contains(&key) {
            return Ok(());
        }
        let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        let mut msg = (at.addr as u64).to_le_bytes().to_vec();
        msg.extend_from_slice(&(len as u64).to_le_bytes());
        w.send_am(at.rank, LIFT, token, &msg)?;
        let mut answer = None;
        let answered = || {
            answer = take_answer(token);
            answer.is_some()
        };
        w.wait_until(answered, at.rank, "checkpoint: the answer to a request to lift a trap")?;
        if let Some(Some(why)) = answer {
            return Err(Error::InvalidArgument(format!(
                "checkpoint: rank {} could not lift the trap on {:#x}+{len} for an atomic: {why}",
                at.rank, at.addr
            )));
        }
        self.pages.lock().unwrap().insert(key);
        Ok(())
    }
}

/// The answer `token` got, if it is in: None (lifted) or Some(why not).
fn take_answer(token: u64) -> Option<Option<String>> {
    let mut answers = ANSWERS.lock().unwrap();
    let i = answers.iter().position(|(t, _)| *t == token)?;
    Some(answers.swap_remove(i).1)
}
