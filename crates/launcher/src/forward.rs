//! The forwarder: one thread that reads every rank's stdout and stderr and writes them on as
//! whole lines, so that lines of different ranks never mix.
//!
//! - stdout stays stdout and stderr stays stderr; bytes pass unchanged (binary output too),
//!   unless `--label` puts "[r] " before each line.
//! - A line is written once its newline arrives. A line still without one after `WINDOW`, or
//!   longer than `MAX_PIECE`, is written as it stands (a prompt, a progress bar, binary data), so
//!   nothing waits indefinitely; what is left when a rank's stream ends is written too. Should
//!   other output follow such a piece, a newline goes between them, so that no line holds two
//!   ranks' text (one rank's bytes stay exactly as it wrote them).
//! - stderr lines that several ranks print alike within `WINDOW` are written once, as
//!   "[ranks 0-3] line" (see `merge`); stdout is the program's data and is never merged.
//! - The launcher's own messages go through here too, after everything read so far, so that a
//!   rank's last words come before the launcher's report of its end.
//! - If the launcher's stdout (stderr) is closed, the ranks' stdout (stderr) is closed too: they
//!   get SIGPIPE or EPIPE as they would have writing there themselves.

use super::merge::{self, Entry, Merger, WINDOW};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::Instant;

/// Longest piece of a line held back waiting for its newline.
pub const MAX_PIECE: usize = 64 * 1024;

/// Most bytes taken from one stream when draining it at the end, so that a process that
/// escaped the job's teardown and keeps writing cannot hold the launcher.
const MAX_DRAIN: usize = 4 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    /// The launcher's own descriptor for this stream.
    pub fn fd(self) -> RawFd {
        match self {
            Stream::Stdout => 1,
            Stream::Stderr => 2,
        }
    }
}

/// One rank stream to forward: the launcher's (non-blocking) end of its channel.
pub struct Source {
    pub rank: u32,
    pub stream: Stream,
    pub fd: OwnedFd,
}

enum Control {
    Say(String),
    /// Streams of a rank started later (a replacement of one that died).
    Add(Vec<Source>),
    Finish,
}

pub struct Forwarder {
    control: Sender<Control>,
    wake: OwnedFd,
    thread: JoinHandle<()>,
}

impl Forwarder {
    pub fn start(sources: Vec<Source>, ranks: u32, label: bool) -> io::Result<Forwarder> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into the array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors are fresh and ours alone.
        let (wake_read, wake) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let (control, orders) = mpsc::channel();
        let inputs = sources.into_iter().map(Input::new).collect();
        let pump = Pump { inputs, merger: Merger::new(ranks as usize), label, open_line: [None, None] };
        let thread = std::thread::Builder::new().name("output".into()).spawn(move || pump.run(&orders, wake_read))?;
        Ok(Forwarder { control, wake, thread })
    }

    /// Writes the launcher's message `activerma run: {msg}` to stderr, after all rank output
    /// read so far.
    pub fn say(&self, msg: impl std::fmt::Display) {
        self.order(Control::Say(format!("activerma run: {msg}\n")));
    }

    /// Forwards the streams of a rank started after `start` too.
    pub fn add(&self, sources: Vec<Source>) {
        self.order(Control::Add(sources));
    }

    /// Writes what the ranks left in their channels and everything held back, then returns.
    /// Call once every rank has ended.
    pub fn finish(self) {
        self.order(Control::Finish);
        let _ = self.thread.join();
    }

    fn order(&self, c: Control) {
        if self.control.send(c).is_ok() {
            // SAFETY: writes one byte from a live buffer; if the pipe is full a wake-up is
            // pending already.
            unsafe { libc::write(self.wake.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
        }
    }
}

struct Input {
    rank: u32,
    stream: Stream,
    /// None once the stream has ended (or its output was closed).
    fd: Option<OwnedFd>,
    /// The start of a line whose newline has not arrived yet.
    partial: Vec<u8>,
    /// When `partial` started.
    since: Instant,
}

impl Input {
    fn new(s: Source) -> Input {
        Input { rank: s.rank, stream: s.stream, fd: Some(s.fd), partial: Vec::new(), since: Instant::now() }
    }
}

struct Pump {
    inputs: Vec<Input>,
    merger: Merger,
    label: bool,
    /// Per stream (stdout, stderr), who wrote the piece that the last write left unfinished:
    /// Some(rank), or None for the launcher or a merged line.
    open_line: [Option<Option<u32>>; 2],
}

enum Read {
    Data(usize),
    Nothing,
    End,
}

fn read_some(fd: RawFd, buf: &mut [u8]) -> Read {
    // SAFETY: reads into a live buffer of buf.len() bytes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n > 0 {
        return Read::Data(n as usize);
    }
    if n == 0 {
        return Read::End;
    }
    match io::Error::last_os_error().kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Read::Nothing,
        // EIO is how a pseudo-terminal says that its rank end is closed.
        _ => Read::End,
    }
}

