//! I/O-vector transfers: lists of equally sized pieces at arbitrary addresses.

use crate::contiguous::{get_bytes, put_bytes};
use crate::errors::{entry, R};
use crate::state::{local_arg, nonneg, proc_arg, remote_arg, world};
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
            remote_arg(proc, remote, bytes, &format!("iov[{k}].{rname}_ptr_array[{i}]"))?;
            local_arg(local as *const c_void, bytes, &format!("iov[{k}].{lname}_ptr_array[{i}]"))?;
            out.push((s, t, bytes));
        }
    }
    Ok(out)
}

unsafe fn putv(iov: *mut ArmciGiov, iov_len: c_int, proc: c_int) -> R {
    let w = world()?;
    let p = proc_arg(w, proc, "proc")?;
    for (s, d, n) in pieces(iov, iov_len, p, true)? {
        put_bytes(w, s as *const u8, d, n, p, "dst_ptr_array")?;
    }
    Ok(())
}

unsafe fn getv(iov: *mut ArmciGiov, iov_len: c_int, proc: c_int) -> R {
    let w = world()?;
    let p = proc_arg(w, proc, "proc")?;
    for (s, d, n) in pieces(iov, iov_len, p, false)? {
        get_bytes(w, s, d as *mut u8, n, p, "src_ptr_array")?;
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_PutV(iov: *mut ArmciGiov, iov_len: c_int, proc: c_int) -> c_int {
    entry("ARMCI_PutV", || putv(iov, iov_len, proc));
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_GetV(iov: *mut ArmciGiov, iov_len: c_int, proc: c_int) -> c_int {
    entry("ARMCI_GetV", || getv(iov, iov_len, proc));
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_NbPutV(iov: *mut ArmciGiov, iov_len: c_int, proc: c_int, hdl: *mut ArmciHdl) -> c_int {
    entry("ARMCI_NbPutV", || putv(iov, iov_len, proc));
    mark(hdl, proc);
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_NbGetV(iov: *mut ArmciGiov, iov_len: c_int, proc: c_int, hdl: *mut ArmciHdl) -> c_int {
    entry("ARMCI_NbGetV", || getv(iov, iov_len, proc));
    mark(hdl, proc);
    0
}
