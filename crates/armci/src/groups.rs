//! Process groups: any subset of the job, in any order. A group is its member list (group rank
//! -> job rank, `grp_to_abs`, and back, `abs_to_grp`, -1 for ranks outside it); calls over a
//! group that is the whole job use the job's own collectives, calls over part of it the
//! members-only collectives of point_to_point.rs and the allocations of group_memory.rs. The
//! MPI build also gives every group a communicator over its members (mpi_comm.rs).
//!
//! ```text
//! Group_create(n, list) (collective over the default group): members = default[list[i]]
//! Group_create_child(n, list, out, parent) (collective over parent): members = parent[list[i]]
//!     a rank outside the new group gets it too, with rank -1 (and MPI_COMM_NULL)
//! Malloc_group / Free_group / armci_msg_group_*: collective over the members only
//! ARMCIX_Group_split(parent, color, key) (collective over parent): one group per color,
//!     ordered by (key, parent rank); ARMCIX_Group_dup: the parent's members again
//! ```

use crate::errors::{entry, R};
use crate::state::{lock, world};
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

/// ARMCI_Group, as the header lays it out: the MPI build's communicators first (ARMCI-MPI's
/// field names), or two unused pointers where the smp build has none.
#[repr(C)]
pub struct ArmciGroup {
    #[cfg(feature = "mpi")]
    pub comm: mpi_sys::MPI_Comm,
    #[cfg(feature = "mpi")]
    pub noncoll_pgroup_comm: mpi_sys::MPI_Comm,
    #[cfg(not(feature = "mpi"))]
    pub comm_slot: [*mut c_void; 2],
    pub grp_to_abs: *mut c_int,
    pub abs_to_grp: *mut c_int,
    pub rank: c_int,
    pub size: c_int,
}

/// A group's communicator: an MPI_Comm in the MPI build, nothing in the smp build.
#[cfg(feature = "mpi")]
pub(crate) type GroupComm = mpi_sys::MPI_Comm;
#[cfg(not(feature = "mpi"))]
pub(crate) type GroupComm = NoComm;

/// The smp build's stand-in for a communicator.
#[cfg(not(feature = "mpi"))]
#[derive(Clone, Copy)]
pub(crate) struct NoComm;

/// The default group, when set: its members and its communicator.
struct Default {
    members: Vec<c_int>,
    comm: GroupComm,
}
// SAFETY: an MPI communicator handle is a plain value (see mpi_comm.rs's Comm).
unsafe impl Send for Default {}

static DEFAULT: Mutex<Option<Default>> = Mutex::new(None);

/// Fills `out` with a group over `members` (group rank -> job rank). The arrays are malloc'ed
/// copies that ARMCI_Group_free releases.
unsafe fn fill(out: *mut ArmciGroup, members: &[c_int], comm: GroupComm) -> R {
    let out = out.as_mut().ok_or("the output group argument is NULL")?;
    let w = world()?;
    let g2a = libc::malloc(members.len().max(1) * 4) as *mut c_int;
    let a2g = libc::malloc(w.size() * 4) as *mut c_int;
    if g2a.is_null() || a2g.is_null() {
        return Err("out of memory for the group's rank tables".into());
    }
    for a in 0..w.size() {
        *a2g.add(a) = -1;
    }
    for (g, &a) in members.iter().enumerate() {
        *g2a.add(g) = a;
        *a2g.add(a as usize) = g as c_int;
    }
    *out = ArmciGroup {
        #[cfg(feature = "mpi")]
        comm,
        #[cfg(feature = "mpi")]
        noncoll_pgroup_comm: comm,
        #[cfg(not(feature = "mpi"))]
        comm_slot: {
            let NoComm = comm;
            [std::ptr::null_mut(); 2]
        },
        grp_to_abs: g2a,
        abs_to_grp: a2g,
        rank: *a2g.add(w.rank()),
        size: members.len() as c_int,
    };
    Ok(())
}