/// Writes all of `bytes` to `fd`, waiting while it is full (the launcher's own output may have
/// been handed to it non-blocking).
fn write_all(fd: RawFd, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: writes from a live buffer of bytes.len() bytes.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n >= 0 {
            bytes = &bytes[n as usize..];
            continue;
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock => {
                let mut p = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
                // SAFETY: polls one live pollfd.
                unsafe { libc::poll(&mut p, 1, -1) };
            }
            _ => return Err(e),
        }
    }
    Ok(())
}

/// Appends `text` to `out` with `prefix` before each of its lines, ending each with a newline.
fn prefix_lines(prefix: &[u8], text: &[u8], out: &mut Vec<u8>) {
    for line in text.split_inclusive(|&b| b == b'\n') {
        out.extend_from_slice(prefix);
        out.extend_from_slice(line);
        if !line.ends_with(b"\n") {
            out.push(b'\n');
        }
    }
}

impl Pump {
    fn run(mut self, orders: &Receiver<Control>, wake: OwnedFd) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let timeout = self.next_deadline().map_or(-1, |d| {
                let left = d.saturating_duration_since(Instant::now());
                // Round up: waking before the deadline would only spin.
                left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
            });
            let mut fds = vec![libc::pollfd { fd: wake.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
            let mut which = Vec::new();
            for (i, input) in self.inputs.iter().enumerate() {
                if let Some(fd) = &input.fd {
                    fds.push(libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 });
                    which.push(i);
                }
            }
            // SAFETY: polls a live array of fds.len() pollfds. EINTR (a signal to the launcher)
            // only means going round again.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
            for (p, &i) in fds[1..].iter().zip(&which) {
                if p.revents != 0 {
                    self.read_from(i, &mut buf);
                }
            }
            if fds[0].revents != 0 {
                while let Read::Data(_) = read_some(wake.as_raw_fd(), &mut buf) {}
                loop {
                    match orders.try_recv() {
                        Ok(Control::Say(text)) => {
                            self.drain(&mut buf, false);
                            let mut out = Vec::new();
                            self.put(Stream::Stderr, None, text.as_bytes(), &mut out);
                            self.write(Stream::Stderr, &out);
                        }
                        Ok(Control::Add(sources)) => self.inputs.extend(sources.into_iter().map(Input::new)),
                        Err(TryRecvError::Empty) => break,
                        // Finish, or the launcher dropped its end without saying so.
                        Ok(Control::Finish) | Err(TryRecvError::Disconnected) => {
                            self.drain(&mut buf, true);
                            return;
                        }
                    }
                }
            }
            self.write_due(&mut buf);
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        let partials = self.inputs.iter().filter(|i| !i.partial.is_empty()).map(|i| i.since + WINDOW);
        partials.chain(self.merger.next_deadline(Instant::now())).min()
    }

    fn read_from(&mut self, i: usize, buf: &mut [u8]) -> Read {
        let Some(fd) = &self.inputs[i].fd else { return Read::End };
        let r = read_some(fd.as_raw_fd(), buf);
        match r {
            Read::Data(n) => self.take(i, &buf[..n], Instant::now()),
            Read::End => self.end(i),
            Read::Nothing => {}
        }
        r
    }

    /// Reads what every stream holds now, then writes everything held back. `last`: the job is
    /// over, so the streams are closed after.
    fn drain(&mut self, buf: &mut [u8], last: bool) {
        for i in 0..self.inputs.len() {
            let mut taken = 0;
            while taken < MAX_DRAIN {
                match self.read_from(i, buf) {
                    Read::Data(n) => taken += n,
                    _ => break,
                }
            }
            if last {
                self.end(i);
            }
        }
        let now = Instant::now();
        for i in 0..self.inputs.len() {
            self.flush_partial(i, now);
        }
        let entries = self.merger.take_all();
        self.write_entries(entries);
    }

