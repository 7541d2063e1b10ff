//! Status codes, error messages and the panic barrier shared by every entry point.

use std::cell::RefCell;
use std::ffi::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Success.
pub const ARMA_OK: c_int = 0;
/// A rank outside 0..arma_size()-1 (negative ranks included).
pub const ARMA_ERR_INVALID_RANK: c_int = 1;
/// The remote address range is not inside a segment or an exposed private range of that rank.
pub const ARMA_ERR_NOT_EXPOSED: c_int = 2;
/// The target exposed the range with a protection that forbids this access (e.g. read-only).
pub const ARMA_ERR_PROTECTION: c_int = 3;
/// A 64-bit atomic on an address that is not 8-byte aligned.
pub const ARMA_ERR_MISALIGNED: c_int = 4;
/// A bad argument: NULL buffer with a non-zero length, unknown protection, unknown pointer...
pub const ARMA_ERR_INVALID_ARGUMENT: c_int = 5;
/// A transfer or allocation larger than the runtime supports.
pub const ARMA_ERR_SIZE_LIMIT: c_int = 6;
/// Out of symmetric heap, exposure slots or translation-table room (see the message).
pub const ARMA_ERR_OUT_OF_RESOURCES: c_int = 7;
/// The call came after arma_finalize.
pub const ARMA_ERR_FINALIZED: c_int = 8;
/// A peer rank exited or died; the operation cannot complete.
pub const ARMA_ERR_PEER_GONE: c_int = 9;
/// Waited longer than ACTIVERMA_TIMEOUT_S.
pub const ARMA_ERR_TIMEOUT: c_int = 10;
/// An ACTIVERMA_* environment setting has a bad value.
pub const ARMA_ERR_BAD_SETTING: c_int = 11;
/// Not supported by this build or conduit.
pub const ARMA_ERR_UNSUPPORTED: c_int = 12;
/// Ranks disagree in a collective call (e.g. different arma_seg_alloc sizes).
pub const ARMA_ERR_COLLECTIVE_MISMATCH: c_int = 13;
/// A system call failed (the message names it and errno).
pub const ARMA_ERR_OS: c_int = 14;
/// The call came before arma_init.
pub const ARMA_ERR_NOT_INITIALIZED: c_int = 15;
/// arma_wait / arma_test on a handle that names no outstanding operation: never filled by a
/// successful arma_put_nb / arma_get_nb, already completed, or not a handle at all.
pub const ARMA_ERR_INVALID_HANDLE: c_int = 16;
/// A rank of a job started with `activerma run --respawn N` died and is being replaced:
/// operations to it (and collectives) fail until arma_wait_for_rank(rank) returns.
pub const ARMA_ERR_RANK_FAILED: c_int = 17;

/// A failed call: its status code and the message `arma_last_error` will return.
pub(crate) struct Fail {
    pub code: c_int,
    pub msg: String,
    /// The rank an ARMA_ERR_RANK_FAILED names (arma_failed_rank).
    pub failed_rank: Option<usize>,
}

pub(crate) type CResult<T = ()> = Result<T, Fail>;

impl From<activerma::Error> for Fail {
    fn from(e: activerma::Error) -> Fail {
        let failed_rank = match e {
            activerma::Error::RankFailed { rank, .. } => Some(rank),
            _ => None,
        };
        Fail { code: e.code(), msg: e.to_string(), failed_rank }
    }
}

pub(crate) fn invalid(msg: impl Into<String>) -> Fail {
    Fail { code: ARMA_ERR_INVALID_ARGUMENT, msg: msg.into(), failed_rank: None }
}

/// Room for the last error message. A fixed per-thread buffer, so a pointer from
/// arma_last_error never dangles (a later failure overwrites the text, never frees it); the
/// runtime's messages are far shorter, a longer one is cut at a character boundary.
const LAST_ERROR_CAP: usize = 1024;

thread_local! {
    static LAST_ERROR: RefCell<[u8; LAST_ERROR_CAP]> = const { RefCell::new([0; LAST_ERROR_CAP]) };
    static LAST_FAILED_RANK: std::cell::Cell<c_int> = const { std::cell::Cell::new(-1) };
}

