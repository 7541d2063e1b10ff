//! Registration strategies: no stale registration after unexpose, and pin limits that fail
//! clearly (pin-all) or fall back (rendezvous).

use super::{pattern, share_u64};
use activerma::{Error, Prot, RemotePtr, Result, Strategy, World};

const PAGES: usize = 8;

fn stat(w: &World, name: &str) -> u64 {
    w.registration_stats().snapshot().into_iter().find(|&(k, _)| k == name).map(|(_, v)| v).unwrap()
}

/// Anonymous memory of `PAGES` pages; with `at`, a fresh mapping replacing whatever was there
/// (the classic stale-registration trap: same addresses, new pages).
fn map_pages(at: Option<usize>) -> usize {
    let ps = activerma_core::page::page_size();
    let (hint, flags) = match at {
        Some(a) => (a as *mut libc::c_void, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED),
        None => (std::ptr::null_mut(), libc::MAP_PRIVATE | libc::MAP_ANONYMOUS),
    };
    // SAFETY: anonymous mapping; with MAP_FIXED it replaces our own earlier mapping only.
    let p = unsafe { libc::mmap(hint, PAGES * ps, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
    assert_ne!(p, libc::MAP_FAILED, "mmap");
    p as usize
}

/// Expose, access from everyone, unexpose, replace the memory and its contents, expose the
/// same addresses again: every read sees the new contents, the first access after re-exposing
/// is a registration miss (nothing stale was reused), and unexpose unpins everything.
pub fn reexpose_no_stale() -> Result<()> {
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let ps = activerma_core::page::page_size();
    let (off, len) = (100, PAGES * ps - 200); // byte-exact bounds inside the pages
    let region = len / n;
    let base = map_pages(None);
    let mut first_addrs = None;
    for round in 0..4usize {
        if round > 0 {
            assert_eq!(map_pages(Some(base)), base, "fresh pages at the same address");
        }
        // SAFETY: our own mapping, not exposed right now.
        let buf = unsafe { std::slice::from_raw_parts_mut((base + off) as *mut u8, len) };
        for (i, b) in buf.iter_mut().enumerate() {
            *b = pattern(me, round, i);
        }
        // SAFETY: the mapping outlives the exposure (unexposed at the end of the round).
        let exposed = unsafe { w.expose_raw(buf.as_mut_ptr(), len, Prot::ReadWrite)? };
        let addrs = share_u64(&w, exposed.addr() as u64)?;
        assert_eq!(*first_addrs.get_or_insert_with(|| addrs.clone()), addrs, "the same addresses every round");
        w.barrier()?;
        // Nobody accessed the new exposures yet: none of their pages may be registered.
        for t in (0..n).filter(|&t| t != me) {
            let (p, _) = w.explain(RemotePtr::new(t, addrs[t] as usize), len, "get")?;
            // (Across hosts an origin holds no registration, only a key the unexpose revoked.)
            let fresh: &[&str] = if super::same_host(&w, t) { &["get_rendezvous", "get_firehose"] } else { &["get_keyed_rma"] };
            assert!(fresh.contains(&p.name()), "round {round}: rank {t}'s fresh exposure looks registered ({})", p.name());
        }
        let misses = stat(&w, "misses");
        w.barrier()?;
        for t in (0..n).filter(|&t| t != me) {
            let at = RemotePtr::new(t, addrs[t] as usize);
            let mut got = vec![0u8; len];
            w.get(at, &mut got)?;
            if let Some(i) = (0..len).find(|&i| got[i] != pattern(t, round, i)) {
                panic!("rank {me}, round {round}: byte {i} from rank {t} is stale ({} not {})", got[i], pattern(t, round, i));
            }
        }
        w.barrier()?; // everyone has read the whole range before anyone writes into it
        for t in (0..n).filter(|&t| t != me) {
            let mine: Vec<u8> = (0..region).map(|i| pattern(me, round + 100, i)).collect();
            w.put(RemotePtr::new(t, addrs[t] as usize + me * region), &mine)?;
            let mut back = vec![0u8; region];
            w.get(RemotePtr::new(t, addrs[t] as usize + me * region), &mut back)?;
            assert_eq!(back, mine, "round {round}: put/get round trip with rank {t}");
        }
        // Each fresh exposure was missed by whichever origin came first (all origins together).
        let missed: u64 = share_u64(&w, stat(&w, "misses") - misses)?.iter().sum();
        assert!(n == 1 || missed >= n as u64, "round {round}: only {missed} misses for {n} fresh exposures");
        w.barrier()?;
        for src in (0..n).filter(|&s| s != me) {
            let mut got = vec![0u8; region];
            exposed.read(src * region, &mut got);
            assert!(got.iter().enumerate().all(|(i, &b)| b == pattern(src, round + 100, i)), "round {round}: region of rank {src}");
        }
        w.barrier()?;
        exposed.unexpose()?;
        assert_eq!(w.registration_stats().pinned_now(), 0, "round {round}: unexpose unpinned every registered page");
    }
    w.barrier()?;
    w.finalize()
}

/// Drops CAP_IPC_LOCK (root ignores RLIMIT_MEMLOCK only through it) and sets a small
/// RLIMIT_MEMLOCK, so mlock meets a real kernel limit as an ordinary user would.
fn small_memlock_limit(bytes: u64) {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    const CAP_IPC_LOCK: u32 = 14;
    let mut h = Header { version: VERSION_3, pid: 0 };
    let mut d = [Data::default(); 2];
    // SAFETY: capget/capset with a v3 header and two data words, as the ABI defines them.
    unsafe {
        assert_eq!(libc::syscall(libc::SYS_capget, &mut h as *mut Header, d.as_mut_ptr()), 0, "capget");
        d[0].effective &= !(1 << CAP_IPC_LOCK);
        d[0].permitted &= !(1 << CAP_IPC_LOCK);
        assert_eq!(libc::syscall(libc::SYS_capset, &mut h as *mut Header, d.as_ptr()), 0, "capset");
        let rl = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
        assert_eq!(libc::setrlimit(libc::RLIMIT_MEMLOCK, &rl), 0, "setrlimit");
    }
}

/// A real RLIMIT_MEMLOCK of 256 KiB. pin-all: exposing 1 MiB fails with an error naming the
/// limit and `ulimit -l`, and leaves nothing exposed; a small exposure still works.
/// rendezvous: the 1 MiB exposure works, accesses to it fall back to bounce (counted) and
/// move the right bytes. With ACTIVERMA_PIN_LIMIT set, the runtime's own budget refuses first.
pub fn memlock_exhaustion() -> Result<()> {
    small_memlock_limit(256 << 10);
    let w = activerma::init()?;
    let (me, n) = (w.rank(), w.size());
    let budget = std::env::var("ACTIVERMA_PIN_LIMIT").is_ok_and(|v| v != "0");
    let mut big = vec![0u8; 1 << 20];
    for (i, b) in big.iter_mut().enumerate() {
        *b = pattern(me, 7, i);
    }
    match w.registration_strategy() {
        Strategy::PinAll => {
            let e = w.expose(&mut big, Prot::ReadWrite).err().expect("1 MiB does not fit under a 256 KiB memlock limit");
            let text = e.to_string();
            assert!(matches!(e, Error::OutOfResources(_)), "{e}");
            let named = if budget { "ACTIVERMA_PIN_LIMIT" } else { "RLIMIT_MEMLOCK" };
            assert!(text.contains(named) && text.contains("ulimit -l"), "the error names {named} and how to raise it: {text}");
            assert!(stat(&w, "pin_failures") >= 1 && w.registration_stats().pinned_now() == 0);
            let addrs = share_u64(&w, big.as_ptr() as u64)?;
            let right = (me + 1) % n;
            let e = w.get(RemotePtr::new(right, addrs[right] as usize), &mut [0u8; 8]).unwrap_err();
            assert!(matches!(e, Error::NotExposed { .. }), "a failed exposure leaves nothing exposed: {e}");
            let mut small = vec![0u8; 64 << 10];
            let ex = w.expose(&mut small, Prot::ReadWrite)?;
            assert!(w.registration_stats().pinned_now() >= 64 << 10);
            w.barrier()?;
            drop(ex);
            assert_eq!(w.registration_stats().pinned_now(), 0);
        }
        Strategy::Rendezvous | Strategy::RendezvousUnpin | Strategy::Firehose => {
            let ex = w.expose(&mut big, Prot::ReadWrite)?;
            let addrs = share_u64(&w, ex.addr() as u64)?;
            for t in (0..n).filter(|&t| t != me) {
                let mut got = vec![0u8; 1 << 20];
                w.get(RemotePtr::new(t, addrs[t] as usize), &mut got)?;
                assert!(got.iter().enumerate().all(|(i, &b)| b == pattern(t, 7, i)), "bounced get from rank {t}");
                // A small access still fits and is served zero-copy after registering.
                let mut word = [0u8; 8];
                w.get(RemotePtr::new(t, addrs[t] as usize + 4096), &mut word)?;
                assert_eq!(word[0], pattern(t, 7, 4096));
            }
            // Firehose counts the fallback as a bounced operation (its move was refused).
            let fell_back = if w.registration_strategy() == Strategy::Firehose { "bounce_ops" } else { "rendezvous_fallbacks" };
            assert!(n == 1 || stat(&w, fell_back) >= 1, "a 1 MiB registration cannot fit: it must fall back");
            w.barrier()?;
            assert!(n == 1 || stat(&w, "pin_failures") >= 1, "the target counted the refused pins");
            drop(ex);
        }
        other => panic!("memlock_exhaustion runs under pin-all, rendezvous or firehose, not {}", other.name()),
    }
    w.barrier()?;
    w.finalize()
}
