//! message.h: rank, size, barrier, broadcast and reductions, all built on activerma's
//! allgather (every rank then reduces all contributions in rank order, so every rank computes
//! the bit-identical result, floating point included).

use crate::errors::{entry, R};
use crate::groups::{member_of, members_of, ArmciGroup};
use crate::state::{nonneg, proc_arg, rt, world};
use crate::topology::SCOPE_NODE;
use std::ffi::{c_char, c_double, c_float, c_int, c_long, c_longlong, c_void, CStr};
use std::sync::OnceLock;
use std::time::Instant;

/// GA's ARMCI: brings up the message layer before ARMCI_Init. The MPI build starts MPI
/// (MPI_Init_thread with MPI_THREAD_MULTIPLE) unless the program did; the smp build has
/// nothing to start (ARMCI_Init joins the job), so messages work from ARMCI_Init on.
#[no_mangle]
pub unsafe extern "C" fn armci_msg_init(argc: *mut c_int, argv: *mut *mut *mut c_char) {
    #[cfg(feature = "mpi")]
    entry("armci_msg_init", || crate::mpi_comm::start_mpi(argc, argv));
    #[cfg(not(feature = "mpi"))]
    let _ = (argc, argv);
}

/// GA's ARMCI: ends the message layer after ARMCI_Finalize (the MPI build: MPI_Finalize).
#[no_mangle]
pub extern "C" fn armci_msg_finalize() {
    #[cfg(feature = "mpi")]
    entry("armci_msg_finalize", crate::mpi_comm::finish_mpi);
}

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

/// Who a collective runs over: the whole job, or a group's members (job ranks in group order).
enum Over {
    Job,
    Members(Vec<usize>),
}

impl Over {
    /// The group's members, or the job when the group is all of it.
    unsafe fn group(group: *mut ArmciGroup) -> R<Over> {
        Over::ranks(members_of(member_of(group)?).into_iter().map(|m| m as usize).collect())
    }

    /// Job ranks in the order a collective over them indexes them; the job's own collectives
    /// when they are all of it.
    fn ranks(ranks: Vec<usize>) -> R<Over> {
        Ok(if ranks.len() == world()?.size() { Over::Job } else { Over::Members(ranks) })
    }

    /// The ranks of a message.h scope (topology.rs: SCOPE_ALL, SCOPE_NODE, SCOPE_MASTERS).
    fn scope(scope: c_int) -> R<Over> {
        Ok(crate::topology::scope_ranks(scope)?.map_or(Over::Job, Over::Members))
    }

    /// Every participant's `mine`, indexed by job rank for the job and by group rank for a
    /// group.
    fn allgather(&self, mine: &[u8]) -> R<Vec<Vec<u8>>> {
        match self {
            Over::Job => world()?.allgather(mine).map_err(rt),
            Over::Members(m) => crate::point_to_point::group_allgather(m, mine),
        }
    }