/// A group argument that was made by this library (and not freed).
pub(crate) unsafe fn check_group(group: *const ArmciGroup) -> R<&'static ArmciGroup> {
    let w = world()?;
    let g = group.as_ref().ok_or("argument group is NULL")?;
    if g.grp_to_abs.is_null() || g.abs_to_grp.is_null() || g.size < 1 || g.size as usize > w.size() {
        return Err("argument group is not a live group (never created, or freed)".into());
    }
    Ok(&*group)
}

/// A group argument this rank is a member of (for the calls collective over the members).
pub(crate) unsafe fn member_of(group: *const ArmciGroup) -> R<&'static ArmciGroup> {
    let g = check_group(group)?;
    if g.rank < 0 {
        return Err(format!("this rank ({}) is not a member of the group", world()?.rank()));
    }
    Ok(g)
}

/// The job ranks of a group's members, in group order.
pub(crate) unsafe fn members_of(g: &ArmciGroup) -> Vec<c_int> {
    std::slice::from_raw_parts(g.grp_to_abs, g.size as usize).to_vec()
}

/// The job ranks of the new group's members, from a list of `parent` group ranks.
unsafe fn members(grp_size: c_int, pid_list: *const c_int, parent: &[c_int]) -> R<Vec<c_int>> {
    let n = usize::try_from(grp_size).map_err(|_| format!("argument grp_size = {grp_size} is negative"))?;
    if n == 0 || n > parent.len() {
        return Err(format!("argument grp_size = {n} must be between 1 and the parent group's {} ranks", parent.len()));
    }
    if pid_list.is_null() {
        return Err(format!("argument pid_list is NULL but grp_size = {n}"));
    }
    let mut seen = vec![false; parent.len()];
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let p = *pid_list.add(i);
        match usize::try_from(p) {
            Ok(x) if x < parent.len() && !seen[x] => {
                seen[x] = true;
                out.push(parent[x]);
            }
            Ok(x) if x < parent.len() => return Err(format!("pid_list[{i}] = {p} appears twice")),
            _ => return Err(format!("pid_list[{i}] = {p} is not a rank of the parent group (0 to {})", parent.len() - 1)),
        }
    }
    Ok(out)
}

fn world_members() -> R<Vec<c_int>> {
    Ok((0..world()?.size() as c_int).collect())
}

/// The default group's members (group rank -> job rank).
pub(crate) fn default_members() -> R<Vec<c_int>> {
    match &*lock(&DEFAULT) {
        Some(d) => Ok(d.members.clone()),
        None => world_members(),
    }
}

/// Whether `members` is the whole job (in any order): then the job's collectives serve it.
pub(crate) fn is_whole_job(members: &[c_int]) -> R<bool> {
    Ok(members.len() == world()?.size())
}

/// Makes the new group over `members`, collective over `parent` (its members, and in the MPI
/// build its communicator).
unsafe fn create(out: *mut ArmciGroup, members: &[c_int], parent: &[c_int], parent_comm: GroupComm) -> R {
    let me = world()?.rank() as c_int;
    if !parent.contains(&me) {
        return Err(format!("this rank ({me}) is not a member of the parent group, over which the call is collective"));
    }
    #[cfg(feature = "mpi")]
    let comm = crate::mpi_comm::group_comm(parent_comm, members, me)?;
    #[cfg(not(feature = "mpi"))]
    let comm: GroupComm = parent_comm;
    fill(out, members, comm)
}

/// Collective over the default group.
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Group_create(grp_size: c_int, pid_list: *mut c_int, group_out: *mut ArmciGroup) {
    entry("ARMCI_Group_create", || {
        let parent = default_members()?;
        let members = members(grp_size, pid_list, &parent)?;
        create(group_out, &members, &parent, default_comm())
    })
}

