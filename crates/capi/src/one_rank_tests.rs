//! The C entry points driven from Rust in a one-rank job (a test binary started without the
//! launcher), so `cargo test` covers them without a C compiler. The multi-rank C tests are
//! in tests/c. One test function: the runtime is process-global and initialized once.

use crate::*;
use std::ffi::{c_void, CStr};
use std::ptr::{null, null_mut};

fn last_error() -> String {
    unsafe { CStr::from_ptr(arma_last_error()) }.to_string_lossy().into_owned()
}

#[test]
fn c_api_in_a_one_rank_job() {
    unsafe {
        assert_eq!(arma_rank(), -1);
        assert_eq!(arma_barrier(), ARMA_ERR_NOT_INITIALIZED);
        assert_eq!(arma_init(), ARMA_OK, "{}", last_error());
        assert_eq!((arma_rank(), arma_size()), (0, 1));

        let mut seg: *mut c_void = null_mut();
        assert_eq!(arma_seg_alloc(3 * 4096, &mut seg), ARMA_OK);
        let mut at = 0u64;
        assert_eq!(arma_seg_addr(seg.cast::<u8>().add(4095).cast(), 0, &mut at), ARMA_OK);
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        assert_eq!(arma_put(0, at, data.as_ptr().cast(), data.len()), ARMA_OK);
        let mut back = vec![0u8; data.len()];
        let mut h = arma_handle_t::default();
        assert_eq!(arma_get_nb(0, at, back.as_mut_ptr().cast(), back.len(), &mut h), ARMA_OK);
        let mut done = 0;
        while done == 0 {
            assert_eq!(arma_test(&mut h, &mut done), ARMA_OK);
        }
        assert_eq!(back, data);
        assert_eq!(arma_put_nbi(0, at, data[1..].as_ptr().cast(), 10), ARMA_OK);
        assert_eq!(arma_flush(0), ARMA_OK);
        assert_eq!(std::slice::from_raw_parts(seg.cast::<u8>().add(4095), 10), &data[1..11]);

        // Private memory, with an atomic the target (this rank) runs itself.
        let mut word = [0u64; 2];
        let mut e = arma_exposure_t::default();
        assert_eq!(arma_expose(word.as_mut_ptr().cast(), 16, ARMA_PROT_READ_WRITE, &mut e), ARMA_OK);
        let mut old = 9;
        assert_eq!(arma_fetch_add(0, e.addr + 8, 5, &mut old), ARMA_OK, "{}", last_error());
        assert_eq!(arma_cswap(0, e.addr + 8, 5, 6, null_mut()), ARMA_OK);
        assert_eq!((old, std::ptr::read_volatile(&word[1])), (0, 6));
        assert_eq!(arma_put(0, e.addr, null(), 17), ARMA_ERR_INVALID_ARGUMENT);
        assert_eq!(arma_put(0, e.addr, data.as_ptr().cast(), 17), ARMA_ERR_NOT_EXPOSED);
        assert!(last_error().contains(&format!("{:#x}", e.addr)), "{}", last_error());
        assert_eq!(arma_unexpose(e), ARMA_OK);

        assert_eq!(arma_put(-1, at, data.as_ptr().cast(), 1), ARMA_ERR_INVALID_RANK);
        assert_eq!(arma_add(0, at, 1), ARMA_ERR_MISALIGNED); // `at` is byte 4095 of the segment
        assert_eq!(arma_seg_free(seg), ARMA_OK);
        assert_eq!(arma_finalize(), ARMA_OK);
        assert_eq!(arma_flush_all(), ARMA_ERR_FINALIZED);
        assert_eq!(arma_init(), ARMA_ERR_FINALIZED);
        assert_eq!(arma_rank(), 0);
    }
}
