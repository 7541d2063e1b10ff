//! Active Access (Besta & Hoefler, ICS'15): the target marks pages of its segments or exposed
//! memory with actions and a domain, creates an access log per domain with a handler, and
//! origins keep using plain arma_put / arma_get. The paper's Listing 1 maps one-to-one:
//! `put(trgt_addr, data, trgt_id)` is arma_put, `get(...)` is arma_get, `assoc_page(addr,
//! actions, domain)` is arma_assoc_pages.

use crate::state::{rank, world};
use crate::status::{guard, invalid, CResult};
use activerma::{Actions, Config, LogEntry, LogHandler, Notify};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

// The action bits are activerma's own (Actions::W.bits() etc.; cbindgen needs literals, the unit
// test below keeps them equal).

/// Page action W: remote puts write the page's memory. Without W and without ARMA_AA_WL, a put
/// to the page fails at the origin with ARMA_ERR_PROTECTION.
pub const ARMA_AA_W: u32 = 1 << 3;
/// Page action R: remote gets read the page's memory.
pub const ARMA_AA_R: u32 = 1 << 2;
/// Page action WL: every put to the page is logged (metadata: origin, address, length) in the
/// page's access log. With W=0 the put is an active put: it only goes to the log.
pub const ARMA_AA_WL: u32 = 1 << 4;
/// Page action WLD: the logged put carries its data too (with ARMA_AA_WL).
pub const ARMA_AA_WLD: u32 = 1 << 5;
/// Page action RL: every get from the page is logged in the page's access log.
pub const ARMA_AA_RL: u32 = 1 << 6;
/// Page action RLD: the logged get carries a copy of the bytes returned (with ARMA_AA_RL).
pub const ARMA_AA_RLD: u32 = 1 << 7;

/// Notification of a log's handler: the mode ACTIVERMA_AA_NOTIFY names (poll unless set), with
/// ACTIVERMA_AA_WAKE_THRESHOLD for wake; the `wake_threshold` argument is ignored.
pub const ARMA_NOTIFY_DEFAULT: c_int = 0;
/// The handler runs in this rank's progress: arma_progress and every blocking arma call.
pub const ARMA_NOTIFY_POLL: c_int = 1;
/// A runtime thread sleeps until the log holds `wake_threshold` entries (0 counts as 1), or a
/// short interval (ACTIVERMA_WAKE_INTERVAL_US) passed, then runs the handler.
pub const ARMA_NOTIFY_WAKE: c_int = 2;
/// A dedicated runtime thread spins on the log and runs the handler.
pub const ARMA_NOTIFY_THREAD: c_int = 3;
/// Nobody runs the handler until the program calls arma_drain_log: the log holds its entries
/// (the paper's log as a store, e.g. of the data gets read, for recovery). A full log holds
/// origins back until then, so size it for what arrives between drains.
pub const ARMA_NOTIFY_HOLD: c_int = 4;

/// arma_log_entry_t.op of a logged put.
pub const ARMA_AA_OP_PUT: c_int = 1;
/// arma_log_entry_t.op of a logged get.
pub const ARMA_AA_OP_GET: c_int = 2;

/// One access-log entry, as a handler sees it. A long access may come as several entries
/// (chunks) with the same origin and seq; the one with `last` != 0 ends it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct arma_log_entry_t {
    /// ARMA_AA_OP_PUT or ARMA_AA_OP_GET.
    pub op: c_int,
    /// The rank that made the access.
    pub origin: c_int,
    /// Per-origin sequence number of the access.
    pub seq: u64,
    /// Target address of this chunk (the access's address plus `offset`).
    pub addr: u64,
    /// Length of the whole access.
    pub total_len: u64,
    /// Offset of this chunk within the access.
    pub offset: u64,
    /// Non-zero if this chunk ends the access.
    pub last: c_int,
    /// The logged bytes (put data with ARMA_AA_WLD, returned data with ARMA_AA_RLD), valid only
    /// during the handler call; NULL when `data_len` is 0 (metadata-only entry).
    pub data: *const c_void,
    /// Number of bytes at `data`.
    pub data_len: usize,
}