/// Collective over `group_parent`; pid_list holds parent group ranks.
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Group_create_child(
    grp_size: c_int,
    pid_list: *mut c_int,
    group_out: *mut ArmciGroup,
    group_parent: *mut ArmciGroup,
) {
    entry("ARMCI_Group_create_child", || {
        let p = check_group(group_parent)?;
        let parent = members_of(p);
        let members = members(grp_size, pid_list, &parent)?;
        create(group_out, &members, &parent, comm_of(p))
    })
}

/// armcix.h: splits `parent` (collective over its members) into one group per `color`; the
/// members of a color are ordered by `key`, then by their rank in the parent, as
/// MPI_Comm_split orders them. A negative color (MPI_UNDEFINED) joins no group: this rank
/// gets an empty one (rank -1, size 0), which only ARMCI_Group_free accepts.
#[no_mangle]
pub unsafe extern "C" fn ARMCIX_Group_split(parent: *mut ArmciGroup, color: c_int, key: c_int, new_group: *mut ArmciGroup) -> c_int {
    entry("ARMCIX_Group_split", || {
        let p = member_of(parent)?;
        let parent_members = members_of(p);
        let mine: Vec<u8> = color.to_le_bytes().into_iter().chain(key.to_le_bytes()).collect();
        let all = crate::point_to_point::group_allgather(&parent_members.iter().map(|&m| m as usize).collect::<Vec<_>>(), &mine)?;
        let of = |b: &[u8], i: usize| c_int::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
        let mut joined: Vec<(c_int, usize)> =
            all.iter().enumerate().filter(|(_, b)| color >= 0 && of(b, 0) == color).map(|(g, b)| (of(b, 1), g)).collect();
        joined.sort_unstable();
        let members: Vec<c_int> = joined.iter().map(|&(_, g)| parent_members[g]).collect();
        #[cfg(feature = "mpi")]
        let comm = crate::mpi_comm::split_comm(comm_of(p), color, key)?;
        #[cfg(not(feature = "mpi"))]
        let comm = NoComm;
        fill(new_group, &members, comm)
    });
    0
}

