//! The object DSM's contract (activerma-dsm), under the protocol the job's
//! ACTIVERMA_DSM_PROTOCOL names: multiple writers merge, a lock-protected counter counts every
//! increment, wait/notify hands items from a producer to consumers, barriers order rounds
//! (invalidation after acquire), linked structures of references, objects larger than the
//! receive buffer, and bad input refused with a clear error.

use activerma::{Error, Result};
use activerma_dsm::{Dsm, GlobalRef};

fn fail(what: String) -> Error {
    Error::InvalidArgument(what)
}

fn must_fail<T>(what: &str, r: Result<T>, says: &str) -> Result<()> {
    match r {
        Ok(_) => Err(fail(format!("{what}: accepted"))),
        Err(e) if e.to_string().contains(says) => Ok(()),
        Err(e) => Err(fail(format!("{what}: refused, but the error does not say {says:?}: {e}"))),
    }
}

pub fn dsm_contract() -> Result<()> {
    let w = activerma::init()?;
    let mut dsm = Dsm::new(&w)?;
    let (me, n) = (w.rank(), w.size());
    multiple_writers(&mut dsm, me, n)?;
    counter(&mut dsm, me, n)?;
    producer_consumer(&mut dsm, me, n)?;
    barrier_rounds(&mut dsm, me, n)?;
    many_notices(&mut dsm, me, n)?;
    linked_list(&mut dsm, me, n)?;
    large_object(&mut dsm, me, n)?;
    bad_input(&mut dsm, me, n)?;
    let s = dsm.stats();
    let fetched = if dsm.page_granular() { s.pages_fetched } else { s.fetches_message + s.fetches_rdma };
    if me != 0 && fetched == 0 {
        return Err(fail(format!("rank {me} fetched nothing: {s:?}")));
    }
    if dsm.page_granular() && n > 1 && (s.fetches_message + s.fetches_rdma > 0 || s.pages_dropped == 0) {
        return Err(fail(format!("the page-granular mode fetched regions, or dropped no page: {s:?}")));
    }
    if dsm.protocol() == activerma_dsm::Protocol::InvalidateRdma && !dsm.page_granular() && me != 0 && s.fetches_rdma == 0 {
        return Err(fail(format!("invalidate-rdma, and no object came by RDMA: {s:?}")));
    }
    w.finalize()
}

/// Every rank writes its own bytes of one region (homed at 0) and of a chunked array (homed at
/// the last rank), in the same interval; after a barrier everyone sees everyone's bytes.
fn multiple_writers(dsm: &mut Dsm, me: usize, n: usize) -> Result<()> {
    const PART: usize = 1000; // not a multiple of 8: writers share words
    let region = dsm.share(0, (me == 0).then(|| dsm.alloc(PART * n)).transpose()?)?;
    let array = dsm.share_array(n - 1, (me == n - 1).then(|| dsm.alloc_array(PART * n * 5)).transpose()?)?;
    {
        let mut v = dsm.write(region)?;
        v[me * PART..(me + 1) * PART].fill(me as u8 + 1);
    }
    for i in (me * PART * 5..(me + 1) * PART * 5).step_by(7) {
        let (chunk, at) = array.locate(i as u64)?;
        dsm.write(chunk)?[at] = (i % 251) as u8 + 1;
    }
    dsm.barrier()?;
    let v = dsm.read(region)?;
    for who in 0..n {
        if let Some(bad) = v[who * PART..(who + 1) * PART].iter().position(|&b| b != who as u8 + 1) {
            return Err(fail(format!(
                "multiple writers: rank {me} reads byte {} of rank {who}'s part as {}",
                who * PART + bad,
                v[who * PART + bad]
            )));
        }
    }
    drop(v);
    for i in 0..PART * n * 5 {
        let (chunk, at) = array.locate(i as u64)?;
        let start = i / (PART * 5) * PART * 5; // where the writer of byte i began
        let want = if (i - start).is_multiple_of(7) { (i % 251) as u8 + 1 } else { 0 };
        let got = dsm.read(chunk)?[at];
        if got != want {
            return Err(fail(format!("multiple writers, array: rank {me} reads byte {i} as {got}, expected {want}")));
        }
    }
    dsm.barrier()
}