/// An access-log handler: runs once per entry, in log order; entries of one log never run
/// concurrently. `entry` (and its data) is valid only during the call; `ctx` is the pointer
/// given to arma_create_log / arma_set_fault_handler, passed back verbatim. Keep it short and
/// do not call blocking arma functions from it.
#[allow(non_camel_case_types)]
pub type arma_log_handler_t = Option<unsafe extern "C" fn(entry: *const arma_log_entry_t, ctx: *mut c_void)>;

/// The C caller's context pointer, carried into the Rust handler.
struct Ctx(*mut c_void);

// SAFETY: the runtime never dereferences the pointer, it only hands it back to the caller's
// handler. With ARMA_NOTIFY_WAKE / ARMA_NOTIFY_THREAD (or a DEFAULT that resolves to them) the
// handler runs on a runtime thread; the C caller promises (documented on arma_create_log) that
// `ctx` may be used from that thread.
unsafe impl Send for Ctx {}
// SAFETY: as for Send; the handler of one log never runs concurrently with itself.
unsafe impl Sync for Ctx {}

impl Ctx {
    /// A method, not a field access, so closures capture the whole (Send + Sync) Ctx.
    fn get(&self) -> *mut c_void {
        self.0
    }
}

fn entry(e: &LogEntry) -> arma_log_entry_t {
    let m = &e.meta;
    let d = e.data();
    arma_log_entry_t {
        op: m.op as c_int,
        origin: c_int::try_from(m.origin).unwrap_or(c_int::MAX),
        seq: m.seq,
        addr: m.addr,
        total_len: m.total_len,
        offset: m.offset,
        last: m.last as c_int,
        data: if d.is_empty() { std::ptr::null() } else { d.as_ptr().cast() },
        data_len: d.len(),
    }
}

/// The Rust handler that calls the C one.
fn handler(h: arma_log_handler_t, ctx: *mut c_void) -> CResult<LogHandler> {
    let h = h.ok_or_else(|| invalid("handler is NULL"))?;
    let ctx = Ctx(ctx);
    Ok(Arc::new(move |e: &LogEntry| {
        let c = entry(e);
        // SAFETY: `h` is the caller's handler with the documented signature; `c` and the data it
        // points to live across the call; `ctx` is passed back verbatim (see Ctx).
        unsafe { h(&c, ctx.get()) }
    }))
}

/// The notification `mode` names; ARMA_NOTIFY_DEFAULT is the job's ACTIVERMA_AA_NOTIFY (`cfg`).
fn notify(cfg: &Config, mode: c_int, wake_threshold: u64) -> CResult<Notify> {
    match mode {
        ARMA_NOTIFY_DEFAULT => Ok(Notify::from_config(cfg)?),
        ARMA_NOTIFY_POLL => Ok(Notify::Poll),
        ARMA_NOTIFY_WAKE => Ok(Notify::Wake { threshold: wake_threshold.max(1) }),
        ARMA_NOTIFY_THREAD => Ok(Notify::Thread),
        ARMA_NOTIFY_HOLD => Ok(Notify::Hold),
        m => Err(invalid(format!(
            "notify {m} is none of ARMA_NOTIFY_DEFAULT (0), ARMA_NOTIFY_POLL (1), ARMA_NOTIFY_WAKE (2), ARMA_NOTIFY_THREAD (3), ARMA_NOTIFY_HOLD (4)"
        ))),
    }
}

fn actions(bits: u32) -> CResult<Actions> {
    Actions::from_bits(bits).ok_or_else(|| {
        invalid(format!(
            "actions {bits:#x} has unknown bits {:#x}: only ARMA_AA_W, _R, _WL, _WLD, _RL and _RLD ({:#x}) are defined",
            bits & !Actions::ALL.bits(),
            Actions::ALL.bits()
        ))
    })
}

fn domain(d: c_int) -> CResult<u16> {
    u16::try_from(d).map_err(|_| invalid(format!("domain {d} is out of range (domains are small non-negative numbers)")))
}

