//! Ranks that print in ways that test how the launcher forwards their output: arguments that
//! look like options, long lines written in pieces by every rank at once, the same stderr line
//! on every rank, lines without a final newline, binary data, a terminal to write to.

use activerma::Result;
use std::io::Write;

/// The arguments after the case name, as the rank received them.
pub fn echo_args() -> Result<()> {
    let rank = std::env::var("ACTIVERMA_RANK").unwrap_or_default();
    let args: Vec<String> = std::env::args().skip_while(|a| a != "echo_args").skip(1).collect();
    println!("rank {rank} args {args:?}");
    Ok(())
}

/// Lines of `LONG_LINE_LEN` bytes in `LONG_LINES` rows per rank, each written in three
/// separate writes (as a C program's printf of several fields may be): beside each other in a
/// shared pipe they would interleave.
pub const LONG_LINES: usize = 200;
pub const LONG_LINE_LEN: usize = 9000;

/// The body of rank `rank`'s long lines: its own letter, so that a mixed line shows.
pub fn long_line_fill(rank: usize) -> u8 {
    b'a' + (rank % 26) as u8
}

pub fn long_lines() -> Result<()> {
    let w = activerma::init()?;
    w.barrier()?; // every rank starts writing at once
    let fill = vec![long_line_fill(w.rank()); LONG_LINE_LEN];
    let mut out = std::io::stdout().lock();
    for i in 0..LONG_LINES {
        let head = format!("rank {} line {i} ", w.rank());
        out.write_all(head.as_bytes()).unwrap();
        out.flush().unwrap();
        out.write_all(&fill[head.len()..]).unwrap();
        out.flush().unwrap();
        out.write_all(b"\n").unwrap();
        out.flush().unwrap();
    }
    drop(out);
    w.finalize()
}

/// stderr: a line every rank prints, one of its own, then another every rank prints; stdout:
/// a line every rank prints (the program's data, never merged).
pub fn same_stderr() -> Result<()> {
    let w = activerma::init()?;
    w.barrier()?; // the shared lines come within the launcher's merge window
    eprintln!("activerma test: every rank says this");
    eprintln!("activerma test: rank {} alone says this", w.rank());
    eprintln!("activerma test: every rank ends with this");
    println!("stdout every rank prints");
    w.finalize()
}

/// Each rank's last output on both streams has no newline; then rank 1 crashes.
pub fn no_final_newline() -> Result<()> {
    let w = activerma::init()?;
    print!("last words of rank {}", w.rank());
    eprint!("last stderr words of rank {}", w.rank());
    std::io::stdout().flush().unwrap();
    w.barrier()?;
    if w.rank() == 1 {
        std::process::abort();
    }
    Ok(())
}

/// Every byte value, CR and invalid UTF-8 among them, as binary output: what the launcher
/// must pass on unchanged.
pub fn binary_bytes() -> Vec<u8> {
    (0..4).flat_map(|_| 0..=255u8).chain([0xff, 0xfe, b'\r']).collect()
}

pub fn binary_out() -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(&binary_bytes()).unwrap();
    out.flush().unwrap();
    Ok(())
}

/// Whether stdout is a terminal, and a CR and LF that a terminal in raw mode passes unchanged.
pub fn terminal_out() -> Result<()> {
    // SAFETY: isatty only inspects the descriptor.
    let tty = unsafe { libc::isatty(1) } == 1;
    print!("stdout is a terminal: {tty}\rraw\n");
    std::io::stdout().flush().unwrap();
    Ok(())
}
