//! Origin and target in two processes: the test binary re-runs itself as the target (a child
//! with its own userfaultfd region and a polling fault handler); NACKs go down the child's
//! stdin, ERRs come back on its stderr (libtest writes its own chatter to stdout). The
//! runtime's link is an active message instead of a pipe; the fault path is the same.

use super::tests::region;
use super::*;
use activerma_core::{Rank, Result};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::process::{Child, ChildStderr, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};

const ENV_LEN: &str = "ACTIVERMA_PART_TEST_CHILD_LEN";
/// A frame with xfer 0 is a control request: evict pages with probability `block`/100
/// (seed in `fault_addr`); the child answers with an ERR frame whose `block` is the count.
const CTRL: u64 = 0;

/// The child's side: runs only when started by `Child::spawn` below.
#[test]
#[ignore = "started by the cross-process tests as the target process"]
fn part_child_target_process() {
    let Ok(len) = std::env::var(ENV_LEN) else { return };
    let r = region(len.parse().unwrap());
    let mut err_out = std::io::stderr().lock();
    writeln!(err_out, "PARTCHILD {} {} {}", std::process::id(), r.addr(), r.len()).unwrap();
    err_out.flush().unwrap();
    struct Sink<'a>(Mutex<std::io::StderrLock<'a>>);
    impl ErrSink for Sink<'_> {
        fn send_err(&self, _o: Rank, e: &ErrMsg) -> Result<()> {
            let mut w = self.0.lock().unwrap();
            w.write_all(&e.encode()).and_then(|_| w.flush()).map_err(|e| activerma_core::Error::PeerGone { rank: 0, how: e.to_string() })
        }
    }
    let sink = Sink(Mutex::new(err_out));
    let target = PartTarget::new(Arc::new(PartStats::default()));
    // Poll stdin without blocking: the handler spins like the in-process handler thread, so
    // a NACK is picked up without a wake-up.
    let stdin = std::io::stdin();
    let fd = stdin.as_raw_fd();
    unsafe { libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK) };
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = unsafe { libc::read(fd, chunk.as_mut_ptr() as *mut _, chunk.len()) };
        if n == 0 {
            return; // parent closed the link
        }
        if n < 0 {
            std::hint::spin_loop();
            continue;
        }
        buf.extend_from_slice(&chunk[..n as usize]);
        while buf.len() >= NACK_BYTES {
            let nack = Nack::decode(&buf[..NACK_BYTES]).unwrap();
            buf.drain(..NACK_BYTES);
            if nack.xfer == CTRL {
                let mut inj = FaultInjector::new(nack.block as f64 / 100.0, nack.fault_addr as u64).unwrap();
                let n = inj.inject(&r, r.addr(), r.len()).unwrap().len();
                let reply = ErrMsg { xfer: CTRL, block: n as u32, status: ErrStatus::Resolved { pages: 0 } };
                sink.send_err(0, &reply).unwrap();
            } else {
                target.on_nack(nack);
                target.progress(&sink).unwrap();
            }
        }
    }
}

pub(super) struct ChildTarget {
    child: Child,
    stdin: Mutex<Option<ChildStdin>>,
    stderr: Mutex<(ChildStderr, Vec<u8>)>,
    errs: Mutex<Vec<ErrMsg>>,
    pub pid: i32,
    pub addr: usize,
    pub len: usize,
}

