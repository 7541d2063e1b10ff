//! The profiling interface: every ARMCI call ARMCI-MPI also exports as PARMCI_* (and the two
//! barriers as parmci_msg_*), under that second name. A profiling library defines ARMCI_Put
//! itself — at dynamic link time its definition wins over ours — records the call and calls
//! PARMCI_Put, which runs ours. PARMCI_Put calls our ARMCI_Put's Rust item directly, inside
//! this library and not through the symbol table (`tests/armci/run.sh` checks with a wrapper
//! that counts), so the wrapper is never entered again.

use crate::groups::ArmciGroup;
use crate::sync::ArmciHdl;
use crate::vector::ArmciGiov;
#[cfg(feature = "mpi")]
use mpi_sys::MPI_Comm;
use std::ffi::{c_char, c_int, c_long, c_void};

/// `PARMCI_X => ARMCI_X(args) -> ret;`: an exported PARMCI_X that runs ARMCI_X.
macro_rules! profiling_names {
    ($($(#[$meta:meta])* $p:ident => $a:ident($($arg:ident: $t:ty),*) $(-> $r:ty)?;)*) => {
        $(
            $(#[$meta])*
            #[no_mangle]
            pub unsafe extern "C" fn $p($($arg: $t),*) $(-> $r)? {
                crate::$a($($arg),*)
            }
        )*
    };
}

profiling_names! {
    PARMCI_Acc => ARMCI_Acc(datatype: c_int, scale: *mut c_void, src: *mut c_void, dst: *mut c_void, bytes: c_int, proc: c_int) -> c_int;
    PARMCI_AccS => ARMCI_AccS(datatype: c_int, scale: *mut c_void, src: *mut c_void, ss: *mut c_int, dst: *mut c_void, ds: *mut c_int, count: *mut c_int, levels: c_int, proc: c_int) -> c_int;
    PARMCI_AccV => ARMCI_AccV(datatype: c_int, scale: *mut c_void, iov: *mut ArmciGiov, iov_len: c_int, proc: c_int) -> c_int;
    PARMCI_Access_begin => ARMCI_Access_begin(_ptr: *mut c_void);
    PARMCI_Access_end => ARMCI_Access_end(_ptr: *mut c_void);
    PARMCI_AllFence => ARMCI_AllFence();
    PARMCI_Barrier => ARMCI_Barrier();
    PARMCI_Create_mutexes => ARMCI_Create_mutexes(count: c_int) -> c_int;
    PARMCI_Destroy_mutexes => ARMCI_Destroy_mutexes() -> c_int;
    PARMCI_Fence => ARMCI_Fence(proc: c_int);
    PARMCI_Finalize => ARMCI_Finalize() -> c_int;
    PARMCI_Free => ARMCI_Free(ptr: *mut c_void) -> c_int;
    PARMCI_Free_local => ARMCI_Free_local(ptr: *mut c_void) -> c_int;
    PARMCI_Free_memdev => ARMCI_Free_memdev(ptr: *mut c_void) -> c_int;
    PARMCI_Get => ARMCI_Get(src: *mut c_void, dst: *mut c_void, size: c_int, proc: c_int) -> c_int;
    PARMCI_GetS => ARMCI_GetS(src: *mut c_void, ss: *mut c_int, dst: *mut c_void, ds: *mut c_int, count: *mut c_int, levels: c_int, proc: c_int) -> c_int;
    PARMCI_GetV => ARMCI_GetV(iov: *mut ArmciGiov, iov_len: c_int, proc: c_int) -> c_int;
    PARMCI_GetValueDouble => ARMCI_GetValueDouble(src: *mut c_void, proc: c_int) -> f64;
    PARMCI_GetValueFloat => ARMCI_GetValueFloat(src: *mut c_void, proc: c_int) -> f32;
    PARMCI_GetValueInt => ARMCI_GetValueInt(src: *mut c_void, proc: c_int) -> c_int;
    PARMCI_GetValueLong => ARMCI_GetValueLong(src: *mut c_void, proc: c_int) -> c_long;
    PARMCI_Init => ARMCI_Init() -> c_int;
    PARMCI_Init_args => ARMCI_Init_args(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int;
    PARMCI_Init_thread => ARMCI_Init_thread(_armci_requested: c_int) -> c_int;
    PARMCI_Initialized => ARMCI_Initialized() -> c_int;
    PARMCI_Lock => ARMCI_Lock(mutex: c_int, proc: c_int);
    PARMCI_Malloc => ARMCI_Malloc(base_ptrs: *mut *mut c_void, size: c_long) -> c_int;
    PARMCI_Malloc_group_memdev => ARMCI_Malloc_group_memdev(base_ptrs: *mut *mut c_void, size: c_long, group: *mut ArmciGroup, _device: *const c_char) -> c_int;
    PARMCI_Malloc_local => ARMCI_Malloc_local(size: c_long) -> *mut c_void;
    PARMCI_Malloc_memdev => ARMCI_Malloc_memdev(base_ptrs: *mut *mut c_void, size: c_long, _device: *const c_char) -> c_int;
    PARMCI_NbAcc => ARMCI_NbAcc(datatype: c_int, scale: *mut c_void, src: *mut c_void, dst: *mut c_void, bytes: c_int, proc: c_int, hdl: *mut ArmciHdl) -> c_int;
    PARMCI_NbAccS => ARMCI_NbAccS(datatype: c_int, scale: *mut c_void, src: *mut c_void, ss: *mut c_int, dst: *mut c_void, ds: *mut c_int, count: *mut c_int, levels: c_int, proc: c_int, hdl: *mut ArmciHdl) -> c_int;
    PARMCI_NbAccV => ARMCI_NbAccV(datatype: c_int, scale: *mut c_void, iov: *mut ArmciGiov, iov_len: c_int, proc: c_int, hdl: *mut ArmciHdl) -> c_int;
    PARMCI_NbGet => ARMCI_NbGet(src: *mut c_void, dst: *mut c_void, bytes: c_int, proc: c_int, hdl: *mut ArmciHdl) -> c_int;
    PARMCI_NbGetS => ARMCI_NbGetS(src: *mut c_void, ss: *mut c_int, dst: *mut c_void, ds: *mut c_int, count: *mut c_int, levels: c_int, proc: c_int, hdl: *mut ArmciHdl) -> c_int;
    PARMCI_NbGetV => ARMCI_NbGetV(iov: *mut ArmciGiov, iov_len: c_int, proc: c_int, hdl: *mut ArmciHdl) -> c_int;
    PARMCI_NbPut => ARMCI_NbPut(src: *mut c_void, dst: *mut c_void, bytes: c_int, proc: c_int, hdl: *mut ArmciHdl) -> c_int;
    PARMCI_NbPutS => ARMCI_NbPutS(src: *mut c_void, ss: *mut c_int, dst: *mut c_void, ds: *mut c_int, count: *mut c_int, levels: c_int, proc: c_int, hdl: *mut ArmciHdl) -> c_int;
    PARMCI_NbPutV => ARMCI_NbPutV(iov: *mut ArmciGiov, iov_len: c_int, proc: c_int, hdl: *mut ArmciHdl) -> c_int;
    PARMCI_NbPutValueDouble => ARMCI_NbPutValueDouble(src: f64, dst: *mut c_void, proc: c_int, hdl: *mut ArmciHdl) -> c_int;
    PARMCI_NbPutValueFloat => ARMCI_NbPutValueFloat(src: f32, dst: *mut c_void, proc: c_int, hdl: *mut ArmciHdl) -> c_int;
    PARMCI_NbPutValueInt => ARMCI_NbPutValueInt(src: c_int, dst: *mut c_void, proc: c_int, hdl: *mut ArmciHdl) -> c_int;
    PARMCI_NbPutValueLong => ARMCI_NbPutValueLong(src: c_long, dst: *mut c_void, proc: c_int, hdl: *mut ArmciHdl) -> c_int;
    PARMCI_Put => ARMCI_Put(src: *mut c_void, dst: *mut c_void, size: c_int, proc: c_int) -> c_int;
    PARMCI_PutS => ARMCI_PutS(src: *mut c_void, ss: *mut c_int, dst: *mut c_void, ds: *mut c_int, count: *mut c_int, levels: c_int, proc: c_int) -> c_int;
    PARMCI_PutS_flag => ARMCI_PutS_flag(src: *mut c_void, ss: *mut c_int, dst: *mut c_void, ds: *mut c_int, count: *mut c_int, levels: c_int, flag: *mut c_int, value: c_int, proc: c_int) -> c_int;
    PARMCI_PutV => ARMCI_PutV(iov: *mut ArmciGiov, iov_len: c_int, proc: c_int) -> c_int;
    PARMCI_PutValueDouble => ARMCI_PutValueDouble(src: f64, dst: *mut c_void, proc: c_int) -> c_int;
    PARMCI_PutValueFloat => ARMCI_PutValueFloat(src: f32, dst: *mut c_void, proc: c_int) -> c_int;
    PARMCI_PutValueInt => ARMCI_PutValueInt(src: c_int, dst: *mut c_void, proc: c_int) -> c_int;
    PARMCI_PutValueLong => ARMCI_PutValueLong(src: c_long, dst: *mut c_void, proc: c_int) -> c_int;
    PARMCI_Put_flag => ARMCI_Put_flag(src: *mut c_void, dst: *mut c_void, size: c_int, flag: *mut c_int, value: c_int, proc: c_int) -> c_int;
    PARMCI_Rmw => ARMCI_Rmw(op: c_int, ploc: *mut c_void, prem: *mut c_void, value: c_int, proc: c_int) -> c_int;
    PARMCI_Test => ARMCI_Test(hdl: *mut ArmciHdl) -> c_int;
    PARMCI_Unlock => ARMCI_Unlock(mutex: c_int, proc: c_int);
    PARMCI_Wait => ARMCI_Wait(hdl: *mut ArmciHdl) -> c_int;
    PARMCI_WaitAll => ARMCI_WaitAll() -> c_int;
    PARMCI_WaitProc => ARMCI_WaitProc(proc: c_int) -> c_int;
    parmci_msg_barrier => armci_msg_barrier();
    parmci_msg_group_barrier => armci_msg_group_barrier(group: *mut ArmciGroup);
    #[cfg(feature = "mpi")]
    PARMCI_Init_thread_comm => ARMCI_Init_thread_comm(_armci_requested: c_int, comm: MPI_Comm) -> c_int;
}