    /// New bytes from input `i`: whole lines go on, the rest waits for its newline.
    fn take(&mut self, i: usize, bytes: &[u8], now: Instant) {
        let input = &mut self.inputs[i];
        if input.partial.is_empty() {
            input.since = now;
        }
        input.partial.extend_from_slice(bytes);
        if let Some(last) = input.partial.iter().rposition(|&b| b == b'\n') {
            let rest = input.partial.split_off(last + 1);
            let lines = std::mem::replace(&mut input.partial, rest);
            input.since = now;
            self.emit(i, lines, true, now);
        }
        if self.inputs[i].partial.len() >= MAX_PIECE {
            self.flush_partial(i, now);
        }
    }

    /// Input `i` has ended: what is left of its last line goes on.
    fn end(&mut self, i: usize) {
        if self.inputs[i].fd.take().is_some() {
            self.flush_partial(i, Instant::now());
        }
    }

    fn flush_partial(&mut self, i: usize, now: Instant) {
        let piece = std::mem::take(&mut self.inputs[i].partial);
        if !piece.is_empty() {
            self.emit(i, piece, false, now);
        }
    }

    /// `text` from input `i`: whole lines (`whole`), or a piece of one.
    fn emit(&mut self, i: usize, text: Vec<u8>, whole: bool, now: Instant) {
        let (rank, stream) = (self.inputs[i].rank, self.inputs[i].stream);
        match stream {
            Stream::Stdout => {
                let mut out = Vec::with_capacity(text.len() + 16);
                if self.label {
                    let mut labelled = Vec::with_capacity(text.len() + 16);
                    prefix_lines(format!("[{rank}] ").as_bytes(), &text, &mut labelled);
                    self.put(stream, Some(rank), &labelled, &mut out);
                } else {
                    self.put(stream, Some(rank), &text, &mut out);
                }
                self.write(stream, &out);
            }
            Stream::Stderr if whole => {
                for line in text.split_inclusive(|&b| b == b'\n') {
                    self.merger.push(rank, line.to_vec(), true, now);
                }
            }
            Stream::Stderr => self.merger.push(rank, text, false, now),
        }
    }

    /// Writes what has fallen due: merged stderr lines, and pieces of lines held too long.
    fn write_due(&mut self, buf: &mut [u8]) {
        for i in 0..self.inputs.len() {
            // The rest of the line may have waited in the channel while this thread was busy:
            // a line is only held too long if nothing more is there to read.
            while self.overdue(i) {
                if let Read::Data(_) = self.read_from(i, buf) {
                    continue;
                }
                if self.overdue(i) {
                    self.flush_partial(i, Instant::now());
                }
                break;
            }
        }
        let entries = self.merger.due(Instant::now());
        self.write_entries(entries);
    }

    fn overdue(&self, i: usize) -> bool {
        let input = &self.inputs[i];
        !input.partial.is_empty() && Instant::now() >= input.since + WINDOW
    }

    fn write_entries(&mut self, entries: Vec<Entry>) {
        if entries.is_empty() {
            return;
        }
        let mut out = Vec::new();
        for e in entries {
            let prefix = match e.ranks.as_slice() {
                [r] if self.label => format!("[{r}] "),
                &[r] => {
                    self.put(Stream::Stderr, Some(r), &e.text, &mut out);
                    continue;
                }
                many => format!("[ranks {}] ", merge::rank_list(many)),
            };
            let mut labelled = Vec::with_capacity(e.text.len() + prefix.len() + 1);
            prefix_lines(prefix.as_bytes(), &e.text, &mut labelled);
            self.put(Stream::Stderr, None, &labelled, &mut out);
        }
        self.write(Stream::Stderr, &out);
    }

    /// Appends `bytes` from `from` (a rank, or None) to `out`, for `stream`, starting a new line
    /// first if the stream was left mid-line by someone else.
    fn put(&mut self, stream: Stream, from: Option<u32>, bytes: &[u8], out: &mut Vec<u8>) {
        let open = &mut self.open_line[stream as usize];
        if open.is_some_and(|w| w != from || from.is_none()) {
            out.push(b'\n');
        }
        if let Some(&last) = bytes.last() {
            *open = (last != b'\n').then_some(from);
        }
        out.extend_from_slice(bytes);
    }

    fn write(&mut self, stream: Stream, bytes: &[u8]) {
        if write_all(stream.fd(), bytes).is_err() {
            // The launcher's stream is closed (EPIPE) or broken: close the ranks' too.
            for input in self.inputs.iter_mut().filter(|i| i.stream == stream) {
                input.fd = None;
                input.partial.clear();
            }
        }
    }
}