impl ChildTarget {
    pub(super) fn spawn(len: usize) -> ChildTarget {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "part::cross_process::part_child_target_process", "--ignored", "--nocapture", "--test-threads=1"])
            .env(ENV_LEN, len.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("re-run the test binary as the PART target");
        let stdin = child.stdin.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        // Handshake line, read byte by byte so no ERR bytes are swallowed.
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while b[0] != b'\n' {
            assert_eq!(stderr.read(&mut b).unwrap(), 1, "target child died: {}", String::from_utf8_lossy(&line));
            line.push(b[0]);
        }
        let line = String::from_utf8(line).unwrap();
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.first(), Some(&"PARTCHILD"), "target child said: {line}");
        let fd = stderr.as_raw_fd();
        unsafe { libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK) };
        ChildTarget {
            pid: f[1].parse().unwrap(),
            addr: f[2].parse().unwrap(),
            len: f[3].parse().unwrap(),
            child,
            stdin: Mutex::new(Some(stdin)),
            stderr: Mutex::new((stderr, Vec::new())),
            errs: Mutex::new(Vec::new()),
        }
    }

    pub(super) fn peer(&self) -> Peer {
        Peer { rank: 1, pid: self.pid }
    }

    /// Has the child evict each of its pages with probability `pct`/100; returns the count.
    pub(super) fn inject(&self, pct: u32, seed: usize) -> usize {
        let ctrl = Nack {
            xfer: CTRL,
            origin: 0,
            block: pct,
            write: false,
            want_err: true,
            page_in: PageIn::One,
            fault_addr: seed,
            block_addr: 0,
            block_len: 0,
            xfer_addr: 0,
            xfer_len: 0,
        };
        self.send_nack(1, &ctrl).unwrap();
        let mut out = Vec::new();
        while out.is_empty() {
            self.take_errs(CTRL, &mut out);
        }
        out[0].block as usize
    }

    fn pump(&self) {
        let mut g = self.stderr.lock().unwrap();
        let (ref mut rd, ref mut buf) = *g;
        let mut chunk = [0u8; 4096];
        while let Ok(n) = rd.read(&mut chunk) {
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let mut errs = self.errs.lock().unwrap();
        while buf.len() >= ERR_BYTES {
            errs.push(ErrMsg::decode(&buf[..ERR_BYTES]).unwrap());
            buf.drain(..ERR_BYTES);
        }
    }
}

impl OriginLink for ChildTarget {
    fn send_nack(&self, _t: Rank, nack: &Nack) -> Result<()> {
        let mut g = self.stdin.lock().unwrap();
        let w = g.as_mut().ok_or_else(|| activerma_core::Error::PeerGone { rank: 1, how: "link closed".into() })?;
        w.write_all(&nack.encode()).and_then(|_| w.flush()).map_err(|e| activerma_core::Error::PeerGone { rank: 1, how: e.to_string() })
    }

    fn take_errs(&self, xfer: u64, out: &mut Vec<ErrMsg>) {
        self.pump();
        let mut v = self.errs.lock().unwrap();
        out.extend(v.extract_if(.., |e| e.xfer == xfer));
    }
}

impl Drop for ChildTarget {
    fn drop(&mut self) {
        // EOF on its stdin ends the child's loop; kill (our own child, by its handle) in case
        // it is stuck, then reap it.
        self.stdin.lock().unwrap().take();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn check_cross_process(page_in: PageIn, retransmit: Retransmit) {
    let len = 1 << 20;
    let child = ChildTarget::spawn(len);
    assert_eq!(child.len, len);
    let stats = Arc::new(PartStats::default());
    let cfg = PartConfig { page_in, retransmit, ..Default::default() };
    let origin = Origin::new(0, cfg, stats.clone()).unwrap();
    let label = format!("{page_in:?}/{retransmit:?}");
    // Every page of the child's region starts missing: the put faults on all of them.
    let src: Vec<u8> = (0..len).map(|i| (i * 7 + (i >> 12)) as u8).collect();
    origin.put(&child, child.peer(), child.addr, &src).unwrap_or_else(|e| panic!("{label}: put: {e}"));
    assert!(PartStats::get(&stats.nacks_sent) > 0, "{label}: no fault met");
    // Evict ~30 % in the child, then read it all back through PART (faults at the source).
    let n = child.inject(30, 99);
    assert!(n > 0);
    let before = PartStats::get(&stats.faults_src);
    let mut back = vec![0u8; len];
    origin.get(&child, child.peer(), child.addr, &mut back).unwrap_or_else(|e| panic!("{label}: get: {e}"));
    assert!(back == src, "{label}: data differs at {:?}", back.iter().zip(&src).position(|(a, b)| a != b));
    let faults = PartStats::get(&stats.faults_src) - before;
    if page_in == PageIn::One && retransmit == Retransmit::Err {
        assert_eq!(faults, n as u64, "{label}: every evicted page faulted once");
    }
    assert!(faults >= 1);
}

#[test]
fn part_cross_process_target_pio_err() {
    check_cross_process(PageIn::One, Retransmit::Err);
}

#[test]
fn part_cross_process_target_pia_timeout() {
    check_cross_process(PageIn::All, Retransmit::Timeout(std::time::Duration::from_micros(100)));
}
