//! The MPI build (feature `mpi`, installed by `scripts/install.sh --mpi`): ARMCI beside the
//! program's own MPI. The program may call MPI_Init itself (at any thread level: below
//! MPI_THREAD_SERIALIZED activerma calls MPI from the calling thread only), then ARMCI_Init or
//! ARMCI_Init_mpi_comm; every ARMCI_Group carries a communicator over its members, which Global
//! Arrays uses for its own collectives (`group.comm`, `armci_group_comm`).
//!
//! ```text
//! ARMCI_Init_mpi_comm(c):  the job is c's ranks (any communicator, a part of MPI_COMM_WORLD
//!                          too): activerma::init_mpi_comm(c) runs the mpi conduit over a
//!                          duplicate of c; world_comm = dup(c)
//! ARMCI_Init:              world_comm = dup(MPI_COMM_WORLD) when the job runs on the mpi
//!                          conduit; MPI_COMM_NULL when it runs under `activerma run` (smp)
//! Group_create(members):   the job in rank order -> world_comm (never freed by Group_free);
//!                          otherwise MPI_Comm_split(parent's comm, member ? 0 : UNDEFINED,
//!                          group rank), collective over the parent like the call itself
//!                          (non-members get MPI_COMM_NULL); freed by that group's Group_free
//! Group_get_default:       a copy holding the default group's communicator (no MPI call)
//! noncoll_pgroup_comm:     the same communicator as comm
//! ```

use crate::errors::{entry, R};
use crate::groups::ArmciGroup;
use mpi_sys::*;
use std::ffi::c_int;
use std::sync::{Mutex, OnceLock};

/// A communicator handle that may sit in a static (MPI handles are plain values).
struct Comm(MPI_Comm);
// SAFETY: an MPI handle is a value (an int or a pointer MPI owns); ARMCI calls that use it are
// the program's, made under its MPI thread level.
unsafe impl Send for Comm {}
unsafe impl Sync for Comm {}

static WORLD_COMM: OnceLock<Comm> = OnceLock::new();

fn null() -> MPI_Comm {
    // SAFETY: reading a constant mpi-sys exports.
    unsafe { RSMPI_COMM_NULL }
}

fn check(call: &str, code: c_int) -> R {
    if code == MPI_SUCCESS as c_int {
        Ok(())
    } else {
        Err(format!("{call} failed with MPI error {code}"))
    }
}

/// Sets ARMCI's world communicator once the job is up: a duplicate of `given` (see
/// ARMCI_Init_mpi_comm) or of MPI_COMM_WORLD when that communicator holds the job, which is
/// so on the mpi conduit and for a one-rank job of the program's MPI (run on the smp
/// conduit); none otherwise (MPI not initialized, or ranks under `activerma run` that each
/// started an MPI of their own).
pub(crate) fn setup(w: &activerma::World, given: Option<MPI_Comm>) -> R {
    if WORLD_COMM.get().is_some() {
        return Ok(());
    }
    if activerma::mpi_comm_size(given).map_err(crate::state::rt)? != Some(w.size()) {
        let _ = WORLD_COMM.set(Comm(null()));
        return Ok(());
    }
    let mut dup: MPI_Comm = null();
    // SAFETY: MPI is initialized (the size query said so); every rank of the job calls this.
    check("MPI_Comm_dup", unsafe { MPI_Comm_dup(given.unwrap_or(RSMPI_COMM_WORLD), &mut dup) })?;
    let _ = WORLD_COMM.set(Comm(dup));
    Ok(())
}

/// ARMCI's world communicator (MPI_COMM_NULL on the smp conduit).
pub(crate) fn world_comm() -> MPI_Comm {
    WORLD_COMM.get().map_or_else(null, |c| c.0)
}

/// Communicators made for groups (freed by the group's ARMCI_Group_free).
static MADE: Mutex<Vec<Comm>> = Mutex::new(Vec::new());