/// The rank named by this thread's last ARMA_ERR_RANK_FAILED, -1 if no call failed so.
pub(crate) fn last_failed_rank() -> c_int {
    LAST_FAILED_RANK.try_with(|c| c.get()).unwrap_or(-1)
}

fn set_last_error(msg: String) {
    let mut end = msg.len().min(LAST_ERROR_CAP - 1);
    while !msg.is_char_boundary(end) {
        end -= 1;
    }
    let _ = LAST_ERROR.try_with(|l| {
        let mut buf = l.borrow_mut();
        buf[..end].copy_from_slice(&msg.as_bytes()[..end]);
        buf[end] = 0;
        // An inner NUL would cut the text short without a sign; show it instead.
        buf[..end].iter_mut().filter(|b| **b == 0).for_each(|b| *b = b'?');
    });
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>().copied().or_else(|| p.downcast_ref::<String>().map(|s| s.as_str())).unwrap_or("(no message)")
}

/// Runs the body of C entry point `name`: a failure becomes its code plus a message for
/// `arma_last_error`; a panic becomes ARMA_ERR_INVALID_ARGUMENT (unwinding into C is undefined
/// behaviour, and a panic here means a caller broke a precondition we failed to check).
pub(crate) fn guard(name: &str, body: impl FnOnce() -> CResult) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => ARMA_OK,
        Ok(Err(f)) => {
            set_last_error(format!("{name}: {}", f.msg));
            if let Some(r) = f.failed_rank {
                let _ = LAST_FAILED_RANK.try_with(|c| c.set(r as c_int));
            }
            f.code
        }
        Err(p) => {
            set_last_error(format!("{name}: internal error (caught a panic): {}", panic_text(&*p)));
            ARMA_ERR_INVALID_ARGUMENT
        }
    }
}

/// Static text describing a status code (never NULL; unknown codes get a generic text).
#[no_mangle]
pub extern "C" fn arma_strerror(code: c_int) -> *const c_char {
    // Byte strings with a NUL, not c"" literals: the workspace supports Rust 1.75.
    let s: &'static [u8] = match code {
        ARMA_OK => b"success\0",
        ARMA_ERR_INVALID_RANK => b"invalid rank\0",
        ARMA_ERR_NOT_EXPOSED => b"remote address is not exposed memory\0",
        ARMA_ERR_PROTECTION => b"access violates the target's protection\0",
        ARMA_ERR_MISALIGNED => b"misaligned atomic (64-bit atomics need 8-byte alignment)\0",
        ARMA_ERR_INVALID_ARGUMENT => b"invalid argument\0",
        ARMA_ERR_SIZE_LIMIT => b"size limit exceeded\0",
        ARMA_ERR_OUT_OF_RESOURCES => b"out of resources\0",
        ARMA_ERR_FINALIZED => b"the runtime was finalized\0",
        ARMA_ERR_PEER_GONE => b"a peer rank is gone\0",
        ARMA_ERR_TIMEOUT => b"timed out\0",
        ARMA_ERR_BAD_SETTING => b"bad ACTIVERMA_* setting\0",
        ARMA_ERR_UNSUPPORTED => b"not supported\0",
        ARMA_ERR_COLLECTIVE_MISMATCH => b"ranks disagree in a collective call\0",
        ARMA_ERR_OS => b"system call failed\0",
        ARMA_ERR_NOT_INITIALIZED => b"arma_init has not been called\0",
        ARMA_ERR_INVALID_HANDLE => b"invalid handle: no outstanding operation\0",
        ARMA_ERR_RANK_FAILED => b"a rank failed and is being respawned\0",
        _ => b"unknown activerma status code\0",
    };
    s.as_ptr().cast()
}

