//! Process groups. This first step supports groups of every rank of the job (the world group,
//! or the world in another order): ranks translate through grp_to_abs / abs_to_grp and
//! Malloc_group is the world's collective allocation. A proper subset needs collectives over
//! part of the job, which activerma does not offer yet: ARMCI_Group_create(_child) of one ends
//! the job with a "not supported yet" message rather than misbehave.

use crate::errors::{entry, R};
use crate::memory::{free_all, malloc_all};
use crate::state::{lock, world};
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

/// ARMCI_Group, as the header lays it out.
#[repr(C)]
pub struct ArmciGroup {
    pub comm_slot: [*mut c_void; 2],
    pub grp_to_abs: *mut c_int,
    pub abs_to_grp: *mut c_int,
    pub rank: c_int,
    pub size: c_int,
}

/// The default group as group rank -> job rank (None: the world in rank order).
static DEFAULT: Mutex<Option<Vec<c_int>>> = Mutex::new(None);

/// Fills `out` with a group over `order` (group rank -> job rank, a permutation of the job).
/// The arrays are malloc'ed copies that ARMCI_Group_free releases.
unsafe fn fill(out: *mut ArmciGroup, order: &[c_int]) -> R {
    let out = out.as_mut().ok_or("the output group argument is NULL")?;
    let w = world()?;
    let n = order.len();
    let g2a = libc::malloc(n * 4) as *mut c_int;
    let a2g = libc::malloc(n * 4) as *mut c_int;
    if g2a.is_null() || a2g.is_null() {
        return Err("out of memory for the group's rank tables".into());
    }
    for (g, &a) in order.iter().enumerate() {
        *g2a.add(g) = a;
        *a2g.add(a as usize) = g as c_int;
    }
    *out =
        ArmciGroup { comm_slot: [std::ptr::null_mut(); 2], grp_to_abs: g2a, abs_to_grp: a2g, rank: *a2g.add(w.rank()), size: n as c_int };
    Ok(())
}

/// Checks that `group` is a group this build supports: a permutation of the whole job.
pub(crate) unsafe fn check_group(group: *const ArmciGroup) -> R<&'static ArmciGroup> {
    let w = world()?;
    let g = group.as_ref().ok_or("argument group is NULL")?;
    if g.size as usize != w.size() || g.grp_to_abs.is_null() {
        return Err(format!(
            "argument group has {} of the job's {} ranks: groups that are a subset of the job are not supported yet",
            g.size,
            w.size()
        ));
    }
    Ok(&*group)
}

/// The job ranks the group's members are, from a list of `parent` group ranks.
unsafe fn members(grp_size: c_int, pid_list: *const c_int, parent: &[c_int]) -> R<Vec<c_int>> {
    let n = usize::try_from(grp_size).map_err(|_| format!("argument grp_size = {grp_size} is negative"))?;
    if n > 0 && pid_list.is_null() {
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
    if n != parent.len() {
        return Err(format!(
            "a group of {n} of the parent's {} ranks: groups that are a subset of the job are not supported yet (only the whole job, in any order)",
            parent.len()
        ));
    }
    Ok(out)
}

fn world_order() -> R<Vec<c_int>> {
    Ok((0..world()?.size() as c_int).collect())
}

/// The default group's order (group rank -> job rank).
pub(crate) fn default_order() -> R<Vec<c_int>> {
    match lock(&DEFAULT).clone() {
        Some(o) => Ok(o),
        None => world_order(),
    }
}

unsafe fn order_of(g: &ArmciGroup) -> Vec<c_int> {
    (0..g.size as usize).map(|i| *g.grp_to_abs.add(i)).collect()
}

/// Collective over the default group.
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Group_create(grp_size: c_int, pid_list: *mut c_int, group_out: *mut ArmciGroup) {
    entry("ARMCI_Group_create", || {
        let order = members(grp_size, pid_list, &default_order()?)?;
        world()?.barrier().map_err(crate::state::rt)?;
        fill(group_out, &order)
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
        let parent = order_of(check_group(group_parent)?);
        let order = members(grp_size, pid_list, &parent)?;
        world()?.barrier().map_err(crate::state::rt)?;
        fill(group_out, &order)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_Group_free(group: *mut ArmciGroup) {
    if let Some(g) = group.as_mut() {
        libc::free(g.grp_to_abs.cast());
        libc::free(g.abs_to_grp.cast());
        g.grp_to_abs = std::ptr::null_mut();
        g.abs_to_grp = std::ptr::null_mut();
        g.rank = -1;
        g.size = 0;
    }
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_Group_rank(group: *mut ArmciGroup, rank: *mut c_int) -> c_int {
    entry("ARMCI_Group_rank", || {
        let g = group.as_ref().ok_or("argument group is NULL")?;
        *rank.as_mut().ok_or("argument rank is NULL")? = g.rank;
        Ok(())
    });
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_Group_size(group: *mut ArmciGroup, size: *mut c_int) {
    entry("ARMCI_Group_size", || {
        let g = group.as_ref().ok_or("argument group is NULL")?;
        *size.as_mut().ok_or("argument size is NULL")? = g.size;
        Ok(())
    })
}

/// Later ARMCI_Malloc calls index their pointer arrays by this group's ranks.
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Group_set_default(group: *mut ArmciGroup) {
    entry("ARMCI_Group_set_default", || {
        let order = order_of(check_group(group)?);
        *lock(&DEFAULT) = Some(order);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_Group_get_default(group_out: *mut ArmciGroup) {
    entry("ARMCI_Group_get_default", || fill(group_out, &default_order()?))
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_Group_get_world(group_out: *mut ArmciGroup) {
    entry("ARMCI_Group_get_world", || fill(group_out, &world_order()?))
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

/// Collective over `group`: ptr_arr[g] receives group rank g's address of the block.
#[no_mangle]
pub unsafe extern "C" fn ARMCI_Malloc_group(ptr_arr: *mut *mut c_void, bytes: libc::c_long, group: *mut ArmciGroup) -> c_int {
    entry("ARMCI_Malloc_group", || {
        let order = order_of(check_group(group)?);
        malloc_into(ptr_arr, bytes, &order)
    });
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_Free_group(ptr: *mut c_void, group: *mut ArmciGroup) -> c_int {
    entry("ARMCI_Free_group", || {
        check_group(group)?;
        free_all(ptr)
    });
    0
}

/// The collective allocation, its bases stored in group-rank order.
pub(crate) unsafe fn malloc_into(ptr_arr: *mut *mut c_void, bytes: libc::c_long, order: &[c_int]) -> R {
    if ptr_arr.is_null() {
        return Err("argument ptr_arr is NULL (it must have room for one pointer per rank)".into());
    }
    let bases = malloc_all(bytes)?;
    for (g, &a) in order.iter().enumerate() {
        *ptr_arr.add(g) = bases[a as usize] as *mut c_void;
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_Uses_shm_grp(group: *mut ArmciGroup) -> c_int {
    entry("ARMCI_Uses_shm_grp", || check_group(group).map(|_| 1))
}