    /// The index `allgather` gives job rank `r`.
    fn index_of(&self, r: usize) -> R<usize> {
        match self {
            Over::Job => Ok(r),
            Over::Members(m) => m.iter().position(|&x| x == r).ok_or_else(|| format!("rank {r} is not a member of the group")),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn armci_msg_group_barrier(group: *mut ArmciGroup) {
    entry("armci_msg_group_barrier", || match Over::group(group)? {
        Over::Job => world()?.barrier().map_err(rt),
        over => over.allgather(&[]).map(|_| ()),
    })
}

/// Broadcast from job rank `root` over `over`.
unsafe fn bcast_over(over: &Over, buf: *mut c_void, len: c_int, root: usize) -> R {
    let w = world()?;
    let n = nonneg(len.into(), "len")?;
    crate::state::local_arg(buf, n, "buffer")?;
    let mine = if w.rank() == root && n > 0 { std::slice::from_raw_parts(buf as *const u8, n) } else { &[] };
    let all = over.allgather(mine)?;
    let from = &all[over.index_of(root)?];
    if w.rank() != root {
        if from.len() != n {
            return Err(format!("root {root} broadcast {} bytes but this rank expects len = {n}", from.len()));
        }
        std::ptr::copy_nonoverlapping(from.as_ptr(), buf as *mut u8, n);
    }
    Ok(())
}

/// Broadcast from job rank `root` (checked) over `over`.
unsafe fn bcast(over: &Over, buf: *mut c_void, len: c_int, root: c_int) -> R {
    let r = proc_arg(world()?, root, "root")?;
    bcast_over(over, buf, len, r)
}

#[no_mangle]
pub unsafe extern "C" fn armci_msg_bcast(buffer: *mut c_void, len: c_int, root: c_int) {
    entry("armci_msg_bcast", || bcast(&Over::Job, buffer, len, root))
}

#[no_mangle]
pub unsafe extern "C" fn armci_msg_brdcst(buffer: *mut c_void, len: c_int, root: c_int) {
    entry("armci_msg_brdcst", || bcast(&Over::Job, buffer, len, root))
}

/// Broadcast from job rank `root` over `scope`'s ranks (root among them).
#[no_mangle]
pub unsafe extern "C" fn armci_msg_bcast_scope(scope: c_int, buffer: *mut c_void, len: c_int, root: c_int) {
    entry("armci_msg_bcast_scope", || bcast(&Over::scope(scope)?, buffer, len, root))
}

/// Classic ARMCI's cluster broadcast: the first rank of the caller's SMP domain (its "cluster
/// node") sends `len` bytes to the domain's other ranks; every rank of the domain calls.
#[no_mangle]
pub unsafe extern "C" fn armci_msg_clus_brdcst(buffer: *mut c_void, len: c_int) {
    entry("armci_msg_clus_brdcst", || {
        let over = Over::scope(SCOPE_NODE)?;
        let master = match &over {
            Over::Job => 0,
            Over::Members(m) => m[0],
        };
        bcast_over(&over, buffer, len, master)
    })
}

/// Classic ARMCI's broadcast inside part of a group: group ranks `grp_master` ..
/// `grp_master + grp_clus_nproc - 1` of `mastergroup` (the processes of one node, in its
/// callers), from `grp_master`; only those ranks call.
#[no_mangle]
pub unsafe extern "C" fn armci_grp_clus_brdcst(
    buffer: *mut c_void,
    len: c_int,
    grp_master: c_int,
    grp_clus_nproc: c_int,
    mastergroup: *mut ArmciGroup,
) {
    entry("armci_grp_clus_brdcst", || {
        let members = members_of(member_of(mastergroup)?);
        let (first, count) = (usize::try_from(grp_master), usize::try_from(grp_clus_nproc));
        let part = match (first, count) {
            (Ok(f), Ok(c)) if c >= 1 && f + c <= members.len() => &members[f..f + c],
            _ => {
                return Err(format!(
                    "arguments grp_master = {grp_master}, grp_clus_nproc = {grp_clus_nproc} do not name ranks of the group (0 to {})",
                    members.len() - 1
                ))
            }
        };
        let me = world()?.rank();
        let part: Vec<usize> = part.iter().map(|&r| r as usize).collect();
        if !part.contains(&me) {
            return Err(format!(
                "rank {me} is not among the group ranks {grp_master} .. {} it broadcasts over",
                grp_master + grp_clus_nproc - 1
            ));
        }
        let root = part[0];
        bcast_over(&Over::ranks(part)?, buffer, len, root)
    })
}

#[derive(Clone, Copy)]
enum Op {
    Sum,
    Prod,
    Max,
    Min,
    AbsMax,
    AbsMin,
    /// Bitwise or ("or", "|"; integers only).
    BitOr,
    /// Logical and / or ("&&", "||"): 1 or 0.
    And,
    Or,
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
        b"or" | b"|" => Op::BitOr,
        b"&&" => Op::And,
        b"||" => Op::Or,
        o => {
            return Err(format!(
                "argument op = \"{}\" is not one of +, *, max, min, absmax, absmin, or, &&, ||",
                String::from_utf8_lossy(o)
            ))
        }
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
    /// Bitwise or; None for floating-point types.
    fn bit_or(self, o: Self) -> Option<Self>;
    fn is_true(self) -> bool;
    fn from_bool(b: bool) -> Self;
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
            fn bit_or(self, o: Self) -> Option<Self> {
                Some(self | o)
            }
            fn is_true(self) -> bool {
                self != 0
            }
            fn from_bool(b: bool) -> Self {
                b as $t
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
            fn bit_or(self, _: Self) -> Option<Self> {
                None
            }
            fn is_true(self) -> bool {
                self != 0.0
            }
            fn from_bool(b: bool) -> Self {
                b as u8 as $t
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
    gop_over(&Over::Job, x, n, op)
}

/// Reduces x[0..n] over `over` in place (contributions combined in rank order).
unsafe fn gop_over<T: Elem>(over: &Over, x: *mut T, n: c_int, op: *const c_char) -> R {
    let n = nonneg(n.into(), "n")?;
    let op = parse_op(op)?;
    crate::state::local_arg(x as *const c_void, n, "x")?;
    let bytes = n * T::SIZE;
    let mine = if n > 0 { std::slice::from_raw_parts(x as *const u8, bytes) } else { &[] };
    let all = over.allgather(mine)?;
    if let Some((r, b)) = all.iter().enumerate().find(|(_, b)| b.len() != bytes) {
        return Err(format!("rank {r} reduces {} elements but this rank n = {n}", b.len() / T::SIZE));
    }
    if matches!(op, Op::BitOr) && n > 0 && T::from_bytes(&all[0][..T::SIZE]).bit_or(T::from_bytes(&all[0][..T::SIZE])).is_none() {
        return Err("argument op = \"or\" (bitwise) needs integer elements".into());
    }
    let out = std::slice::from_raw_parts_mut(x as *mut u8, bytes);
    for i in 0..n {
        let at = |r: usize| T::from_bytes(&all[r][i * T::SIZE..(i + 1) * T::SIZE]);
        let first = match op {
            Op::AbsMax | Op::AbsMin => at(0).abs(),
            Op::And | Op::Or => T::from_bool(at(0).is_true()),
            _ => at(0),
        };
        let v = (1..all.len()).fold(first, |acc, r| {
            let y = at(r);
            match op {
                Op::BitOr => acc.bit_or(y).unwrap_or(acc),
                Op::And => T::from_bool(acc.is_true() && y.is_true()),
                Op::Or => T::from_bool(acc.is_true() || y.is_true()),
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

/// Exports a typed reduction `$name(x, n, op, extra args...)` over the ranks `$over` names
/// (an expression of the extra arguments): the group variants and classic ARMCI's cluster ones.
macro_rules! gop_export {
    ($name:ident, $t:ty, $as:ty, [$($arg:ident: $at:ty),*] $over:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(x: *mut $t, n: c_int, op: *mut c_char $(, $arg: $at)*) {
            entry(stringify!($name), || gop_over(&$over, x as *mut $as, n, op))
        }
    };
}
// Classic ARMCI's reductions over the caller's SMP domain (SCOPE_NODE), the result on every
// rank of it.
gop_export!(armci_msg_clus_igop, c_int, c_int, [] Over::scope(SCOPE_NODE)?);
gop_export!(armci_msg_clus_lgop, c_long, c_long, [] Over::scope(SCOPE_NODE)?);
gop_export!(armci_msg_clus_llgop, c_longlong, c_long, [] Over::scope(SCOPE_NODE)?);
gop_export!(armci_msg_clus_fgop, c_float, c_float, [] Over::scope(SCOPE_NODE)?);
gop_export!(armci_msg_clus_dgop, c_double, c_double, [] Over::scope(SCOPE_NODE)?);

/// A reduction of elements of message.h's `type` (ARMCI_INT, ARMCI_LONG, ARMCI_LONG_LONG,
/// ARMCI_FLOAT, ARMCI_DOUBLE).
unsafe fn typed_gop(over: &Over, x: *mut c_void, n: c_int, op: *mut c_char, ty: c_int) -> R {
    match ty {
        0 => gop_over(over, x as *mut c_int, n, op),
        1 | 2 => gop_over(over, x as *mut c_long, n, op),
        3 => gop_over(over, x as *mut c_float, n, op),
        4 => gop_over(over, x as *mut c_double, n, op),
        _ => Err(format!("argument type = {ty} is not ARMCI_INT, ARMCI_LONG, ARMCI_LONG_LONG, ARMCI_FLOAT or ARMCI_DOUBLE")),
    }
}

#[no_mangle]
pub unsafe extern "C" fn armci_msg_gop_scope(scope: c_int, x: *mut c_void, n: c_int, op: *mut c_char, ty: c_int) {
    entry("armci_msg_gop_scope", || typed_gop(&Over::scope(scope)?, x, n, op, ty))
}

/// A reduction whose result ARMCI promises at rank 0 only; every rank gets it here (the
/// reduction is an allgather, so it costs nothing more).
#[no_mangle]
pub unsafe extern "C" fn armci_msg_reduce(x: *mut c_void, n: c_int, op: *mut c_char, ty: c_int) {
    entry("armci_msg_reduce", || typed_gop(&Over::Job, x, n, op, ty))
}

#[no_mangle]
pub unsafe extern "C" fn armci_msg_reduce_scope(scope: c_int, x: *mut c_void, n: c_int, op: *mut c_char, ty: c_int) {
    entry("armci_msg_reduce_scope", || typed_gop(&Over::scope(scope)?, x, n, op, ty))
}

gop_export!(armci_msg_group_igop, c_int, c_int, [group: *mut ArmciGroup] Over::group(group)?);
gop_export!(armci_msg_group_lgop, c_long, c_long, [group: *mut ArmciGroup] Over::group(group)?);
gop_export!(armci_msg_group_llgop, c_longlong, c_long, [group: *mut ArmciGroup] Over::group(group)?);
gop_export!(armci_msg_group_fgop, c_float, c_float, [group: *mut ArmciGroup] Over::group(group)?);
gop_export!(armci_msg_group_dgop, c_double, c_double, [group: *mut ArmciGroup] Over::group(group)?);

/// Broadcast over `group` from its rank `root` (a group rank).
#[no_mangle]
pub unsafe extern "C" fn armci_msg_group_bcast_scope(_scope: c_int, buffer: *mut c_void, len: c_int, root: c_int, group: *mut ArmciGroup) {
    entry("armci_msg_group_bcast_scope", || {
        let g = member_of(group)?;
        let r = match usize::try_from(root) {
            Ok(r) if r < g.size as usize => *g.grp_to_abs.add(r) as usize,
            _ => return Err(format!("argument root = {root} is not a rank of the group (0 to {})", g.size - 1)),
        };
        bcast_over(&Over::group(group)?, buffer, len, r)
    })
}

#[no_mangle]
pub unsafe extern "C" fn armci_msg_group_gop_scope(
    _scope: c_int,
    x: *mut c_void,
    n: c_int,
    op: *mut c_char,
    ty: c_int,
    group: *mut ArmciGroup,
) {
    entry("armci_msg_group_gop_scope", || typed_gop(&Over::group(group)?, x, n, op, ty))
}

/// The binary tree over a scope's ranks (the job for SCOPE_ALL) that ARMCI's tree collectives
/// use: the i-th rank's parent is the ((i - 1) / 2)-th, its children the (2i + 1)-th and
/// (2i + 2)-th; all given as job ranks, -1 where there is none.
#[no_mangle]
pub unsafe extern "C" fn armci_msg_bintree(scope: c_int, root: *mut c_int, up: *mut c_int, left: *mut c_int, right: *mut c_int) {
    entry("armci_msg_bintree", || {
        let w = world()?;
        let ranks: Vec<usize> = crate::topology::scope_ranks(scope)?.unwrap_or_else(|| (0..w.size()).collect());
        let i = ranks.iter().position(|&r| r == w.rank()).ok_or("this rank is not in the scope")?;
        let at = |k: usize| ranks.get(k).map_or(-1, |&r| r as c_int);
        for (p, v, name) in [
            (root, at(0), "Root"),
            (up, if i == 0 { -1 } else { at((i - 1) / 2) }, "Up"),
            (left, at(2 * i + 1), "Left"),
            (right, at(2 * i + 2), "Right"),
        ] {
            *p.as_mut().ok_or(format!("argument {name} is NULL"))? = v;
        }
        Ok(())
    })
}

/// Selection: among the ranks that `contribute`, the one whose buffer starts with the
/// smallest ("min") or largest ("max") value of type `ty`; every rank gets that rank's `n`
/// bytes in `x` (the lowest rank wins a tie; nothing changes if no rank contributes).
unsafe fn sel(over: &Over, x: *mut c_void, n: c_int, op: *mut c_char, ty: c_int, contribute: c_int) -> R {
    let n = nonneg(n.into(), "n")?;
    crate::state::local_arg(x, n, "x")?;
    let want_max = match parse_op(op)? {
        Op::Max => true,
        Op::Min => false,
        _ => return Err("argument op must be \"min\" or \"max\" for a selection".into()),
    };
    let width = match ty {
        0 | 3 => 4,
        1 | 2 | 4 => 8,
        _ => return Err(format!("argument type = {ty} is not ARMCI_INT, ARMCI_LONG, ARMCI_LONG_LONG, ARMCI_FLOAT or ARMCI_DOUBLE")),
    };
    if n < width {
        return Err(format!("argument n = {n} is smaller than the {width}-byte value the selection compares"));
    }
    let mine = if contribute != 0 { std::slice::from_raw_parts(x as *const u8, n) } else { &[] };
    let all = over.allgather(mine)?;
    let value = |b: &[u8]| -> f64 {
        match ty {
            0 => c_int::from_bytes(&b[..4]) as f64,
            3 => c_float::from_bytes(&b[..4]) as f64,
            4 => c_double::from_bytes(&b[..8]),
            _ => c_long::from_bytes(&b[..8]) as f64,
        }
    };
    let mut best: Option<(usize, f64)> = None;
    for (r, b) in all.iter().enumerate().filter(|(_, b)| !b.is_empty()) {
        if b.len() != n {
            return Err(format!("rank {r} selects over {} bytes but this rank n = {n}", b.len()));
        }
        let v = value(b);
        if best.is_none_or(|(_, bv)| if want_max { v > bv } else { v < bv }) {
            best = Some((r, v));
        }
    }
    if let Some((r, _)) = best {
        std::ptr::copy_nonoverlapping(all[r].as_ptr(), x as *mut u8, n);
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn armci_msg_sel_scope(scope: c_int, x: *mut c_void, n: c_int, op: *mut c_char, ty: c_int, contribute: c_int) {
    entry("armci_msg_sel_scope", || sel(&Over::scope(scope)?, x, n, op, ty, contribute))
}

/// armci_msg_sel_scope over all ranks.
#[no_mangle]
pub unsafe extern "C" fn armci_msg_sel(x: *mut c_void, n: c_int, op: *mut c_char, ty: c_int, contribute: c_int) {
    entry("armci_msg_sel", || sel(&Over::Job, x, n, op, ty, contribute))
}
