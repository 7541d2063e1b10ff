//! Accumulate: dst += scale * src, element-wise, for ARMCI's six element types.
//!
//! ARMCI promises that accumulates from different origins into the same elements do not lose
//! updates. Every rank of a job adds one of three ways, the same for every target:
//!
//! ```text
//! ACTIVERMA_ARMCI_ACC=active          -> acc_active.rs: an active put, added by the target's handler
//! the conduit adds (MPI across hosts) -> scale here, one MPI_Accumulate(SUM) of every piece
//!                                        (an hindexed target type), atomic per element in MPI
//! otherwise (one host, smp)           -> under p's lock (a fair ticket lock in RANK_WORDS):
//!                                        per piece: plain memory mapped here? combine in place
//!                                                   else get, combine, put
//! ```
//!
//! The lock is one per target, not per element or allocation: simple and enough on one host,
//! where holding it costs a few atomics; across hosts it cost four round trips or more per
//! accumulate (1.7x ARMCI-MPI's 8-byte accumulate over TCP), hence MPI's own accumulate there.
//! A job never mixes the ways: MPI's accumulates are atomic only among themselves.

use crate::contiguous::{get_bytes, put_bytes};
use crate::errors::{entry, R};
use crate::state::{local_arg, nonneg, proc_arg, rank_word, remote_arg, world, ACC_LOCK};
use crate::strided::{extent, pattern_from_c};
use crate::sync::{mark, ArmciHdl};
use crate::ticket;
use crate::vector::{pieces, ArmciGiov};
use activerma::{Element, RemotePtr, Transfer, World};
use std::ffi::{c_int, c_void};

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum AccType {
    Int,
    Long,
    Float,
    Double,
    Complex,
    DoubleComplex,
}

impl AccType {
    pub(crate) fn from_c(datatype: c_int) -> R<AccType> {
        Ok(match datatype {
            0 => AccType::Int,
            1 => AccType::Long,
            2 => AccType::Float,
            3 => AccType::Double,
            4 => AccType::Complex,
            5 => AccType::DoubleComplex,
            _ => return Err(format!("argument datatype = {datatype} is not an ARMCI_ACC_* type (ARMCI_ACC_INT = 0 to ARMCI_ACC_DCP = 5)")),
        })
    }
    pub(crate) fn size(self) -> usize {
        match self {
            AccType::Int | AccType::Float => 4,
            AccType::Long | AccType::Double | AccType::Complex => 8,
            AccType::DoubleComplex => 16,
        }
    }
    /// The element a target adds, once the origin has scaled (complex types as pairs of reals).
    pub(crate) fn element(self) -> Element {
        match self {
            AccType::Int => Element::I32,
            AccType::Long => Element::I64,
            AccType::Float | AccType::Complex => Element::F32,
            AccType::Double | AccType::DoubleComplex => Element::F64,
        }
    }
}

/// The scale factor, read once from the caller's pointer.
#[derive(Clone, Copy)]
pub(crate) enum Scale {
    Int(i32),
    Long(i64),
    Float(f32),
    Double(f64),
    Complex(f32, f32),
    DoubleComplex(f64, f64),
}

pub(crate) unsafe fn read_scale(t: AccType, scale: *const c_void) -> R<Scale> {
    if scale.is_null() {
        return Err("argument scale is NULL".into());
    }
    let f = scale as *const f32;
    let d = scale as *const f64;
    Ok(match t {
        AccType::Int => Scale::Int((scale as *const i32).read_unaligned()),
        AccType::Long => Scale::Long((scale as *const i64).read_unaligned()),
        AccType::Float => Scale::Float(f.read_unaligned()),
        AccType::Double => Scale::Double(d.read_unaligned()),
        AccType::Complex => Scale::Complex(f.read_unaligned(), f.add(1).read_unaligned()),
        AccType::DoubleComplex => Scale::DoubleComplex(d.read_unaligned(), d.add(1).read_unaligned()),
    })
}

