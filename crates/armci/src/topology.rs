//! Topology: ARMCI's SMP domains. A program may load and store directly through the
//! ARMCI_Malloc addresses of every rank in its domain (Global Arrays does: NGA_Access of a
//! patch a rank of its node owns, `armci_domain_same_id` in its one-sided calls), so a domain
//! holds only ranks whose segments this process maps at their owners' addresses.
//!
//! ```text
//! every rank of my host maps me and I map it at the owners' addresses (the smp conduit,
//! emulated hosts too):   domain = host (World::node_of); Uses_shm = 1
//! otherwise (the mpi conduit: MPI's shared windows map other ranks' memory where MPI chooses,
//! other hosts' not at all): every rank is its own domain, as ARMCI-MPI's; Uses_shm = 0
//! ```
//!
//! The conduit decides, so every rank takes the same branch.

use crate::errors::{entry, R};
use crate::state::{proc_arg, rt, world};
use std::ffi::c_int;
use std::sync::OnceLock;

/// The domains of the job: each rank's domain, and each domain's ranks in rank order.
struct Domains {
    of: Vec<usize>,
    members: Vec<Vec<usize>>,
    shared: bool,
}

static DOMAINS: OnceLock<Domains> = OnceLock::new();

fn domains() -> R<&'static Domains> {
    if let Some(d) = DOMAINS.get() {
        return Ok(d);
    }
    let w = world()?;
    let n = w.size();
    let me = w.rank();
    let host = |r| w.node_of(r).map_err(rt);
    let my_host = host(me)?;
    let mut shared = true;
    for r in 0..n {
        if host(r)? == my_host && !w.segments_at_owner_addresses(r).map_err(rt)? {
            shared = false;
        }
    }
    let of: Vec<usize> = if shared { (0..n).map(host).collect::<R<_>>()? } else { (0..n).collect() };
    let mut members = vec![Vec::new(); of.iter().max().map_or(0, |m| m + 1)];
    for (r, &d) in of.iter().enumerate() {
        members[d].push(r);
    }
    // Shared memory in use only where a domain holds more than one rank.
    let shared = shared && members.iter().any(|m| m.len() > 1);
    Ok(DOMAINS.get_or_init(|| Domains { of, members, shared }))
}

fn domain(d: c_int) -> R {
    if d != 0 {
        return Err(format!("argument domain = {d} is not ARMCI_DOMAIN_SMP"));
    }
    Ok(())
}

/// The ranks of domain `id`, after checking it.
fn members(id: c_int) -> R<&'static [usize]> {
    let ds = domains()?;
    match usize::try_from(id) {
        Ok(i) if i < ds.members.len() => Ok(&ds.members[i]),
        _ => Err(format!("argument id = {id} is not a domain (0 to {})", ds.members.len() - 1)),
    }
}

#[no_mangle]
pub extern "C" fn armci_domain_nprocs(d: c_int, id: c_int) -> c_int {
    entry("armci_domain_nprocs", || {
        domain(d)?;
        Ok(members(id)?.len() as c_int)
    })
}

#[no_mangle]
pub extern "C" fn armci_domain_id(d: c_int, glob_proc_id: c_int) -> c_int {
    entry("armci_domain_id", || {
        domain(d)?;
        let p = proc_arg(world()?, glob_proc_id, "glob_proc_id")?;
        Ok(domains()?.of[p] as c_int)
    })
}

/// The job rank of the `loc_proc_id`-th rank of domain `id`.
#[no_mangle]
pub extern "C" fn armci_domain_glob_proc_id(d: c_int, id: c_int, loc_proc_id: c_int) -> c_int {
    entry("armci_domain_glob_proc_id", || {
        domain(d)?;
        let m = members(id)?;
        match usize::try_from(loc_proc_id) {
            Ok(i) if i < m.len() => Ok(m[i] as c_int),
            _ => Err(format!("argument loc_proc_id = {loc_proc_id} is not a rank of domain {id} (0 to {})", m.len() - 1)),
        }
    })
}

#[no_mangle]
pub extern "C" fn armci_domain_my_id(d: c_int) -> c_int {
    entry("armci_domain_my_id", || {
        domain(d)?;
        Ok(domains()?.of[world()?.rank()] as c_int)
    })
}

#[no_mangle]
pub extern "C" fn armci_domain_count(d: c_int) -> c_int {
    entry("armci_domain_count", || {
        domain(d)?;
        Ok(domains()?.members.len() as c_int)
    })
}

/// 1 when `proc` shares this rank's domain: its ARMCI_Malloc addresses are valid here.
#[no_mangle]
pub extern "C" fn armci_domain_same_id(d: c_int, proc: c_int) -> c_int {
    entry("armci_domain_same_id", || {
        domain(d)?;
        same_node(proc)
    })
}

fn same_node(proc: c_int) -> R<c_int> {
    let w = world()?;
    let p = proc_arg(w, proc, "proc")?;
    let ds = domains()?;
    Ok((ds.of[p] == ds.of[w.rank()]) as c_int)
}

#[no_mangle]
pub extern "C" fn ARMCI_Same_node(proc: c_int) -> c_int {
    entry("ARMCI_Same_node", || same_node(proc))
}

/// 1 when some domain holds several ranks, which share memory.
#[no_mangle]
pub extern "C" fn ARMCI_Uses_shm() -> c_int {
    entry("ARMCI_Uses_shm", || Ok(domains()?.shared as c_int))
}

/// message.h's scopes (enum armci_scope_e).
pub(crate) const SCOPE_ALL: c_int = 0;
pub(crate) const SCOPE_NODE: c_int = 1;
pub(crate) const SCOPE_MASTERS: c_int = 2;

/// The ranks a `_scope` call of message.h runs over, in rank order: SCOPE_ALL (0) the job,
/// SCOPE_NODE (1) this rank's domain, SCOPE_MASTERS (2) the first rank of every domain (only
/// they may call). None when that is the whole job.
pub(crate) fn scope_ranks(scope: c_int) -> R<Option<Vec<usize>>> {
    let ds = domains()?;
    let w = world()?;
    let ranks = match scope {
        SCOPE_ALL => return Ok(None),
        SCOPE_NODE => ds.members[ds.of[w.rank()]].clone(),
        SCOPE_MASTERS => ds.members.iter().map(|m| m[0]).collect(),
        _ => return Err(format!("argument scope = {scope} is not SCOPE_ALL (0), SCOPE_NODE (1) or SCOPE_MASTERS (2)")),
    };
    if !ranks.contains(&w.rank()) {
        return Err(format!("rank {} is not the first of its domain, so not in SCOPE_MASTERS", w.rank()));
    }
    Ok(if ranks.len() == w.size() { None } else { Some(ranks) })
}