/// A counter at the last rank, incremented under its lock by every rank (re-entered once in a
/// while); the total is exact.
fn counter(dsm: &mut Dsm, me: usize, n: usize) -> Result<()> {
    const ROUNDS: u64 = 60;
    let c = dsm.share(n - 1, (me == n - 1).then(|| dsm.alloc(8)).transpose()?)?;
    dsm.barrier()?;
    for i in 0..ROUNDS {
        dsm.lock(c)?;
        if i % 10 == 0 {
            dsm.lock(c)?; // re-entered: no message, no release
        }
        let v: u64 = dsm.read(c)?.get(0)?;
        dsm.write(c)?.set(0, v + 1)?;
        if i % 10 == 0 {
            dsm.unlock(c)?;
        }
        dsm.unlock(c)?;
    }
    dsm.barrier()?;
    let total: u64 = dsm.read(c)?.get(0)?;
    if total != ROUNDS * n as u64 {
        return Err(fail(format!("counter: rank {me} reads {total}, expected {}", ROUNDS * n as u64)));
    }
    dsm.barrier()
}

/// One slot [full, value, done] at rank 0: rank 0 produces, every other rank consumes with
/// wait/notify_all; every item is taken exactly once.
fn producer_consumer(dsm: &mut Dsm, me: usize, n: usize) -> Result<()> {
    const ITEMS: u64 = 40;
    let slot = dsm.share(0, (me == 0).then(|| dsm.alloc(24)).transpose()?)?;
    let sums = dsm.share(0, (me == 0).then(|| dsm.alloc(16 * n)).transpose()?)?;
    dsm.barrier()?;
    if n == 1 {
        return Ok(());
    }
    if me == 0 {
        for item in 1..=ITEMS {
            dsm.lock(slot)?;
            while dsm.read(slot)?.get::<u64>(0)? == 1 {
                dsm.wait(slot)?;
            }
            let mut v = dsm.write(slot)?;
            v.set(0, 1u64)?;
            v.set(1, item)?;
            drop(v);
            dsm.notify_all(slot)?;
            dsm.unlock(slot)?;
        }
        dsm.lock(slot)?;
        while dsm.read(slot)?.get::<u64>(0)? == 1 {
            dsm.wait(slot)?;
        }
        dsm.write(slot)?.set(2, 1u64)?;
        dsm.notify_all(slot)?;
        dsm.unlock(slot)?;
    } else {
        let (mut sum, mut count) = (0u64, 0u64);
        dsm.lock(slot)?;
        loop {
            let (full, value, done) = {
                let v = dsm.read(slot)?;
                (v.get::<u64>(0)?, v.get::<u64>(1)?, v.get::<u64>(2)?)
            };
            if full == 1 {
                sum += value;
                count += 1;
                dsm.write(slot)?.set(0, 0u64)?;
                dsm.notify_all(slot)?;
            } else if done == 1 {
                break;
            } else {
                dsm.wait(slot)?;
            }
        }
        dsm.unlock(slot)?;
        let mut v = dsm.write(sums)?;
        v.set(2 * me, sum)?;
        v.set(2 * me + 1, count)?;
    }
    dsm.barrier()?;
    let v = dsm.read(sums)?;
    let (mut sum, mut count) = (0, 0);
    for r in 1..n {
        sum += v.get::<u64>(2 * r)?;
        count += v.get::<u64>(2 * r + 1)?;
    }
    if (sum, count) != (ITEMS * (ITEMS + 1) / 2, ITEMS) {
        return Err(fail(format!(
            "producer/consumer: rank {me} sees {count} items summing to {sum}, expected {ITEMS} summing to {}",
            ITEMS * (ITEMS + 1) / 2
        )));
    }
    drop(v);
    dsm.barrier()
}

/// Round k: every rank writes k * (rank + 1) into its slot; after the barrier every rank reads
/// every slot as round k's (a stale copy kept across the barrier would show round k - 1's).
fn barrier_rounds(dsm: &mut Dsm, me: usize, n: usize) -> Result<()> {
    let slots = dsm.share(n / 2, (me == n / 2).then(|| dsm.alloc(8 * n)).transpose()?)?;
    dsm.barrier()?;
    for k in 1..=25u64 {
        dsm.write(slots)?.set(me, k * (me as u64 + 1))?;
        dsm.barrier()?;
        let v = dsm.read(slots)?;
        for r in 0..n {
            let got: u64 = v.get(r)?;
            if got != k * (r as u64 + 1) {
                return Err(fail(format!("barrier round {k}: rank {me} reads slot {r} as {got}, expected {}", k * (r as u64 + 1))));
            }
        }
        drop(v);
        dsm.barrier()?;
    }
    Ok(())
}

/// Rank 0 writes more regions in one interval than a barrier's write notices list (65536):
/// it sends "everything changed", and the others still see its change to a region they cached.
fn many_notices(dsm: &mut Dsm, me: usize, n: usize) -> Result<()> {
    let watched = dsm.share(0, (me == 0).then(|| dsm.alloc(8)).transpose()?)?;
    dsm.read(watched)?; // cached everywhere
    dsm.barrier()?;
    if me == 0 {
        for i in 0..70_000u64 {
            dsm.write(dsm.alloc(8)?)?.set(0, i)?;
        }
        dsm.write(watched)?.set(0, 77u64)?;
    }
    dsm.barrier()?;
    let got: u64 = dsm.read(watched)?.get(0)?;
    if got != 77 {
        return Err(fail(format!("many notices: rank {me} of {n} reads {got}, not the 77 rank 0 wrote")));
    }
    dsm.barrier()
}