/// The element loop dst[i] = f(dst[i], src[i]) over unaligned elements of a plain-data type
/// (every bit pattern is a value): simple enough for the compiler to vectorise.
fn each<T: Copy>(dst: &mut [u8], src: &[u8], f: impl Fn(T, T) -> T) {
    let n = dst.len().min(src.len()) / std::mem::size_of::<T>();
    let (d, s) = (dst.as_mut_ptr() as *mut T, src.as_ptr() as *const T);
    for i in 0..n {
        // SAFETY: i < n elements lie inside both slices; T is i32, i64, f32, f64 or an
        // array of them (any bytes are a value), read and written unaligned.
        unsafe { d.add(i).write_unaligned(f(d.add(i).read_unaligned(), s.add(i).read_unaligned())) };
    }
}

/// dst[i] += scale * src[i] over whole elements (the byte lengths are checked to be multiples).
/// Integers wrap, as C's would without overflow checks.
pub(crate) fn combine(scale: Scale, dst: &mut [u8], src: &[u8]) {
    match scale {
        Scale::Int(a) => each::<i32>(dst, src, |d, s| d.wrapping_add(a.wrapping_mul(s))),
        Scale::Long(a) => each::<i64>(dst, src, |d, s| d.wrapping_add(a.wrapping_mul(s))),
        Scale::Float(a) => each::<f32>(dst, src, |d, s| d + a * s),
        Scale::Double(a) => each::<f64>(dst, src, |d, s| d + a * s),
        Scale::Complex(ar, ai) => each::<[f32; 2]>(dst, src, |[dr, di], [sr, si]| [dr + ar * sr - ai * si, di + ar * si + ai * sr]),
        Scale::DoubleComplex(ar, ai) => each::<[f64; 2]>(dst, src, |[dr, di], [sr, si]| [dr + ar * sr - ai * si, di + ar * si + ai * sr]),
    }
}

/// dst[i] = scale * src[i]: what an origin sends when the target adds (MPI_Accumulate, the
/// Active Access handler). Complex products are formed here, so the target adds them as
/// pairs of reals: (dr + (ar*sr - ai*si)) rather than the lock path's ((dr + ar*sr) - ai*si),
/// the same up to the last bit's rounding.
pub(crate) fn scale_into(scale: Scale, dst: &mut [u8], src: &[u8]) {
    match scale {
        Scale::Int(a) => each::<i32>(dst, src, |_, s| a.wrapping_mul(s)),
        Scale::Long(a) => each::<i64>(dst, src, |_, s| a.wrapping_mul(s)),
        Scale::Float(a) => each::<f32>(dst, src, |_, s| a * s),
        Scale::Double(a) => each::<f64>(dst, src, |_, s| a * s),
        Scale::Complex(ar, ai) => each::<[f32; 2]>(dst, src, |_, [sr, si]| [ar * sr - ai * si, ar * si + ai * sr]),
        Scale::DoubleComplex(ar, ai) => each::<[f64; 2]>(dst, src, |_, [sr, si]| [ar * sr - ai * si, ar * si + ai * sr]),
    }
}

/// `combine` from `dst.len()` bytes at `src`, which may lie inside `dst` (an accumulate from a
/// rank's own segment into itself): then from a copy, made before any Rust reference to them
/// overlaps.
unsafe fn combine_from(scale: Scale, dst: &mut [u8], src: *const u8) {
    let d = dst.as_ptr_range();
    let n = dst.len();
    if (src as usize) < d.end as usize && (d.start as usize) < src as usize + n {
        let mut copy = vec![0u8; n];
        std::ptr::copy(src, copy.as_mut_ptr(), n);
        combine(scale, dst, &copy);
    } else {
        combine(scale, dst, std::slice::from_raw_parts(src, n));
    }
}

fn whole_elements(t: AccType, bytes: usize, arg: &str) -> R {
    if !bytes.is_multiple_of(t.size()) {
        return Err(format!("argument {arg} = {bytes} is not a multiple of the {}-byte element of {t:?}", t.size()));
    }
    Ok(())
}

