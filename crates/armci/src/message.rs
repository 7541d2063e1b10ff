//! message.h: rank, size, barrier, broadcast and reductions, all built on activerma's
//! allgather (every rank then reduces all contributions in rank order, so every rank computes
//! the bit-identical result, floating point included).

use crate::errors::{entry, R};
use crate::groups::{check_group, ArmciGroup};
use crate::state::{nonneg, proc_arg, rt, world};
use std::ffi::{c_char, c_double, c_float, c_int, c_long, c_longlong, c_void, CStr};
use std::sync::OnceLock;
use std::time::Instant;

#[no_mangle]
pub extern "C" fn armci_msg_me() -> c_int {
    entry("armci_msg_me", || Ok(world()?.rank() as c_int))
}

#[no_mangle]
pub extern "C" fn armci_msg_nproc() -> c_int {
    entry("armci_msg_nproc", || Ok(world()?.size() as c_int))
}

#[no_mangle]
pub extern "C" fn armci_timer() -> c_double {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

#[no_mangle]
pub extern "C" fn armci_msg_barrier() {
    entry("armci_msg_barrier", || world()?.barrier().map_err(rt))
}

#[no_mangle]
pub unsafe extern "C" fn armci_msg_group_barrier(group: *mut ArmciGroup) {
    entry("armci_msg_group_barrier", || {
        check_group(group)?;
        world()?.barrier().map_err(rt)
    })
}

unsafe fn bcast(buf: *mut c_void, len: c_int, root: c_int) -> R {
    let w = world()?;
    let r = proc_arg(w, root, "root")?;
    let n = nonneg(len.into(), "len")?;
    crate::state::local_arg(buf, n, "buffer")?;
    let mine = if w.rank() == r && n > 0 { std::slice::from_raw_parts(buf as *const u8, n) } else { &[] };
    let all = w.allgather(mine).map_err(rt)?;
    if w.rank() != r {
        if all[r].len() != n {
            return Err(format!("root {r} broadcast {} bytes but this rank expects len = {n}", all[r].len()));
        }
        std::ptr::copy_nonoverlapping(all[r].as_ptr(), buf as *mut u8, n);
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn armci_msg_bcast(buffer: *mut c_void, len: c_int, root: c_int) {
    entry("armci_msg_bcast", || bcast(buffer, len, root))
}

#[no_mangle]
pub unsafe extern "C" fn armci_msg_brdcst(buffer: *mut c_void, len: c_int, root: c_int) {
    entry("armci_msg_brdcst", || bcast(buffer, len, root))
}

#[no_mangle]
pub unsafe extern "C" fn armci_msg_bcast_scope(_scope: c_int, buffer: *mut c_void, len: c_int, root: c_int) {
    entry("armci_msg_bcast_scope", || bcast(buffer, len, root))
}

#[derive(Clone, Copy)]
enum Op {
    Sum,
    Prod,
    Max,
    Min,
    AbsMax,
    AbsMin,
}

unsafe fn parse_op(op: *const c_char) -> R<Op> {
    if op.is_null() {
        return Err("argument op is NULL".into());
    }
    Ok(match CStr::from_ptr(op).to_bytes() {
        b"+" => Op::Sum,
        b"*" => Op::Prod,
        b"max" => Op::Max,
        b"min" => Op::Min,
        b"absmax" => Op::AbsMax,
        b"absmin" => Op::AbsMin,
        o => return Err(format!("argument op = \"{}\" is not one of +, *, max, min, absmax, absmin", String::from_utf8_lossy(o))),
    })
}

/// The number types the reductions work on.
trait Elem: Copy + PartialOrd {
    const SIZE: usize;
    fn from_bytes(b: &[u8]) -> Self;
    fn write(self, out: &mut [u8]);
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn abs(self) -> Self;
}

macro_rules! elem_int {
    ($t:ty) => {
        impl Elem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn from_bytes(b: &[u8]) -> Self {
                <$t>::from_ne_bytes(b.try_into().unwrap())
            }
            fn write(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_ne_bytes())
            }
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn abs(self) -> Self {
                self.wrapping_abs()
            }
        }
    };
}
macro_rules! elem_float {
    ($t:ty) => {
        impl Elem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn from_bytes(b: &[u8]) -> Self {
                <$t>::from_ne_bytes(b.try_into().unwrap())
            }
            fn write(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_ne_bytes())
            }
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn abs(self) -> Self {
                self.abs()
            }
        }
    };
}
elem_int!(c_int);
elem_int!(c_long);
elem_float!(c_float);
elem_float!(c_double);