/// The paper's assoc_page, over a range: gives every page of [addr, addr+len) of this rank's
/// segments or exposed private memory the actions `actions` (ARMA_AA_* flags or-ed; 0 = none)
/// and logs its accesses into the access log of `domain` (see arma_create_log), or, with a
/// negative `domain`, into the default fault log (see arma_set_fault_handler). Callable at any
/// time; an access in flight sees a page's old marks or its new ones (order with
/// arma_active_flush or arma_barrier). The actions replace the pages' W and R, which their
/// segment or ARMA_PROT_* gave them: ARMA_AA_W | ARMA_AA_R with a negative domain makes a page
/// plain read-write again. The range must lie in one segment or one exposure (else
/// ARMA_ERR_NOT_EXPOSED); marking segment memory needs a job on one host (else
/// ARMA_ERR_UNSUPPORTED: mark exposed private memory instead).
///
/// The paper's Listing 1 maps one-to-one onto the C API: put(trgt_addr, data, trgt_id) is
/// arma_put(trgt_id, trgt_addr, data, n), get(...) is arma_get, and assoc_page(addr, actions,
/// domain) is arma_assoc_pages(addr, page size, actions, domain). Origins need no new calls:
/// whether a put or get is active is decided by the target's marks on the pages it touches.
///
/// Unknown action bits, len == 0 or an out-of-range domain give ARMA_ERR_INVALID_ARGUMENT.
#[no_mangle]
pub extern "C" fn arma_assoc_pages(addr: *const c_void, len: usize, actions: u32, domain: c_int) -> c_int {
    guard("arma_assoc_pages", || {
        let w = world()?;
        let a = self::actions(actions)?;
        let d = if domain < 0 { None } else { Some(self::domain(domain)?) };
        w.assoc_pages(addr.cast(), len, a, d)?;
        Ok(())
    })
}

/// The marks of the page of this rank's own memory (a segment or an exposure) that holds
/// `addr`: its actions (ARMA_AA_* flags; an unmarked page reads ARMA_AA_W | ARMA_AA_R, or
/// ARMA_AA_R for memory exposed read-only) into `*actions`, and the domain its accesses log into
/// into `*domain` (-1: the default fault log). Either pointer may be NULL. An address outside
/// this rank's segments and exposures gives ARMA_ERR_NOT_EXPOSED.
#[no_mangle]
pub unsafe extern "C" fn arma_page_marks(addr: *const c_void, actions: *mut u32, domain: *mut c_int) -> c_int {
    guard("arma_page_marks", || {
        let w = world()?;
        let marks = w.page_marks(addr.cast(), 1)?;
        let (a, d) = marks.first().copied().expect("one page asked, one page's marks");
        // SAFETY: the caller passes NULL or a pointer to a writable value of the type.
        unsafe {
            if !actions.is_null() {
                *actions = a.bits();
            }
            if !domain.is_null() {
                *domain = d.map_or(-1, c_int::from);
            }
        }
        Ok(())
    })
}

/// Creates the access log of `domain` (>= 0): `capacity` bytes (a power of two, at least 256)
/// that pages marked with this domain log into, and whose entries run through `h` (called with
/// `ctx`), notified as `notify` says (ARMA_NOTIFY_*; `wake_threshold` is for ARMA_NOTIFY_WAKE).
/// With ARMA_NOTIFY_WAKE, ARMA_NOTIFY_THREAD, or ARMA_NOTIFY_DEFAULT (whose mode comes from
/// ACTIVERMA_AA_NOTIFY), `h` runs on a runtime thread: the caller promises that `ctx` may be
/// used from there. `h` and `ctx` must stay valid until arma_finalize. Not collective.
#[no_mangle]
pub extern "C" fn arma_create_log(
    domain: c_int,
    capacity: usize,
    notify: c_int,
    wake_threshold: u64,
    h: arma_log_handler_t,
    ctx: *mut c_void,
) -> c_int {
    guard("arma_create_log", || {
        let w = world()?;
        let d = self::domain(domain)?;
        let n = self::notify(w.config(), notify, wake_threshold)?;
        Ok(w.create_log(d, capacity, n, handler(h, ctx)?)?)
    })
}

/// Sets the handler of the default fault log, which pages marked with a negative domain log
/// into (e.g. ARMA_AA_R | ARMA_AA_WL: puts are not written, only reported here). `notify`,
/// `wake_threshold`, `h` and `ctx` as for arma_create_log. Once per rank.
#[no_mangle]
pub extern "C" fn arma_set_fault_handler(notify: c_int, wake_threshold: u64, h: arma_log_handler_t, ctx: *mut c_void) -> c_int {
    guard("arma_set_fault_handler", || {
        let w = world()?;
        let n = self::notify(w.config(), notify, wake_threshold)?;
        Ok(w.set_fault_handler(n, handler(h, ctx)?)?)
    })
}