/// Accumulates already-checked pieces (local src, remote dst, bytes) into rank p: through
/// Active Access when the run says so (acc_active.rs); by the conduit's own accumulate where it
/// adds (MPI_Accumulate in a job across hosts); otherwise under p's lock.
unsafe fn apply(w: &World, t: AccType, scale: Scale, p: usize, pieces: &[(usize, usize, usize)]) -> R {
    if pieces.iter().all(|x| x.2 == 0) {
        return Ok(());
    }
    if crate::acc_active::enabled() {
        return crate::acc_active::apply(w, t, scale, p, pieces);
    }
    // A protocol the run forces (ACTIVERMA_TRANSFER=buffered, ...) moves the accumulate's get
    // and put; otherwise the data moves the cheapest way: added by the conduit, or combined
    // where it lies when this host maps it.
    let unforced = matches!(crate::contiguous::transfer(), Transfer::Auto | Transfer::ZeroCopy);
    if unforced && w.accumulates_by_conduit() && by_conduit(w, t, scale, p, pieces)? {
        return Ok(());
    }
    let lock = rank_word(p, ACC_LOCK)?;
    let held = ticket::acquire(w, lock)?;
    let mut tmp = Vec::new();
    let mut r = Ok(());
    for &(s, d, n) in pieces {
        if unforced && w.update_plain(RemotePtr::new(p, d), n, |dst| combine_from(scale, dst, s as *const u8)) {
            continue;
        }
        let src = std::slice::from_raw_parts(s as *const u8, n);
        tmp.resize(n, 0u8);
        r = get_bytes(w, d, tmp.as_mut_ptr(), n, p, "dst");
        if r.is_err() {
            break;
        }
        combine(scale, &mut tmp, src);
        r = put_bytes(w, tmp.as_ptr(), d, n, p, "dst");
        if r.is_err() {
            break;
        }
    }
    ticket::release(w, lock, held)?;
    r
}

thread_local! {
    /// The scaled elements `by_conduit` hands MPI, kept for the thread's next accumulate: a
    /// fresh 1 MiB buffer was zeroed and faulted in on every call (about 5 % of a 1 MiB
    /// accumulate over TCP, which ARMCI-MPI, scaling into malloc'd memory, does not pay).
    static PACKED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Scales every piece here and has the conduit add them all at p as one operation; false when
/// the conduit adds nothing in this job (the same answer on every rank: see World::accumulate).
unsafe fn by_conduit(w: &World, t: AccType, scale: Scale, p: usize, pieces: &[(usize, usize, usize)]) -> R<bool> {
    let total: usize = pieces.iter().map(|x| x.2).sum();
    PACKED.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        if buffer.len() < total {
            buffer.resize(total, 0);
        }
        let packed = &mut buffer[..total];
        let mut at = 0;
        let mut targets = Vec::with_capacity(pieces.len());
        for &(s, d, n) in pieces {
            scale_into(scale, &mut packed[at..at + n], std::slice::from_raw_parts(s as *const u8, n));
            targets.push((d, n));
            at += n;
        }
        // Complete at the target when it returns (MPI_Accumulate, then a flush): the buffer is
        // free again.
        w.accumulate(p, t.element(), &targets, packed).map_err(crate::state::rt)
    })
}

unsafe fn acc(datatype: c_int, scale: *mut c_void, src: *mut c_void, dst: *mut c_void, bytes: c_int, proc: c_int) -> R {
    let w = world()?;
    let t = AccType::from_c(datatype)?;
    let p = proc_arg(w, proc, "proc")?;
    let n = nonneg(bytes.into(), "bytes")?;
    whole_elements(t, n, "bytes")?;
    let sc = read_scale(t, scale)?;
    local_arg(src, n, "src")?;
    remote_arg(p, dst as usize, n, "dst")?;
    apply(w, t, sc, p, &[(src as usize, dst as usize, n)])
}

#[allow(clippy::too_many_arguments)]
unsafe fn accs(
    datatype: c_int,
    scale: *mut c_void,
    src: *mut c_void,
    ss: *mut c_int,
    dst: *mut c_void,
    ds: *mut c_int,
    count: *mut c_int,
    levels: c_int,
    proc: c_int,
) -> R {
    let w = world()?;
    let t = AccType::from_c(datatype)?;
    let p = proc_arg(w, proc, "proc")?;
    let s = pattern_from_c(ds, ss, count, levels)?;
    whole_elements(t, s.piece, "count[0]")?;
    let sc = read_scale(t, scale)?;
    local_arg(src, extent(s.local_extent())?, "src_ptr")?;
    remote_arg(p, dst as usize, extent(s.remote_extent())?, "dst_ptr")?;
    let mut list = Vec::new();
    s.for_each(|d, so| -> R {
        list.push((src as usize + so, dst as usize + d, s.piece));
        Ok(())
    })?;
    apply(w, t, sc, p, &list)
}