/// Reduces x[0..n] over all ranks in place.
unsafe fn gop<T: Elem>(x: *mut T, n: c_int, op: *const c_char) -> R {
    let w = world()?;
    let n = nonneg(n.into(), "n")?;
    let op = parse_op(op)?;
    crate::state::local_arg(x as *const c_void, n, "x")?;
    let bytes = n * T::SIZE;
    let mine = if n > 0 { std::slice::from_raw_parts(x as *const u8, bytes) } else { &[] };
    let all = w.allgather(mine).map_err(rt)?;
    if let Some((r, b)) = all.iter().enumerate().find(|(_, b)| b.len() != bytes) {
        return Err(format!("rank {r} reduces {} elements but this rank n = {n}", b.len() / T::SIZE));
    }
    let out = std::slice::from_raw_parts_mut(x as *mut u8, bytes);
    for i in 0..n {
        let at = |r: usize| T::from_bytes(&all[r][i * T::SIZE..(i + 1) * T::SIZE]);
        let first = match op {
            Op::AbsMax | Op::AbsMin => at(0).abs(),
            _ => at(0),
        };
        let v = (1..all.len()).fold(first, |acc, r| {
            let y = at(r);
            match op {
                Op::Sum => acc.add(y),
                Op::Prod => acc.mul(y),
                Op::Max => {
                    if y > acc {
                        y
                    } else {
                        acc
                    }
                }
                Op::Min => {
                    if y < acc {
                        y
                    } else {
                        acc
                    }
                }
                Op::AbsMax => {
                    if y.abs() > acc {
                        y.abs()
                    } else {
                        acc
                    }
                }
                Op::AbsMin => {
                    if y.abs() < acc {
                        y.abs()
                    } else {
                        acc
                    }
                }
            }
        });
        v.write(&mut out[i * T::SIZE..(i + 1) * T::SIZE]);
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn armci_msg_igop(x: *mut c_int, n: c_int, op: *mut c_char) {
    entry("armci_msg_igop", || gop(x, n, op))
}
#[no_mangle]
pub unsafe extern "C" fn armci_msg_lgop(x: *mut c_long, n: c_int, op: *mut c_char) {
    entry("armci_msg_lgop", || gop(x, n, op))
}
#[no_mangle]
pub unsafe extern "C" fn armci_msg_llgop(x: *mut c_longlong, n: c_int, op: *mut c_char) {
    // long long and long are both 64-bit on the Linux targets activerma runs on.
    entry("armci_msg_llgop", || gop(x as *mut c_long, n, op))
}
#[no_mangle]
pub unsafe extern "C" fn armci_msg_fgop(x: *mut c_float, n: c_int, op: *mut c_char) {
    entry("armci_msg_fgop", || gop(x, n, op))
}
#[no_mangle]
pub unsafe extern "C" fn armci_msg_dgop(x: *mut c_double, n: c_int, op: *mut c_char) {
    entry("armci_msg_dgop", || gop(x, n, op))
}

/// type is one of ARMCI_INT, ARMCI_LONG, ARMCI_LONG_LONG, ARMCI_FLOAT, ARMCI_DOUBLE.
#[no_mangle]
pub unsafe extern "C" fn armci_msg_gop_scope(_scope: c_int, x: *mut c_void, n: c_int, op: *mut c_char, ty: c_int) {
    entry("armci_msg_gop_scope", || match ty {
        0 => gop(x as *mut c_int, n, op),
        1 | 2 => gop(x as *mut c_long, n, op),
        3 => gop(x as *mut c_float, n, op),
        4 => gop(x as *mut c_double, n, op),
        _ => Err(format!("argument type = {ty} is not ARMCI_INT, ARMCI_LONG, ARMCI_LONG_LONG, ARMCI_FLOAT or ARMCI_DOUBLE")),
    })
}

macro_rules! group_gop {
    ($name:ident, $t:ty, $as:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(x: *mut $t, n: c_int, op: *mut c_char, group: *mut ArmciGroup) {
            entry(stringify!($name), || {
                check_group(group)?;
                gop(x as *mut $as, n, op)
            })
        }
    };
}
group_gop!(armci_msg_group_igop, c_int, c_int);
group_gop!(armci_msg_group_lgop, c_long, c_long);
group_gop!(armci_msg_group_llgop, c_longlong, c_long);
group_gop!(armci_msg_group_fgop, c_float, c_float);
group_gop!(armci_msg_group_dgop, c_double, c_double);
