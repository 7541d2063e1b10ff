//! ARMCI_Error and the barrier every entry point runs behind: a failure prints a message that
//! names the call and the argument, then ends the job with a non-zero status.

use crate::state::WORLD;
use std::ffi::{c_char, c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A failed check or operation: the text after "CALL: ".
pub(crate) type R<T = ()> = Result<T, String>;

/// Runs the body of entry point `call`. ARMCI has no error returns worth trusting (programs
/// ignore them), so a failure ends the job here, like ARMCI_Error; a panic too, since
/// unwinding into C is undefined behaviour.
pub(crate) fn entry<T>(call: &str, body: impl FnOnce() -> R<T>) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => v,
        Ok(Err(m)) => die(&format!("{call}: {m}"), 1),
        Err(p) => {
            let text =
                p.downcast_ref::<&str>().copied().or_else(|| p.downcast_ref::<String>().map(|s| s.as_str())).unwrap_or("(no message)");
            die(&format!("{call}: internal error (caught a panic): {text}"), 1)
        }
    }
}

/// The exit status for an error code: its low byte, but never 0 (the job must fail even for
/// ARMCI_Error(msg, 0), which programs write often).
pub(crate) fn exit_status(code: c_int) -> c_int {
    match code & 0xff {
        0 => 1,
        s => s,
    }
}

/// Prints the message (with the rank) and leaves the process. `_exit`, not `exit`: atexit
/// handlers and the runtime's threads could block on a job that is already broken; C's stdio
/// buffers are flushed first so the program's own output is not lost. The launcher sees the
/// non-zero status and ends the other ranks.
pub(crate) fn die(msg: &str, code: c_int) -> ! {
    let rank = WORLD.get().map(|w| w.rank().to_string()).unwrap_or_else(|| "?".into());
    let text = format!("ARMCI_Error [rank {rank}]: {msg} (code {code})\n");
    // SAFETY: fflush(NULL) flushes every C stream; write(2) and _exit are async-signal-safe.
    unsafe {
        libc::fflush(std::ptr::null_mut());
        let mut b = text.as_bytes();
        while !b.is_empty() {
            let n = libc::write(2, b.as_ptr().cast(), b.len());
            if n <= 0 {
                break;
            }
            b = &b[n as usize..];
        }
        libc::_exit(exit_status(code))
    }
}

/// Prints msg and code, then ends the job with a non-zero exit status.
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Error(msg: *const c_char, code: c_int) {
    let text = if msg.is_null() { "(no message)".into() } else { CStr::from_ptr(msg).to_string_lossy().into_owned() };
    die(&text, code)
}

/// Ends the job with exit status `code` (1 if it is 0).
#[no_mangle]
pub extern "C" fn armci_msg_abort(code: c_int) {
    die("armci_msg_abort called", code)
}

#[cfg(test)]
mod tests {
    #[test]
    fn exit_status_is_never_zero() {
        assert_eq!(super::exit_status(0), 1);
        assert_eq!(super::exit_status(256), 1);
        assert_eq!(super::exit_status(3), 3);
        assert_ne!(super::exit_status(-1), 0);
    }
}
