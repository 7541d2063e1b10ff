//! ARMCI mutexes: each member of a group owns its own set, created collectively. Mutex m of
//! member p is a fair ticket lock (ticket.rs) in p's memory: FIFO, so every rank gets its
//! turn under contention from all the others.
//!
//! ```text
//! ARMCI_Create_mutexes(count)          the job's one set (world group); ARMCI_Lock(m, proc)
//!                                      names proc by job rank
//! ARMCIX_Create_mutexes_hdl(count, g)  a set over group g (any number of sets at once: a
//!                                      library can own one beside the program's); its calls
//!                                      name the owner by group rank
//! memory: the whole job -> one segment; part of it -> a group block (group_memory.rs,
//!         whose atomics the owner's progress engine serves)
//! trylock(m, p): ticket.rs's try: free (tickets == turn) and the compare-and-swap wins
//! armci_lockmem(start, end, p)         p's memory lock (RANK_WORDS at MEM_LOCK): one per
//!                                      rank, so any two locked ranges of p exclude each
//!                                      other (GA hashes addresses onto a few locks: finer,
//!                                      the same guarantee); armci_unlockmem(p) releases it
//! ```

use crate::errors::{entry, R};
use crate::groups::{check_group, members_of, ArmciGroup};
use crate::point_to_point::group_allgather;
use crate::state::{lock, nonneg, proc_arg, rank_word, remote_arg, rt, world, MEM_LOCK};
use crate::ticket::{self, Ticket};
use activerma::{RemotePtr, Segment};
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

/// Bytes per mutex: the lock word (ticket.rs), padded to 16.
const SLOT: usize = 16;

/// Where a set's mutexes live.
enum Memory {
    /// The whole job's: one segment.
    Segment(Segment),
    /// Part of the job: a group block; the members' bases by job rank, and this rank's.
    Group { bases: Vec<usize>, mine: usize },
}

/// One collectively created set of mutexes over a group's members.
pub struct MutexSet {
    /// Group rank -> job rank.
    members: Vec<c_int>,
    /// How many mutexes each member created (by group rank; members may ask for different
    /// numbers).
    counts: Vec<usize>,
    memory: Memory,
}

/// ARMCI_Create_mutexes' set (over the job).
static JOB_SET: Mutex<Option<MutexSet>> = Mutex::new(None);

impl MutexSet {
    /// Collective over `members` (job ranks in group order, this rank among them).
    fn create(members: Vec<c_int>, count: c_int) -> R<MutexSet> {
        let w = world()?;
        let n = nonneg(count.into(), "count")?;
        let whole = members.len() == w.size();
        let mine = (n as u64).to_le_bytes();
        let count_of = |b: &Vec<u8>| u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
        // By group rank: the job's allgather answers by job rank (the members may be the job
        // in another order), the group's in member order.
        let counts: Vec<usize> = if whole {
            let all = w.allgather(&mine).map_err(rt)?;
            members.iter().map(|&m| count_of(&all[m as usize])).collect()
        } else {
            group_allgather(&members.iter().map(|&m| m as usize).collect::<Vec<_>>(), &mine)?.iter().map(count_of).collect()
        };
        let memory = if whole {
            // Members in any order: the segment is indexed by job rank.
            let most = counts.iter().copied().max().unwrap_or(0).max(1);
            Memory::Segment(w.alloc_segment(most * SLOT).map_err(rt)?)
        } else {
            let bases = crate::group_memory::malloc(&members, (n.max(1) * SLOT) as libc::c_long)?;
            Memory::Group { mine: bases[w.rank()], bases }
        };
        Ok(MutexSet { members, counts, memory })
    }

    /// Collective over the members, as the creation was.
    fn destroy(self) -> R {
        match self.memory {
            // Segment::free is collective over the job and starts with a barrier.
            Memory::Segment(seg) => seg.free().map_err(rt),
            Memory::Group { mine, .. } => crate::group_memory::free(&self.members, mine as *mut c_void),
        }
    }