/// Every rank pushes nodes it is home of onto one list (the head under its lock at rank 0);
/// every rank then walks the whole list through references.
fn linked_list(dsm: &mut Dsm, me: usize, n: usize) -> Result<()> {
    const NODES: u64 = 12;
    let head = dsm.share(0, (me == 0).then(|| dsm.alloc(8)).transpose()?)?;
    if me == 0 {
        dsm.write(head)?.set(0, GlobalRef::NULL.to_bits())?;
    }
    dsm.barrier()?;
    for i in 0..NODES {
        let node = dsm.alloc(16)?;
        dsm.write(node)?.set(0, (me as u64) << 32 | i)?;
        dsm.lock(head)?;
        let first: u64 = dsm.read(head)?.get(0)?;
        dsm.write(node)?.set(1, first)?;
        dsm.write(head)?.set(0, node.to_bits())?;
        dsm.unlock(head)?;
    }
    dsm.barrier()?;
    let mut seen = vec![0u64; n];
    let mut at = GlobalRef::from_bits(dsm.read(head)?.get(0)?);
    let mut steps = 0;
    while !at.is_null() {
        let v = dsm.read(at)?;
        let value: u64 = v.get(0)?;
        let (owner, i) = ((value >> 32) as usize, value & 0xFFFF_FFFF);
        if owner >= n || i >= NODES || seen[owner] & (1 << i) != 0 || at.home() != owner {
            return Err(fail(format!("linked list: rank {me} finds node {value:#x} at {at} (again, or not its own)")));
        }
        seen[owner] |= 1 << i;
        at = GlobalRef::from_bits(v.get(1)?);
        steps += 1;
    }
    if steps != NODES as usize * n {
        return Err(fail(format!("linked list: rank {me} walks {steps} nodes, expected {}", NODES as usize * n)));
    }
    dsm.barrier()
}

/// An object larger than the RDMA receive buffer comes back as a message, intact.
fn large_object(dsm: &mut Dsm, me: usize, n: usize) -> Result<()> {
    const BIG: usize = 200 * 1024 + 5;
    let big = dsm.share(n - 1, (me == n - 1).then(|| dsm.alloc(BIG)).transpose()?)?;
    if me == n - 1 {
        let mut v = dsm.write(big)?;
        for (i, b) in v.iter_mut().enumerate() {
            *b = (i % 253) as u8;
        }
    }
    dsm.barrier()?;
    let v = dsm.read(big)?;
    if v.len() != BIG || v.iter().enumerate().any(|(i, &b)| b != (i % 253) as u8) {
        return Err(fail(format!("large object: rank {me} reads {} bytes, not the {BIG} written", v.len())));
    }
    drop(v);
    dsm.barrier()
}

fn bad_input(dsm: &mut Dsm, me: usize, n: usize) -> Result<()> {
    let mine = dsm.alloc(64)?;
    let other = dsm.share((me + 1) % n, Some(mine))?; // the next rank's region
    let forged = GlobalRef::from_bits(other.to_bits() ^ 1 << 40);
    must_fail("reading a forged reference", dsm.read(forged).map(|_| ()), "forged")?;
    must_fail("locking a forged reference", dsm.lock(forged), "forged")?;
    must_fail("reading the null reference", dsm.read(GlobalRef::NULL).map(|_| ()), "null")?;
    let beyond = GlobalRef::from_bits((n as u64 + 3) << 48 | 1 << 32);
    must_fail("a reference to a rank outside the job", dsm.read(beyond).map(|_| ()), "ranks")?;
    must_fail("an id past the home's regions", dsm.read(GlobalRef::from_bits(other.to_bits() + 100_000)).map(|_| ()), "no region")?;
    must_fail("unlock without the lock", dsm.unlock(other), "does not hold")?;
    must_fail("wait without the lock", dsm.wait(other), "does not hold")?;
    must_fail("notify without the lock", dsm.notify(other), "does not hold")?;
    must_fail("an element outside the region", dsm.read(mine)?.get::<u64>(8), "outside")?;
    must_fail("setting an element outside the region", dsm.write(mine)?.set::<u32>(16, 1), "outside")?;
    {
        let _a = dsm.write(mine)?;
        must_fail("a second view while one writes", dsm.read(mine).map(|_| ()), "written")?;
    }
    must_fail("a region larger than the heap", dsm.alloc(1 << 40), "ACTIVERMA_DSM_HEAP")?;
    // A freed region: refused at its home at once, elsewhere once the copy is fetched again.
    let doomed = dsm.share(0, (me == 0).then(|| dsm.alloc(32)).transpose()?)?;
    dsm.read(doomed)?;
    dsm.barrier()?;
    if me == n - 1 {
        dsm.free(doomed)?;
    }
    dsm.barrier()?;
    must_fail("reading a freed region", dsm.read(doomed).map(|_| ()), "dangling")?;
    dsm.barrier()
}