/// Runs the handler of `domain`'s log (this rank's) over every entry it holds now, whatever its
/// notification mode — the only way an ARMA_NOTIFY_HOLD log is drained. Stores the number of
/// entries handled in `*handled` unless it is NULL. ARMA_ERR_INVALID_ARGUMENT if the domain
/// has no log.
#[no_mangle]
pub unsafe extern "C" fn arma_drain_log(domain: c_int, handled: *mut u64) -> c_int {
    guard("arma_drain_log", || {
        let w = world()?;
        let n = w.drain_log(self::domain(domain)?)?;
        if !handled.is_null() {
            // SAFETY: the caller passes NULL or a writable uint64_t.
            unsafe { *handled = n as u64 };
        }
        Ok(())
    })
}

/// Returns once rank `rank` has run the handlers of every active access (logged put or get)
/// this rank made there. Independent of arma_flush, which completes plain RMA. A poll-mode
/// target must make progress meanwhile (e.g. by waiting in arma_barrier).
#[no_mangle]
pub extern "C" fn arma_active_flush(rank: c_int) -> c_int {
    guard("arma_active_flush", || {
        let w = world()?;
        Ok(w.active_flush(self::rank(w, rank)?)?)
    })
}

/// Hits and misses of this rank's modelled IOTLB (ACTIVERMA_IOTLB_*; both stay 0 while the
/// model is off). Either pointer may be NULL.
#[no_mangle]
pub unsafe extern "C" fn arma_iotlb_stats(hits: *mut u64, misses: *mut u64) -> c_int {
    guard("arma_iotlb_stats", || {
        let (s, _) = world()?.iotlb();
        for (out, v) in [(hits, s.hits), (misses, s.misses)] {
            // SAFETY: the caller passes NULL or a writable uint64_t.
            if let Some(out) = unsafe { out.as_mut() } {
                *out = v;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{ARMA_ERR_INVALID_ARGUMENT, ARMA_OK};
    use activerma::LogOp;

    #[test]
    fn constants_are_the_runtime_bits() {
        let pairs = [
            (ARMA_AA_W, Actions::W),
            (ARMA_AA_R, Actions::R),
            (ARMA_AA_WL, Actions::WL),
            (ARMA_AA_WLD, Actions::WLD),
            (ARMA_AA_RL, Actions::RL),
            (ARMA_AA_RLD, Actions::RLD),
        ];
        for (c, a) in pairs {
            assert_eq!(c, a.bits(), "{a:?}");
        }
        let all = pairs.iter().fold(0, |acc, (c, _)| acc | c);
        assert_eq!(all, Actions::ALL.bits());
        assert_eq!((ARMA_AA_OP_PUT, ARMA_AA_OP_GET), (LogOp::Put as c_int, LogOp::Get as c_int));
    }

    #[test]
    fn arguments_are_checked() {
        assert_eq!(actions(ARMA_AA_WL | ARMA_AA_WLD).map(|a| a.bits()).ok(), Some((Actions::WL | Actions::WLD).bits()));
        assert!(actions(1 << 20).is_err_and(|f| f.code == ARMA_ERR_INVALID_ARGUMENT && f.msg.contains("0x100000")));
        assert!(domain(-1).is_err() && domain(70_000).is_err() && domain(5).ok() == Some(5));
        assert_eq!(notify(&Config::defaults(), ARMA_NOTIFY_POLL, 9).ok(), Some(Notify::Poll));
        assert_eq!(notify(&Config::defaults(), ARMA_NOTIFY_WAKE, 0).ok(), Some(Notify::Wake { threshold: 1 }));
        assert_eq!(notify(&Config::defaults(), ARMA_NOTIFY_THREAD, 0).ok(), Some(Notify::Thread));
        assert_eq!(notify(&Config::defaults(), ARMA_NOTIFY_HOLD, 0).ok(), Some(Notify::Hold));
        assert!(notify(&Config::defaults(), 7, 0).is_err_and(|f| f.code == ARMA_ERR_INVALID_ARGUMENT));
        assert!(handler(None, std::ptr::null_mut()).is_err());
        // Through the entry point too; the world may or may not be up in this test binary, but
        // a bad handler is never ARMA_OK.
        assert_ne!(arma_create_log(1, 4096, ARMA_NOTIFY_POLL, 0, None, std::ptr::null_mut()), ARMA_OK);
    }
}
