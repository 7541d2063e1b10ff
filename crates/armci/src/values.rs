//! Single-value puts and gets (int, long, float, double).

use crate::contiguous::{get, put};
use crate::errors::entry;
use crate::sync::{mark, ArmciHdl};
use std::ffi::{c_int, c_long, c_void};

/// The put and non-blocking put of one value type.
macro_rules! put_value {
    ($name:ident, $nb:ident, $t:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(src: $t, dst: *mut c_void, proc: c_int) -> c_int {
            entry(stringify!($name), || put((&src as *const $t).cast_mut().cast(), dst, std::mem::size_of::<$t>() as c_int, proc));
            0
        }
        #[no_mangle]
        pub unsafe extern "C" fn $nb(src: $t, dst: *mut c_void, proc: c_int, hdl: *mut ArmciHdl) -> c_int {
            entry(stringify!($nb), || put((&src as *const $t).cast_mut().cast(), dst, std::mem::size_of::<$t>() as c_int, proc));
            mark(hdl, proc);
            0
        }
    };
}

macro_rules! get_value {
    ($name:ident, $t:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(src: *mut c_void, proc: c_int) -> $t {
            entry(stringify!($name), || {
                let mut v: $t = Default::default();
                get(src, (&mut v as *mut $t).cast(), std::mem::size_of::<$t>() as c_int, proc)?;
                Ok(v)
            })
        }
    };
}

put_value!(ARMCI_PutValueInt, ARMCI_NbPutValueInt, c_int);
put_value!(ARMCI_PutValueLong, ARMCI_NbPutValueLong, c_long);
put_value!(ARMCI_PutValueFloat, ARMCI_NbPutValueFloat, f32);
put_value!(ARMCI_PutValueDouble, ARMCI_NbPutValueDouble, f64);
get_value!(ARMCI_GetValueInt, c_int);
get_value!(ARMCI_GetValueLong, c_long);
get_value!(ARMCI_GetValueFloat, f32);
get_value!(ARMCI_GetValueDouble, f64);
