//! Strided transfers with any number of stride levels: ARMCI's arrays read into activerma's
//! `StridedPattern`, moved by `World::put_strided` / `get_strided` (one check of the whole
//! pattern and a CPU copy per piece to a segment on this host). ARMCI_NbGetS / NbPutS start
//! `World::get_strided_nb_by` / `put_strided_nb_by` by the run's protocol and record them in
//! in_flight.rs; ARMCI_NbAccS completes before it returns, as ARMCI allows.

use crate::errors::{entry, R};
use crate::in_flight;
use crate::state::{local_arg, nonneg, proc_arg, remote_arg, rt, world};
use crate::sync::{mark, ArmciHdl};
use activerma::{RemotePtr, StridedPattern, World};
use std::ffi::{c_int, c_void};

/// Reads ARMCI's arrays (count[0..=levels], the strides [0..levels] of each side) into
/// activerma's pattern: `remote_stride` is the side at `proc`, `local_stride` this rank's.
pub(crate) unsafe fn pattern_from_c(
    remote_stride: *const c_int,
    local_stride: *const c_int,
    count: *const c_int,
    levels: c_int,
) -> R<StridedPattern> {
    let levels = nonneg(levels.into(), "stride_levels")?;
    if count.is_null() {
        return Err("argument count is NULL".into());
    }
    if levels > 0 && (remote_stride.is_null() || local_stride.is_null()) {
        return Err(format!("a stride array is NULL but stride_levels = {levels}"));
    }
    let arr = |p: *const c_int, n: usize, name: &str| -> R<Vec<usize>> {
        (0..n).map(|i| nonneg((*p.add(i)).into(), &format!("{name}[{i}]"))).collect()
    };
    let all = arr(count, levels + 1, "count")?;
    StridedPattern::new(all[0], all[1..].to_vec(), arr(remote_stride, levels, "remote stride")?, arr(local_stride, levels, "local stride")?)
        .map_err(rt)
}

/// The pattern's extent on one side as an ARMCI error.
pub(crate) fn extent(e: activerma::Result<usize>) -> R<usize> {
    e.map_err(rt)
}

/// A strided call's arguments, checked.
struct Strided {
    w: &'static World,
    proc: usize,
    /// Where the patch starts at `proc`.
    at: RemotePtr,
    pattern: StridedPattern,
    /// Bytes of the local side.
    bytes: usize,
}

/// Checks a strided call's arguments (`remote_stride` is the side at `proc`); None when the
/// pattern moves nothing.
#[allow(clippy::too_many_arguments)] // ARMCI's arguments, and the names errors give them
unsafe fn strided_args(
    local: *mut c_void,
    local_stride: *mut c_int,
    remote: *mut c_void,
    remote_stride: *mut c_int,
    count: *mut c_int,
    levels: c_int,
    proc: c_int,
    names: (&str, &str),
) -> R<Option<Strided>> {
    let w = world()?;
    let p = proc_arg(w, proc, "proc")?;
    let s = pattern_from_c(remote_stride, local_stride, count, levels)?;
    let at = remote_arg(p, remote as usize, extent(s.remote_extent())?, names.1)?;
    let bytes = extent(s.local_extent())?;
    local_arg(local, bytes, names.0)?;
    Ok((bytes > 0).then_some(Strided { w, proc: p, at, pattern: s, bytes }))
}

/// A strided put of `src` to rank `proc`'s patch: blocking, or (with `hdl`, NULL for an
/// implicit handle) started by the run's protocol and recorded in in_flight.rs; `src` stays the
/// transfer's until the handle completes (ARMCI lets a program reuse it only after a wait).
#[allow(clippy::too_many_arguments)] // ARMCI's arguments, and the handle
unsafe fn puts(
    src: *mut c_void,
    ss: *mut c_int,
    dst: *mut c_void,
    ds: *mut c_int,
    count: *mut c_int,
    levels: c_int,
    proc: c_int,
    hdl: Option<*mut ArmciHdl>,
) -> R {
    let Some(Strided { w, proc: p, at, pattern: s, bytes }) = strided_args(src, ss, dst, ds, count, levels, proc, ("src_ptr", "dst_ptr"))?
    else {
        return Ok(());
    };
    let src = std::slice::from_raw_parts(src as *const u8, bytes);
    match hdl {
        None => w.put_strided(at, &s, src).map_err(rt),
        Some(h) => {
            let started = w.put_strided_nb_by(crate::contiguous::transfer(), at, &s, src).map_err(rt)?;
            in_flight::record(h as usize, p, started)
        }
    }
}