/// Water and LU on the DSM end where their serial runs end (to rounding), under the job's
/// protocol.
pub fn dsm_apps() -> Result<()> {
    let w = activerma::init()?;
    let mut dsm = Dsm::new(&w)?;
    let water = activerma_water::Params { molecules: 125, steps: 2, dt: 2e-4 };
    let got = activerma_water::run(&mut dsm, water)?;
    let dev = activerma_water::deviation(&got.positions, &activerma_water::serial(water))?;
    if dev > 1e-9 {
        return Err(fail(format!("water: rank {} ends {dev:e} (of the lattice spacing) away from the serial run", w.rank())));
    }
    let lu = activerma_lu::Params { n: 64, block: 8 };
    let got = activerma_lu::run(&mut dsm, lu)?;
    let dev = activerma_lu::deviation(&got.matrix, &activerma_lu::serial(lu)?);
    if dev > 1e-12 {
        return Err(fail(format!("lu: rank {} ends {dev:e} away from the serial factors", w.rank())));
    }
    w.finalize()
}

/// Rank 1 dies (SIGKILL) while it holds a lock the others then ask for: the job ends by the
/// launcher's failure handling (the driver checks it names the rank), nobody hangs.
/// Lock caching (the job sets a 10 s lease): a lock this rank keeps is taken again without a
/// message; a rank that asks for it while the keeper is inside gets it after the keeper's
/// unlock once the keeper stops taking it — here the keeper then waits for a lock the asker
/// holds, so only the keeper's own progress can hand it on (in every progress mode), long
/// before the lease ends — and sees what the keeper wrote under it.
pub fn dsm_lock_handover() -> Result<()> {
    let w = activerma::init()?;
    let mut dsm = Dsm::new(&w)?;
    let me = w.rank();
    let a = dsm.share(0, (me == 0).then(|| dsm.alloc(8)).transpose()?)?;
    let b = dsm.share(0, (me == 0).then(|| dsm.alloc(8)).transpose()?)?;
    if me == 1 {
        for _ in 0..100 {
            dsm.lock(a)?;
            dsm.unlock(a)?;
        }
        let s = dsm.stats();
        if s.remote_locks != 1 || s.kept_locks != 99 {
            return Err(fail(format!(
                "100 locks of one lock nobody else wanted: {} asked the home, {} kept (want 1 and 99)",
                s.remote_locks, s.kept_locks
            )));
        }
    }
    dsm.barrier()?;
    match me {
        0 => dsm.lock(b)?,
        1 => dsm.lock(a)?, // kept: no message
        _ => {}
    }
    dsm.barrier()?;
    let start = std::time::Instant::now();
    if me == 0 {
        dsm.lock(a)?;
        let seen: u64 = dsm.read(a)?.get(0)?;
        dsm.unlock(a)?;
        dsm.unlock(b)?;
        if seen != 7 {
            return Err(fail(format!("rank 1 wrote 7 under the lock before handing it on; rank 0 then read {seen}")));
        }
    } else if me == 1 {
        std::thread::sleep(std::time::Duration::from_millis(20)); // rank 0 asks meanwhile
        dsm.write(a)?.set(0, 7u64)?;
        dsm.unlock(a)?; // wanted, lease not over: kept
        dsm.lock(b)?; // rank 0's until it has `a`
        dsm.unlock(b)?;
    }
    let took = start.elapsed();
    dsm.barrier()?;
    if took > std::time::Duration::from_secs(5) {
        return Err(fail(format!("rank {me}: the hand-over took {took:?}: the keeper waited out its 10 s lease instead of handing the lock on when it stopped taking it")));
    }
    w.finalize()
}

pub fn dsm_lock_holder_dies() -> Result<()> {
    let w = activerma::init()?;
    let mut dsm = Dsm::new(&w)?;
    let me = w.rank();
    let obj = dsm.share(0, (me == 0).then(|| dsm.alloc(8)).transpose()?)?;
    if me == 1 {
        dsm.lock(obj)?;
    }
    dsm.barrier()?;
    if me == 1 {
        // SAFETY: raise(2) on our own process.
        unsafe { libc::raise(libc::SIGKILL) };
    }
    dsm.lock(obj)?; // never granted: the holder is gone
    Err(fail(format!("rank {me} got a lock whose holder died")))
}
