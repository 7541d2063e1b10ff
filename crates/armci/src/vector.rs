//! I/O-vector transfers: lists of equally sized pieces at arbitrary addresses, checked here
//! against ARMCI's allocations, then moved as one list by activerma's `put_vector` /
//! `get_vector` (host-assisted scatter/gather by default: ACTIVERMA_NONCONTIG). NbPutV /
//! NbGetV start `put_vector_nb` / `get_vector_nb` and record them in `in_flight` as the
//! strided ones do: moved while the program computes by the target's data server (large
//! lists on this host) or by MPI (a get from another host).

use crate::errors::{entry, R};
use crate::in_flight;
use crate::state::{inside_allocation, local_arg, nonneg, outside_allocations, proc_arg, rt, world};
use crate::sync::{mark, ArmciHdl};
use std::ffi::{c_int, c_void};

/// armci_giov_t, as the header lays it out.
#[repr(C)]
pub struct ArmciGiov {
    pub src_ptr_array: *mut *mut c_void,
    pub dst_ptr_array: *mut *mut c_void,
    pub bytes: c_int,
    pub ptr_array_len: c_int,
}

/// Every piece of every descriptor as (src, dst, bytes), after checking the arrays; `remote_is_dst`
/// says which side is on `proc` (checked against its allocations) and which is local. All
/// pieces are checked before any moves, so bad input writes nothing.
pub(crate) unsafe fn pieces(iov: *const ArmciGiov, iov_len: c_int, proc: usize, remote_is_dst: bool) -> R<Vec<(usize, usize, usize)>> {
    let n = nonneg(iov_len.into(), "iov_len")?;
    if n > 0 && iov.is_null() {
        return Err(format!("argument iov is NULL but iov_len = {n}"));
    }
    // What is in flight to proc completes first (remote_arg's rule, once for the whole list).
    crate::in_flight::before_access(proc)?;
    let mut out = Vec::new();
    for k in 0..n {
        let d = &*iov.add(k);
        let bytes = nonneg(d.bytes.into(), &format!("iov[{k}].bytes"))?;
        let len = nonneg(d.ptr_array_len.into(), &format!("iov[{k}].ptr_array_len"))?;
        if len > 0 && (d.src_ptr_array.is_null() || d.dst_ptr_array.is_null()) {
            return Err(format!("iov[{k}] has a NULL pointer array but ptr_array_len = {len}"));
        }
        for i in 0..len {
            let (s, t) = (*d.src_ptr_array.add(i) as usize, *d.dst_ptr_array.add(i) as usize);
            let (remote, local, rname, lname) = if remote_is_dst { (t, s, "dst", "src") } else { (s, t, "src", "dst") };
            // The checks of remote_arg / local_arg, with the argument's name (a formatted
            // string) built only for the message: a list has thousands of pieces.
            let arg = |side: &str| format!("iov[{k}].{side}_ptr_array[{i}]");
            if bytes > 0 && !inside_allocation(proc, remote, bytes) {
                return Err(outside_allocations(proc, remote, bytes, &arg(rname)));
            }
            if bytes > 0 && local == 0 {
                local_arg(std::ptr::null(), bytes, &arg(lname))?;
            }
            out.push((s, t, bytes));
        }
    }
    Ok(out)
}

/// A vector put to `proc`: blocking, or (with `hdl`) started and recorded as `in_flight`
/// keeps it; the local pieces stay the transfer's until the handle completes.
unsafe fn putv(iov: *mut ArmciGiov, iov_len: c_int, proc: c_int, hdl: Option<*mut ArmciHdl>) -> R {
    let w = world()?;
    let p = proc_arg(w, proc, "proc")?;
    let list: Vec<(usize, &[u8])> =
        pieces(iov, iov_len, p, true)?.into_iter().map(|(s, d, n)| (d, std::slice::from_raw_parts(s as *const u8, n))).collect();
    match hdl {
        None => w.put_vector(p, &list).map_err(rt),
        Some(h) => in_flight::record(h as usize, p, w.put_vector_nb(p, list).map_err(rt)?),
    }
}

/// A vector get from `proc`, as `putv`.
unsafe fn getv(iov: *mut ArmciGiov, iov_len: c_int, proc: c_int, hdl: Option<*mut ArmciHdl>) -> R {
    let w = world()?;
    let p = proc_arg(w, proc, "proc")?;
    let triples = pieces(iov, iov_len, p, false)?;
    // Two local pieces over the same bytes cannot be lent out at once: they go one by one, in
    // order, as ARMCI would write them.
    let mut starts: Vec<(usize, usize)> = triples.iter().map(|&(_, d, n)| (d, n)).collect();
    starts.sort_unstable();
    if starts.windows(2).any(|x| x[0].0 + x[0].1 > x[1].0) {
        for (s, d, n) in triples {
            let mut one = [(s, std::slice::from_raw_parts_mut(d as *mut u8, n))];
            w.get_vector(p, &mut one).map_err(rt)?;
        }
        return Ok(());
    }
    let mut list: Vec<(usize, &mut [u8])> =
        triples.into_iter().map(|(s, d, n)| (s, std::slice::from_raw_parts_mut(d as *mut u8, n))).collect();
    match hdl {
        None => w.get_vector(p, &mut list).map_err(rt),
        Some(h) => in_flight::record(h as usize, p, w.get_vector_nb(p, list).map_err(rt)?),
    }
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_PutV(iov: *mut ArmciGiov, iov_len: c_int, proc: c_int) -> c_int {
    entry("ARMCI_PutV", || putv(iov, iov_len, proc, None));
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_GetV(iov: *mut ArmciGiov, iov_len: c_int, proc: c_int) -> c_int {
    entry("ARMCI_GetV", || getv(iov, iov_len, proc, None));
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_NbPutV(iov: *mut ArmciGiov, iov_len: c_int, proc: c_int, hdl: *mut ArmciHdl) -> c_int {
    entry("ARMCI_NbPutV", || putv(iov, iov_len, proc, Some(hdl)));
    mark(hdl, proc);
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_NbGetV(iov: *mut ArmciGiov, iov_len: c_int, proc: c_int, hdl: *mut ArmciHdl) -> c_int {
    entry("ARMCI_NbGetV", || getv(iov, iov_len, proc, Some(hdl)));
    mark(hdl, proc);
    0
}