unsafe fn accv(datatype: c_int, scale: *mut c_void, iov: *mut ArmciGiov, iov_len: c_int, proc: c_int) -> R {
    let w = world()?;
    let t = AccType::from_c(datatype)?;
    let p = proc_arg(w, proc, "proc")?;
    let list = pieces(iov, iov_len, p, true)?;
    // Every descriptor's pieces share its size: the check runs on the first misfit only.
    if let Some((k, x)) = list.iter().enumerate().find(|(_, x)| !x.2.is_multiple_of(t.size())) {
        whole_elements(t, x.2, &format!("bytes of piece {k}"))?;
    }
    let sc = read_scale(t, scale)?;
    apply(w, t, sc, p, &list)
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_Acc(
    datatype: c_int,
    scale: *mut c_void,
    src: *mut c_void,
    dst: *mut c_void,
    bytes: c_int,
    proc: c_int,
) -> c_int {
    entry("ARMCI_Acc", || acc(datatype, scale, src, dst, bytes, proc));
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_NbAcc(
    datatype: c_int,
    scale: *mut c_void,
    src: *mut c_void,
    dst: *mut c_void,
    bytes: c_int,
    proc: c_int,
    hdl: *mut ArmciHdl,
) -> c_int {
    entry("ARMCI_NbAcc", || acc(datatype, scale, src, dst, bytes, proc));
    mark(hdl, proc);
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_AccS(
    datatype: c_int,
    scale: *mut c_void,
    src: *mut c_void,
    ss: *mut c_int,
    dst: *mut c_void,
    ds: *mut c_int,
    count: *mut c_int,
    levels: c_int,
    proc: c_int,
) -> c_int {
    entry("ARMCI_AccS", || accs(datatype, scale, src, ss, dst, ds, count, levels, proc));
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_NbAccS(
    datatype: c_int,
    scale: *mut c_void,
    src: *mut c_void,
    ss: *mut c_int,
    dst: *mut c_void,
    ds: *mut c_int,
    count: *mut c_int,
    levels: c_int,
    proc: c_int,
    hdl: *mut ArmciHdl,
) -> c_int {
    entry("ARMCI_NbAccS", || accs(datatype, scale, src, ss, dst, ds, count, levels, proc));
    mark(hdl, proc);
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_AccV(datatype: c_int, scale: *mut c_void, iov: *mut ArmciGiov, iov_len: c_int, proc: c_int) -> c_int {
    entry("ARMCI_AccV", || accv(datatype, scale, iov, iov_len, proc));
    0
}

#[no_mangle]
pub unsafe extern "C" fn ARMCI_NbAccV(
    datatype: c_int,
    scale: *mut c_void,
    iov: *mut ArmciGiov,
    iov_len: c_int,
    proc: c_int,
    hdl: *mut ArmciHdl,
) -> c_int {
    entry("ARMCI_NbAccV", || accv(datatype, scale, iov, iov_len, proc));
    mark(hdl, proc);
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complex_scale_multiplies() {
        // (1+2i) += (0+1i) * (3+4i) = 1+2i + (-4+3i) = -3+5i
        let mut d = [0u8; 8];
        d[..4].copy_from_slice(&1f32.to_ne_bytes());
        d[4..].copy_from_slice(&2f32.to_ne_bytes());
        let mut s = [0u8; 8];
        s[..4].copy_from_slice(&3f32.to_ne_bytes());
        s[4..].copy_from_slice(&4f32.to_ne_bytes());
        combine(Scale::Complex(0.0, 1.0), &mut d, &s);
        assert_eq!(f32::from_ne_bytes(d[..4].try_into().unwrap()), -3.0);
        assert_eq!(f32::from_ne_bytes(d[4..].try_into().unwrap()), 5.0);
    }

    #[test]
    fn ints_scale_and_wrap() {
        let mut d = 5i32.to_ne_bytes();
        combine(Scale::Int(3), &mut d, &7i32.to_ne_bytes());
        assert_eq!(i32::from_ne_bytes(d), 26);
        assert!(AccType::from_c(6).is_err() && AccType::from_c(-1).is_err());
    }
}