    /// Where mutex `mutex` of group rank `owner` lives, after checking both.
    fn locate(&self, mutex: c_int, owner: c_int) -> R<RemotePtr> {
        let g = match usize::try_from(owner) {
            Ok(g) if g < self.members.len() => g,
            _ => return Err(format!("argument proc = {owner} is not a rank of the mutexes' group (0 to {})", self.members.len() - 1)),
        };
        let i = match usize::try_from(mutex) {
            Ok(i) if i < self.counts[g] => i,
            _ => return Err(format!("argument mutex = {mutex} is out of range: rank {owner} created {} mutexes", self.counts[g])),
        };
        let job = self.members[g] as usize;
        Ok(match &self.memory {
            Memory::Segment(seg) => seg.remote(job, i * SLOT),
            Memory::Group { bases, .. } => RemotePtr::new(job, bases[job] + i * SLOT),
        })
    }
}

/// The mutexes this process holds, by where their lock words live, with the tickets that
/// release them: an unlock of one it does not hold would advance the lock's turn for a rank
/// that still waits, or let two in at once; it is refused instead. (Per process, not per
/// thread: ARMCI's mutexes are the rank's.)
static HELD: Mutex<Vec<(usize, usize, Ticket)>> = Mutex::new(Vec::new());

fn lock_at(at: RemotePtr) -> R {
    let t = ticket::acquire(world()?, at)?;
    lock(&HELD).push((at.rank, at.addr, t));
    Ok(())
}

fn try_lock_at(at: RemotePtr) -> R<bool> {
    let taken = ticket::try_acquire(world()?, at)?;
    if let Some(t) = taken {
        lock(&HELD).push((at.rank, at.addr, t));
    }
    Ok(taken.is_some())
}

/// Whether this process holds the lock at `at`.
fn holds(at: RemotePtr) -> bool {
    lock(&HELD).iter().any(|h| (h.0, h.1) == (at.rank, at.addr))
}

/// Releases the lock at `at` if this process holds it; `not_held` says why not otherwise.
fn unlock_at(at: RemotePtr, not_held: impl FnOnce() -> String) -> R {
    let w = world()?;
    let t = {
        let mut held = lock(&HELD);
        let Some(i) = held.iter().position(|h| (h.0, h.1) == (at.rank, at.addr)) else {
            return Err(not_held());
        };
        held.swap_remove(i).2
    };
    // Data the holder put under the lock must be visible before the next holder enters.
    w.flush_all().map_err(rt)?;
    ticket::release(w, at, t)
}

fn not_held(mutex: c_int, proc: c_int) -> String {
    format!("mutex {mutex} of rank {proc} is not held by this rank (an unlock without its lock)")
}

/// The job set's mutex `mutex` of job rank `proc`.
fn job_mutex(mutex: c_int, proc: c_int) -> R<RemotePtr> {
    let w = world()?;
    let p = proc_arg(w, proc, "proc")?;
    let g = lock(&JOB_SET);
    g.as_ref().ok_or("no mutexes exist (call ARMCI_Create_mutexes first)")?.locate(mutex, p as c_int)
}

#[no_mangle]
pub extern "C" fn ARMCI_Create_mutexes(count: c_int) -> c_int {
    entry("ARMCI_Create_mutexes", || {
        if lock(&JOB_SET).is_some() {
            return Err("mutexes already exist: call ARMCI_Destroy_mutexes first".into());
        }
        let set = MutexSet::create((0..world()?.size() as c_int).collect(), count)?;
        *lock(&JOB_SET) = Some(set);
        Ok(())
    });
    0
}

#[no_mangle]
pub extern "C" fn ARMCI_Destroy_mutexes() -> c_int {
    entry("ARMCI_Destroy_mutexes", || {
        world()?;
        let set = lock(&JOB_SET).take().ok_or("no mutexes exist (ARMCI_Create_mutexes was not called)")?;
        set.destroy()
    });
    0
}

#[no_mangle]
pub extern "C" fn ARMCI_Lock(mutex: c_int, proc: c_int) {
    entry("ARMCI_Lock", || lock_at(job_mutex(mutex, proc)?))
}

#[no_mangle]
pub extern "C" fn ARMCI_Unlock(mutex: c_int, proc: c_int) {
    entry("ARMCI_Unlock", || unlock_at(job_mutex(mutex, proc)?, || not_held(mutex, proc)))
}