/// armcix.h: a new group with `parent`'s members in its order (collective over them); in the
/// MPI build with a communicator of its own.
#[no_mangle]
pub unsafe extern "C" fn ARMCIX_Group_dup(parent: *mut ArmciGroup, new_group: *mut ArmciGroup) -> c_int {
    entry("ARMCIX_Group_dup", || {
        let p = member_of(parent)?;
        let members = members_of(p);
        #[cfg(feature = "mpi")]
        let comm = crate::mpi_comm::split_comm(comm_of(p), 0, p.rank)?;
        #[cfg(not(feature = "mpi"))]
        let comm = NoComm;
        fill(new_group, &members, comm)
    });
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_Group_free(group: *mut ArmciGroup) {
    if let Some(g) = group.as_mut() {
        #[cfg(feature = "mpi")]
        {
            crate::mpi_comm::free_group_comm(&mut g.comm);
            g.noncoll_pgroup_comm = g.comm;
        }
        libc::free(g.grp_to_abs.cast());
        libc::free(g.abs_to_grp.cast());
        g.grp_to_abs = std::ptr::null_mut();
        g.abs_to_grp = std::ptr::null_mut();
        g.rank = -1;
        g.size = 0;
    }
}

/// This rank's group rank, -1 if it is not a member.
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Group_rank(group: *mut ArmciGroup, rank: *mut c_int) -> c_int {
    entry("ARMCI_Group_rank", || {
        let g = check_group(group)?;
        *rank.as_mut().ok_or("argument rank is NULL")? = g.rank;
        Ok(())
    });
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_Group_size(group: *mut ArmciGroup, size: *mut c_int) {
    entry("ARMCI_Group_size", || {
        let g = check_group(group)?;
        *size.as_mut().ok_or("argument size is NULL")? = g.size;
        Ok(())
    })
}

/// Later ARMCI_Malloc / ARMCI_Group_create calls are over this group (indexed by its ranks).
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Group_set_default(group: *mut ArmciGroup) {
    entry("ARMCI_Group_set_default", || {
        let g = member_of(group)?;
        let members = members_of(g);
        *lock(&DEFAULT) = Some(Default { members, comm: comm_of(g) });
        Ok(())
    })
}

/// The default group's communicator (the job's unless ARMCI_Group_set_default).
fn default_comm() -> GroupComm {
    lock(&DEFAULT).as_ref().map_or_else(world_comm, |d| d.comm)
}

fn world_comm() -> GroupComm {
    #[cfg(feature = "mpi")]
    return crate::mpi_comm::world_comm();
    #[cfg(not(feature = "mpi"))]
    NoComm
}

fn comm_of(g: &ArmciGroup) -> GroupComm {
    #[cfg(feature = "mpi")]
    return g.comm;
    #[cfg(not(feature = "mpi"))]
    {
        let _ = g;
        NoComm
    }
}

/// A copy of the default group; its communicator stays the default's (Group_free on the copy
/// leaves it alone unless the copy is the group that made it).
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Group_get_default(group_out: *mut ArmciGroup) {
    entry("ARMCI_Group_get_default", || fill(group_out, &default_members()?, default_comm()))
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_Group_get_world(group_out: *mut ArmciGroup) {
    entry("ARMCI_Group_get_world", || fill(group_out, &world_members()?, world_comm()))
}

/// The job rank of `group_rank` in `group`.
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Absolute_id(group: *mut ArmciGroup, group_rank: c_int) -> c_int {
    entry("ARMCI_Absolute_id", || {
        let g = check_group(group)?;
        match usize::try_from(group_rank) {
            Ok(r) if r < g.size as usize => Ok(*g.grp_to_abs.add(r)),
            _ => Err(format!("argument group_rank = {group_rank} is not a rank of the group (0 to {})", g.size - 1)),
        }
    })
}

/// Collective over `group`'s members: ptr_arr[g] receives group rank g's address of the block.
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Malloc_group(ptr_arr: *mut *mut c_void, bytes: libc::c_long, group: *mut ArmciGroup) -> c_int {
    entry("ARMCI_Malloc_group", || {
        let g = member_of(group)?;
        let members = members_of(g);
        malloc_into(ptr_arr, bytes, &members)
    });
    0
}

/// Collective over `group`'s members.
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Free_group(ptr: *mut c_void, group: *mut ArmciGroup) -> c_int {
    entry("ARMCI_Free_group", || {
        let g = member_of(group)?;
        let members = members_of(g);
        free_over(ptr, &members)
    });
    0
}

/// The collective allocation over `members` (the whole job: a segment; part of it: exposed
/// private memory), its bases stored in group-rank order.
pub(crate) unsafe fn malloc_into(ptr_arr: *mut *mut c_void, bytes: libc::c_long, members: &[c_int]) -> R {
    if ptr_arr.is_null() {
        return Err("argument ptr_arr is NULL (it must have room for one pointer per rank)".into());
    }
    let bases = if is_whole_job(members)? { crate::memory::malloc_all(bytes)? } else { crate::group_memory::malloc(members, bytes)? };
    for (g, &a) in members.iter().enumerate() {
        *ptr_arr.add(g) = bases[a as usize] as *mut c_void;
    }
    Ok(())
}

/// ARMCI_Free: collective over the members of the allocation `ptr` belongs to (a rank that
/// got no bytes passes NULL: the default group's then).
pub(crate) fn free_matching(ptr: *mut c_void) -> R {
    match crate::group_memory::members_of_block(ptr)? {
        Some(members) => crate::group_memory::free(&members, ptr),
        None => free_over(ptr, &default_members()?),
    }
}

/// The collective free over `members`.
pub(crate) fn free_over(ptr: *mut c_void, members: &[c_int]) -> R {
    if is_whole_job(members)? {
        crate::memory::free_all(ptr)
    } else {
        crate::group_memory::free(members, ptr)
    }
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_Uses_shm_grp(group: *mut ArmciGroup) -> c_int {
    entry("ARMCI_Uses_shm_grp", || check_group(group).map(|_| 1))
}
