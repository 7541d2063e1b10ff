//! Strided transfers with any number of stride levels.

use crate::contiguous::{get_bytes, put_bytes};
use crate::errors::{entry, R};
use crate::state::{local_arg, nonneg, proc_arg, remote_arg, world};
use crate::sync::{mark, ArmciHdl};
use std::ffi::{c_int, c_void};

/// A strided pattern: pieces of `piece` bytes; dimension k (1..=levels) has counts[k-1]
/// pieces, src_stride[k-1] / dst_stride[k-1] bytes apart.
pub(crate) struct Strided {
    pub piece: usize,
    counts: Vec<usize>,
    src_stride: Vec<usize>,
    dst_stride: Vec<usize>,
}

impl Strided {
    /// Reads ARMCI's arrays: count[0..=levels], strides [0..levels].
    pub(crate) unsafe fn from_c(src_stride: *const c_int, dst_stride: *const c_int, count: *const c_int, levels: c_int) -> R<Strided> {
        let levels = nonneg(levels.into(), "stride_levels")?;
        if count.is_null() {
            return Err("argument count is NULL".into());
        }
        if levels > 0 && (src_stride.is_null() || dst_stride.is_null()) {
            return Err(format!("a stride array is NULL but stride_levels = {levels}"));
        }
        let arr = |p: *const c_int, n: usize, name: &str| -> R<Vec<usize>> {
            (0..n).map(|i| nonneg((*p.add(i)).into(), &format!("{name}[{i}]"))).collect()
        };
        let all = arr(count, levels + 1, "count")?;
        Ok(Strided {
            piece: all[0],
            counts: all[1..].to_vec(),
            src_stride: arr(src_stride, levels, "src_stride_ar")?,
            dst_stride: arr(dst_stride, levels, "dst_stride_ar")?,
        })
    }

    fn is_empty(&self) -> bool {
        self.piece == 0 || self.counts.contains(&0)
    }

    /// Bytes from the first byte to one past the last byte the pattern touches, with these
    /// strides: every piece lies inside [base, base + extent), so checking that range once
    /// checks every piece.
    fn extent(&self, strides: &[usize]) -> R<usize> {
        if self.is_empty() {
            return Ok(0);
        }
        let mut e = self.piece;
        for (c, s) in self.counts.iter().zip(strides) {
            e = (c - 1).checked_mul(*s).and_then(|x| x.checked_add(e)).ok_or("the strided pattern spans more than the address space")?;
        }
        Ok(e)
    }
    pub(crate) fn src_extent(&self) -> R<usize> {
        self.extent(&self.src_stride)
    }
    pub(crate) fn dst_extent(&self) -> R<usize> {
        self.extent(&self.dst_stride)
    }

    /// Calls f(src offset, dst offset) for every piece, the first dimension fastest.
    pub(crate) fn for_each(&self, mut f: impl FnMut(usize, usize) -> R) -> R {
        if self.is_empty() {
            return Ok(());
        }
        let mut idx = vec![0usize; self.counts.len()];
        loop {
            let (mut so, mut d) = (0, 0);
            for (k, &i) in idx.iter().enumerate() {
                so += i * self.src_stride[k];
                d += i * self.dst_stride[k];
            }
            f(so, d)?;
            // Odometer step: the lowest dimension that is not at its end advances.
            let mut k = 0;
            loop {
                if k == idx.len() {
                    return Ok(());
                }
                idx[k] += 1;
                if idx[k] < self.counts[k] {
                    break;
                }
                idx[k] = 0;
                k += 1;
            }
        }
    }
}

unsafe fn puts(src: *mut c_void, ss: *mut c_int, dst: *mut c_void, ds: *mut c_int, count: *mut c_int, levels: c_int, proc: c_int) -> R {
    let w = world()?;
    let p = proc_arg(w, proc, "proc")?;
    let s = Strided::from_c(ss, ds, count, levels)?;
    local_arg(src, s.src_extent()?, "src_ptr")?;
    remote_arg(p, dst as usize, s.dst_extent()?, "dst_ptr")?;
    s.for_each(|so, d| put_bytes(w, (src as *const u8).add(so), dst as usize + d, s.piece, p, "dst_ptr"))
}

unsafe fn gets(src: *mut c_void, ss: *mut c_int, dst: *mut c_void, ds: *mut c_int, count: *mut c_int, levels: c_int, proc: c_int) -> R {
    let w = world()?;
    let p = proc_arg(w, proc, "proc")?;
    let s = Strided::from_c(ss, ds, count, levels)?;
    remote_arg(p, src as usize, s.src_extent()?, "src_ptr")?;
    local_arg(dst, s.dst_extent()?, "dst_ptr")?;
    s.for_each(|so, d| get_bytes(w, src as usize + so, (dst as *mut u8).add(d), s.piece, p, "src_ptr"))
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
    entry("ARMCI_PutS", || puts(src, ss, dst, ds, count, levels, proc));
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
    entry("ARMCI_GetS", || gets(src, ss, dst, ds, count, levels, proc));
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
    entry("ARMCI_NbPutS", || puts(src, ss, dst, ds, count, levels, proc));
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
    entry("ARMCI_NbGetS", || gets(src, ss, dst, ds, count, levels, proc));
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
        puts(src, ss, dst, ds, count, levels, proc)?;
        crate::contiguous::put_flag(flag, value, proc)
    });
    0
}

/// Local packing: the strided block at `ptr` (count[0] bytes per piece, stride_arr[k] bytes
/// between pieces of dimension k+1) to or from the contiguous buffer `buf`.
unsafe fn pack(ptr: *mut c_void, levels: c_int, stride: *mut c_int, count: *mut c_int, buf: *mut u8, into_buf: bool) -> R {
    // The strided side is "src" of the pattern, the contiguous buffer its packed image.
    let s = Strided::from_c(stride, stride, count, levels)?;
    local_arg(ptr, s.src_extent()?, "ptr")?;
    let mut at = 0usize;
    let total = if s.is_empty() { 0 } else { s.piece * s.counts.iter().product::<usize>() };
    local_arg(buf as *const c_void, total, "buf")?;
    s.for_each(|o, _| {
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