/// A strided get of rank `proc`'s patch into `dst`: blocking, or (with `hdl`) started and
/// recorded as `puts`; `dst` stays the transfer's until the handle completes.
#[allow(clippy::too_many_arguments)] // ARMCI's arguments, and the handle
unsafe fn gets(
    src: *mut c_void,
    ss: *mut c_int,
    dst: *mut c_void,
    ds: *mut c_int,
    count: *mut c_int,
    levels: c_int,
    proc: c_int,
    hdl: Option<*mut ArmciHdl>,
) -> R {
    let Some(Strided { w, proc: p, at, pattern: s, bytes }) = strided_args(dst, ds, src, ss, count, levels, proc, ("dst_ptr", "src_ptr"))?
    else {
        return Ok(());
    };
    let dst = std::slice::from_raw_parts_mut(dst as *mut u8, bytes);
    match hdl {
        None => w.get_strided(at, &s, dst).map_err(rt),
        Some(h) => {
            let started = w.get_strided_nb_by(crate::contiguous::transfer(), at, &s, dst).map_err(rt)?;
            in_flight::record(h as usize, p, started)
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_PutS(
    src: *mut c_void,
    ss: *mut c_int,
    dst: *mut c_void,
    ds: *mut c_int,
    count: *mut c_int,
    levels: c_int,
    proc: c_int,
) -> c_int {
    entry("ARMCI_PutS", || puts(src, ss, dst, ds, count, levels, proc, None));
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_GetS(
    src: *mut c_void,
    ss: *mut c_int,
    dst: *mut c_void,
    ds: *mut c_int,
    count: *mut c_int,
    levels: c_int,
    proc: c_int,
) -> c_int {
    entry("ARMCI_GetS", || gets(src, ss, dst, ds, count, levels, proc, None));
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_NbPutS(
    src: *mut c_void,
    ss: *mut c_int,
    dst: *mut c_void,
    ds: *mut c_int,
    count: *mut c_int,
    levels: c_int,
    proc: c_int,
    hdl: *mut ArmciHdl,
) -> c_int {
    entry("ARMCI_NbPutS", || puts(src, ss, dst, ds, count, levels, proc, Some(hdl)));
    mark(hdl, proc);
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_NbGetS(
    src: *mut c_void,
    ss: *mut c_int,
    dst: *mut c_void,
    ds: *mut c_int,
    count: *mut c_int,
    levels: c_int,
    proc: c_int,
    hdl: *mut ArmciHdl,
) -> c_int {
    entry("ARMCI_NbGetS", || gets(src, ss, dst, ds, count, levels, proc, Some(hdl)));
    mark(hdl, proc);
    0
}

/// The strided data, then `*flag = value` on proc (`put_flag`).
#[no_mangle]
#[allow(clippy::too_many_arguments)] // ARMCI's signature
pub unsafe extern "C" fn ARMCI_PutS_flag(
    src: *mut c_void,
    ss: *mut c_int,
    dst: *mut c_void,
    ds: *mut c_int,
    count: *mut c_int,
    levels: c_int,
    flag: *mut c_int,
    value: c_int,
    proc: c_int,
) -> c_int {
    entry("ARMCI_PutS_flag", || {
        puts(src, ss, dst, ds, count, levels, proc, None)?;
        crate::contiguous::put_flag(flag, value, proc)
    });
    0
}

/// Local packing: the strided block at `ptr` (count[0] bytes per piece, stride_arr[k] bytes
/// between pieces of dimension k+1) to or from the contiguous buffer `buf`.
unsafe fn pack(ptr: *mut c_void, levels: c_int, stride: *mut c_int, count: *mut c_int, buf: *mut u8, into_buf: bool) -> R {
    // The strided side is "src" of the pattern, the contiguous buffer its packed image.
    let s = pattern_from_c(stride, stride, count, levels)?;
    local_arg(ptr, extent(s.local_extent())?, "ptr")?;
    let mut at = 0usize;
    let total = s.piece * s.pieces();
    local_arg(buf as *const c_void, total, "buf")?;
    s.for_each(|o, _| -> R {
        let strided = (ptr as *mut u8).add(o);
        if into_buf {
            std::ptr::copy(strided, buf.add(at), s.piece);
        } else {
            std::ptr::copy(buf.add(at), strided, s.piece);
        }
        at += s.piece;
        Ok(())
    })
}

/// Copies the contiguous `buf` into the local strided block at `ptr`.
#[no_mangle]
pub unsafe extern "C" fn armci_write_strided(ptr: *mut c_void, levels: c_int, stride: *mut c_int, count: *mut c_int, buf: *mut u8) {
    entry("armci_write_strided", || pack(ptr, levels, stride, count, buf, false))
}

/// Copies the local strided block at `ptr` into the contiguous `buf`.
#[no_mangle]
pub unsafe extern "C" fn armci_read_strided(ptr: *mut c_void, levels: c_int, stride: *mut c_int, count: *mut c_int, buf: *mut u8) {
    entry("armci_read_strided", || pack(ptr, levels, stride, count, buf, true))
}