/// Sets made by ARMCIX_Create_mutexes_hdl and not destroyed: a handle is valid only if listed
/// (a forged or destroyed one is refused, not followed).
static HANDLES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// The set behind a handle, if it is live.
unsafe fn set_of<'a>(hdl: *mut MutexSet) -> R<&'a MutexSet> {
    if hdl.is_null() || !lock(&HANDLES).contains(&(hdl as usize)) {
        return Err(format!("argument hdl = {hdl:p} is not a live mutex handle (never created, or destroyed)"));
    }
    Ok(&*hdl)
}

/// Collective over `group`'s members: `count` mutexes of this rank's in a new set.
#[no_mangle]
pub unsafe extern "C" fn ARMCIX_Create_mutexes_hdl(count: c_int, group: *mut ArmciGroup) -> *mut MutexSet {
    entry("ARMCIX_Create_mutexes_hdl", || {
        let g = check_group(group)?;
        if g.rank < 0 {
            return Err(format!("this rank ({}) is not a member of the group", world()?.rank()));
        }
        let set = Box::into_raw(Box::new(MutexSet::create(members_of(g), count)?));
        lock(&HANDLES).push(set as usize);
        Ok(set)
    })
}

/// Collective over the set's group.
#[no_mangle]
pub unsafe extern "C" fn ARMCIX_Destroy_mutexes_hdl(hdl: *mut MutexSet) -> c_int {
    entry("ARMCIX_Destroy_mutexes_hdl", || {
        set_of(hdl)?;
        lock(&HANDLES).retain(|&h| h != hdl as usize);
        Box::from_raw(hdl).destroy()
    });
    0
}

/// Takes mutex `mutex` of the set's group rank `proc`.
#[no_mangle]
pub unsafe extern "C" fn ARMCIX_Lock_hdl(hdl: *mut MutexSet, mutex: c_int, proc: c_int) {
    entry("ARMCIX_Lock_hdl", || lock_at(set_of(hdl)?.locate(mutex, proc)?))
}

/// Takes the mutex if it is free: 0 when taken, 1 when another rank holds it (or waits for it).
#[no_mangle]
pub unsafe extern "C" fn ARMCIX_Trylock_hdl(hdl: *mut MutexSet, mutex: c_int, proc: c_int) -> c_int {
    entry("ARMCIX_Trylock_hdl", || {
        let at = set_of(hdl)?.locate(mutex, proc)?;
        Ok(if try_lock_at(at)? { 0 } else { 1 })
    })
}

#[no_mangle]
pub unsafe extern "C" fn ARMCIX_Unlock_hdl(hdl: *mut MutexSet, mutex: c_int, proc: c_int) {
    entry("ARMCIX_Unlock_hdl", || unlock_at(set_of(hdl)?.locate(mutex, proc)?, || not_held(mutex, proc)))
}

/// Locks rank proc's memory [pstart, pend] (both inclusive, inside one of its ARMCI
/// allocations) against every other armci_lockmem of that rank's memory, until
/// armci_unlockmem(proc). A process holds at most one memory lock per rank: a second would
/// wait for itself, and is refused.
#[no_mangle]
pub unsafe extern "C" fn armci_lockmem(pstart: *mut c_void, pend: *mut c_void, proc: c_int) {
    entry("armci_lockmem", || {
        let w = world()?;
        let p = proc_arg(w, proc, "proc")?;
        let (start, end) = (pstart as usize, pend as usize);
        if end < start {
            return Err(format!("argument pend = {pend:p} lies before pstart = {pstart:p}"));
        }
        remote_arg(p, start, end - start + 1, "pstart")?;
        let at = rank_word(p, MEM_LOCK)?;
        if holds(at) {
            return Err(format!("this rank already holds a memory lock on rank {proc} (call armci_unlockmem first)"));
        }
        lock_at(at)
    })
}

/// Releases the memory lock this process took on rank proc with armci_lockmem.
#[no_mangle]
pub extern "C" fn armci_unlockmem(proc: c_int) {
    entry("armci_unlockmem", || {
        let p = proc_arg(world()?, proc, "proc")?;
        unlock_at(rank_word(p, MEM_LOCK)?, || {
            format!("this rank holds no memory lock on rank {proc} (an armci_unlockmem without its armci_lockmem)")
        })
    })
}