/// The full message of the last failed arma_* call in this thread (it names the call, the
/// address, the rank and what to change), or "" if none failed yet. Successful calls leave it
/// alone. The text lives in a per-thread buffer valid for the thread's lifetime; this thread's
/// next failing call overwrites it (copy it to keep it).
#[no_mangle]
pub extern "C" fn arma_last_error() -> *const c_char {
    // `try_with`: during thread teardown the buffer may be gone; fall back to "".
    LAST_ERROR.try_with(|l| l.as_ptr().cast::<c_char>().cast_const()).unwrap_or(c"".as_ptr())
}

// Unit tests, not tests/: an integration test would see two crates named `activerma` (this
// package's lib and the Rust API it wraps).
#[cfg(test)]
mod tests {
    use super::*;
    use activerma::Error;

    #[test]
    fn codes_match_the_rust_errors() {
        let s = || String::new();
        let pairs = [
            (Error::InvalidRank { rank: 0, size: 0 }, ARMA_ERR_INVALID_RANK),
            (Error::NotExposed { rank: 0, addr: 0, len: 0 }, ARMA_ERR_NOT_EXPOSED),
            (Error::Protection { rank: 0, addr: 0, len: 0, op: "", prot: "" }, ARMA_ERR_PROTECTION),
            (Error::Misaligned { rank: 0, addr: 0 }, ARMA_ERR_MISALIGNED),
            (Error::InvalidArgument(s()), ARMA_ERR_INVALID_ARGUMENT),
            (Error::SizeLimit(s()), ARMA_ERR_SIZE_LIMIT),
            (Error::OutOfResources(s()), ARMA_ERR_OUT_OF_RESOURCES),
            (Error::Finalized, ARMA_ERR_FINALIZED),
            (Error::PeerGone { rank: 0, how: s() }, ARMA_ERR_PEER_GONE),
            (Error::Timeout { what: s(), secs: 0.0 }, ARMA_ERR_TIMEOUT),
            (Error::BadSetting { name: s(), value: s(), why: s() }, ARMA_ERR_BAD_SETTING),
            (Error::Unsupported(s()), ARMA_ERR_UNSUPPORTED),
            (Error::CollectiveMismatch(s()), ARMA_ERR_COLLECTIVE_MISMATCH),
            (Error::Os { call: "", errno_text: s() }, ARMA_ERR_OS),
            (Error::RankFailed { rank: 0, incarnation: 0 }, ARMA_ERR_RANK_FAILED),
        ];
        for (e, c) in pairs {
            assert_eq!(e.code(), c, "{e:?}");
        }
    }

    #[test]
    fn every_code_has_its_own_text() {
        let text = |c| unsafe { std::ffi::CStr::from_ptr(arma_strerror(c)) }.to_str().unwrap().to_owned();
        let known: Vec<String> = (ARMA_OK..=ARMA_ERR_RANK_FAILED).map(text).collect();
        let unknown = text(99);
        for (c, t) in known.iter().enumerate() {
            assert!(!t.is_empty() && *t != unknown, "code {c}: {t}");
            assert_eq!(known.iter().filter(|u| *u == t).count(), 1, "code {c} shares its text");
        }
    }

    #[test]
    fn last_error_is_per_thread_stable_and_bounded() {
        let text = || unsafe { std::ffi::CStr::from_ptr(arma_last_error()) }.to_str().unwrap().to_owned();
        assert_eq!(text(), "");
        let p = arma_last_error();
        assert_eq!(guard("arma_x", || Err(invalid("bad"))), ARMA_ERR_INVALID_ARGUMENT);
        assert_eq!(text(), "arma_x: bad");
        assert_eq!(p, arma_last_error(), "the buffer does not move");
        assert_eq!(guard("arma_y", || panic!("boom")), ARMA_ERR_INVALID_ARGUMENT);
        assert!(text().starts_with("arma_y: internal error") && text().ends_with("boom"), "{}", text());
        guard("arma_z", || Err(invalid("é".repeat(600))));
        assert!(text().len() < LAST_ERROR_CAP && text().ends_with('é'));
        assert_eq!(guard("arma_ok", || Ok(())), ARMA_OK);
        assert!(text().starts_with("arma_z"), "success leaves the message alone");
        std::thread::spawn(move || assert_eq!(text(), "", "another thread has its own")).join().unwrap();
    }
}
