//! Topology: the smp conduit runs every rank on one host, so there is one domain holding the
//! whole job, every rank is on the same node, and remote memory is shared memory.

use crate::errors::{entry, R};
use crate::state::{proc_arg, world};
use std::ffi::c_int;

fn domain(d: c_int) -> R {
    if d != 0 {
        return Err(format!("argument domain = {d} is not ARMCI_DOMAIN_SMP"));
    }
    Ok(())
}

fn only_domain(id: c_int) -> R {
    if id != 0 {
        return Err(format!("argument id = {id}: there is one domain, number 0"));
    }
    Ok(())
}

#[no_mangle]
pub extern "C" fn armci_domain_nprocs(d: c_int, id: c_int) -> c_int {
    entry("armci_domain_nprocs", || {
        domain(d)?;
        only_domain(id)?;
        Ok(world()?.size() as c_int)
    })
}

#[no_mangle]
pub extern "C" fn armci_domain_id(d: c_int, glob_proc_id: c_int) -> c_int {
    entry("armci_domain_id", || {
        domain(d)?;
        proc_arg(world()?, glob_proc_id, "glob_proc_id")?;
        Ok(0)
    })
}

#[no_mangle]
pub extern "C" fn armci_domain_glob_proc_id(d: c_int, id: c_int, loc_proc_id: c_int) -> c_int {
    entry("armci_domain_glob_proc_id", || {
        domain(d)?;
        only_domain(id)?;
        proc_arg(world()?, loc_proc_id, "loc_proc_id").map(|p| p as c_int)
    })
}

#[no_mangle]
pub extern "C" fn armci_domain_my_id(d: c_int) -> c_int {
    entry("armci_domain_my_id", || domain(d).map(|_| 0))
}

#[no_mangle]
pub extern "C" fn armci_domain_count(d: c_int) -> c_int {
    entry("armci_domain_count", || domain(d).map(|_| 1))
}

#[no_mangle]
pub extern "C" fn armci_domain_same_id(d: c_int, proc: c_int) -> c_int {
    entry("armci_domain_same_id", || {
        domain(d)?;
        proc_arg(world()?, proc, "proc").map(|_| 1)
    })
}

#[no_mangle]
pub extern "C" fn ARMCI_Same_node(proc: c_int) -> c_int {
    entry("ARMCI_Same_node", || proc_arg(world()?, proc, "proc").map(|_| 1))
}

#[no_mangle]
pub extern "C" fn ARMCI_Uses_shm() -> c_int {
    1
}