/// The communicator of a new group over `members` (job ranks in group order), split off its
/// parent's communicator: collective over the parent, as ARMCI_Group_create is. The job in
/// rank order gets ARMCI's world communicator; ranks outside the group get MPI_COMM_NULL.
pub(crate) fn group_comm(parent: MPI_Comm, members: &[c_int], me: c_int) -> R<MPI_Comm> {
    let world = world_comm();
    if parent == null() {
        return Ok(null()); // the job runs on the smp conduit: no communicators
    }
    let whole = members.iter().enumerate().all(|(g, &a)| g as c_int == a) && members.len() == crate::state::world()?.size();
    if whole {
        return Ok(world);
    }
    // Non-members pass a negative color (MPI_UNDEFINED): they get no communicator.
    let (color, key) = members.iter().position(|&m| m == me).map_or((-1, 0), |g| (0, g as c_int));
    split_comm(parent, color, key)
}

/// MPI_Comm_split of a group's communicator (collective over its ranks; a negative color is
/// MPI_UNDEFINED: no communicator), freed by the new group's Group_free. MPI_COMM_NULL where
/// the job has no communicators (smp conduit).
pub(crate) fn split_comm(parent: MPI_Comm, color: c_int, key: c_int) -> R<MPI_Comm> {
    if parent == null() {
        return Ok(null());
    }
    // SAFETY: reading a constant mpi-sys exports.
    let color = if color < 0 { unsafe { RSMPI_UNDEFINED } } else { color };
    let mut comm: MPI_Comm = null();
    // SAFETY: the parent group's communicator; every member of the parent calls this.
    check("MPI_Comm_split", unsafe { MPI_Comm_split(parent, color, key, &mut comm) })?;
    if comm != null() {
        crate::state::lock(&MADE).push(Comm(comm));
    }
    Ok(comm)
}

/// armci_msg_init in the MPI build: MPI_Init_thread(MPI_THREAD_MULTIPLE) unless MPI runs.
pub(crate) unsafe fn start_mpi(argc: *mut c_int, argv: *mut *mut *mut std::ffi::c_char) -> R {
    let mut up = 0;
    check("MPI_Initialized", MPI_Initialized(&mut up))?;
    if up != 0 {
        return Ok(());
    }
    let mut provided = 0;
    check("MPI_Init_thread", MPI_Init_thread(argc, argv, RSMPI_THREAD_MULTIPLE, &mut provided))
}

/// armci_msg_finalize in the MPI build: MPI_Finalize, whoever started MPI (GA's ARMCI does
/// the same), unless it is not running.
pub(crate) fn finish_mpi() -> R {
    let (mut up, mut down) = (0, 0);
    // SAFETY: both queries may be called at any time.
    unsafe {
        check("MPI_Initialized", MPI_Initialized(&mut up))?;
        check("MPI_Finalized", MPI_Finalized(&mut down))?;
    }
    if up == 0 || down != 0 {
        return Ok(());
    }
    // SAFETY: MPI runs and ARMCI_Finalize came first (its last MPI calls are done).
    check("MPI_Finalize", unsafe { MPI_Finalize() })
}

/// Frees a group's communicator if a group creation made it (the world's lives until the
/// end), and clears the handle.
pub(crate) fn free_group_comm(comm: &mut MPI_Comm) {
    let mut made = crate::state::lock(&MADE);
    if let Some(i) = made.iter().position(|c| c.0 == *comm) {
        let mut c = made.swap_remove(i);
        // SAFETY: a communicator group_comm made; no group uses it any more.
        unsafe { MPI_Comm_free(&mut c.0) };
    }
    *comm = null();
}

/// Initializes ARMCI over the ranks of `comm` (collective over them): ARMCI's ranks are
/// `comm`'s, and the ranks outside it take no part.
#[no_mangle]
pub extern "C" fn ARMCI_Init_mpi_comm(comm: MPI_Comm) -> c_int {
    entry("ARMCI_Init_mpi_comm", || crate::state::init_with(Some(comm)));
    0
}

/// As ARMCI_Init_mpi_comm; the thread level is the one MPI was initialized with.
#[no_mangle]
pub extern "C" fn ARMCI_Init_thread_comm(_armci_requested: c_int, comm: MPI_Comm) -> c_int {
    entry("ARMCI_Init_thread_comm", || crate::state::init_with(Some(comm)));
    0
}

/// The communicator over the group's members (what ARMCI-MPI's `armci_group_comm` returns).
#[no_mangle]
pub unsafe extern "C" fn armci_group_comm(group: *mut ArmciGroup) -> MPI_Comm {
    entry("armci_group_comm", || Ok(group.as_ref().ok_or("argument group is NULL")?.comm))
}
