//! The CPU copies that move the runtime's data, in two forms:
//!
//! `copy_bytes` is memmove, except where glibc's memcpy is pathologically slow: between 4 KiB
//! and about 1 MiB glibc 2.36 copies with `rep movsb`, and on AMD Zen (this project's EPYC
//! VMs, which have ERMS and FSRM) `rep movsb` runs at ~2.2 GB/s instead of 40-45 GB/s when
//! the destination lies 1-31 bytes past the source modulo 4 KiB (`bench/memcpy_alias.c`). That is the common case of a
//! get from a segment (page-aligned) into a malloc'd buffer (glibc's large blocks start 16
//! bytes into a page). There the copy is a loop of 16-byte loads and stores (21-24 GB/s in
//! that probe).
//! `bench armci-overlap` showed it: its 1-D zero-copy get of 64 KiB into a Vec hid 70 % of its
//! time, the copy at issue taking 40 us (docs/design/transfer.md).
//!
//! Up to 16 bytes (an 8-byte put, a counter) the copy is inline: two loads that cover the
//! range, then two stores (memmove's call and size dispatch cost as much as the copy).
//!
//! ```text
//! copy_bytes(src, dst, len):
//!     if len <= 16: load the first and last word of the range (8, 4 or 1 bytes wide; they
//!                   may overlap), then store both: right even when src and dst overlap
//!     if x86-64 and len >= 2 KiB and (dst - src) mod 4096 in 1..32 and the ranges are apart:
//!         64-byte chunks of 4 unaligned 16-byte loads then stores; the tail by memcpy
//!     else memmove
//! ```
//!
//! `copy_streaming` bypasses the caches (non-temporal stores), for streams of puts too large for
//! the last-level cache: the destination lines are written to memory without first being read
//! into the cache (an ordinary copy reads every destination line it writes: a third more
//! memory traffic), and the stream does not evict what the caches hold. A C test of 64 × 1 MiB
//! copies on the AMD EPYC VM of issue 14 moved ~1.45× memcpy's bandwidth this way.
//!
//! ```text
//! copy the bytes up to the first 16-byte boundary of dst normally
//! stream 64-byte chunks (4 unaligned loads, 4 non-temporal stores), then 16-byte ones
//! copy the tail normally; sfence (non-temporal stores are weakly ordered: after the fence
//! they are ordered like ordinary stores, so a Release that follows publishes them)
//! ```

/// Below this, glibc does not use `rep movsb` (its threshold is 2 KiB and up).
const NEAR_ALIAS_MIN: usize = 2048;

/// Copies `len` bytes from `src` to `dst` as `std::ptr::copy` does (the ranges may overlap),
/// avoiding `rep movsb`'s slow case (see the module's notes).
///
/// # Safety
/// As `std::ptr::copy`: `src` readable and `dst` writable for `len` bytes.
#[inline]
pub unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    if len <= 16 {
        // SAFETY: the caller's contract.
        return unsafe { copy_small(src, dst, len) };
    }
    let (s, d) = (src as usize, dst as usize);
    let distance = d.wrapping_sub(s) & 4095;
    let apart = d >= s.saturating_add(len) || s >= d.saturating_add(len);
    if cfg!(target_arch = "x86_64") && len >= NEAR_ALIAS_MIN && (1..32).contains(&distance) && apart {
        // SAFETY: the caller's contract, and the ranges do not overlap.
        unsafe { copy_forward(src, dst, len) }
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy(src, dst, len) }
    }
}

/// At most 16 bytes: every load before any store, so overlapping ranges copy as memmove does.
#[inline(always)]
unsafe fn copy_small(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY (every arm): the loads lie inside src[..len] and the stores inside dst[..len].
    unsafe {
        match len {
            8..=16 => {
                let (a, b) = ((src as *const u64).read_unaligned(), (src.add(len - 8) as *const u64).read_unaligned());
                (dst as *mut u64).write_unaligned(a);
                (dst.add(len - 8) as *mut u64).write_unaligned(b);
            }
            4..=7 => {
                let (a, b) = ((src as *const u32).read_unaligned(), (src.add(len - 4) as *const u32).read_unaligned());
                (dst as *mut u32).write_unaligned(a);
                (dst.add(len - 4) as *mut u32).write_unaligned(b);
            }
            1..=3 => {
                let (a, b, c) = (*src, *src.add(len / 2), *src.add(len - 1));
                *dst = a;
                *dst.add(len / 2) = b;
                *dst.add(len - 1) = c;
            }
            _ => {}
        }
    }
}

/// A forward copy of non-overlapping ranges by 16-byte loads and stores.
#[cold]
unsafe fn copy_forward(src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract; SSE2 is part of x86-64.
    unsafe {
        use std::arch::x86_64::_mm_storeu_si128;
        let (s, d, left) = chunks_of_64(src, dst, len, |to, v| _mm_storeu_si128(to, v));
        std::ptr::copy_nonoverlapping(s, d, left);
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, len)
    };
}

/// Copies the whole 64-byte chunks of `len` bytes by unaligned 16-byte loads and `store`;
/// returns where the rest begins in each range, and its length.
///
/// # Safety
/// `src` readable and `dst` writable for `len` bytes, not overlapping; `store` writes 16 bytes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn chunks_of_64(
    src: *const u8,
    dst: *mut u8,
    len: usize,
    store: impl Fn(*mut std::arch::x86_64::__m128i, std::arch::x86_64::__m128i),
) -> (*const u8, *mut u8, usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128};
    let (mut s, mut d, mut left) = (src, dst, len);
    // SAFETY: every access is inside the first `len` bytes of its range (the caller's contract).
    unsafe {
        while left >= 64 {
            let a = _mm_loadu_si128(s as *const __m128i);
            let b = _mm_loadu_si128(s.add(16) as *const __m128i);
            let c = _mm_loadu_si128(s.add(32) as *const __m128i);
            let e = _mm_loadu_si128(s.add(48) as *const __m128i);
            store(d as *mut __m128i, a);
            store(d.add(16) as *mut __m128i, b);
            store(d.add(32) as *mut __m128i, c);
            store(d.add(48) as *mut __m128i, e);
            (s, d, left) = (s.add(64), d.add(64), left - 64);
        }
    }
    (s, d, left)
}

/// Copies `len` bytes from `src` to `dst` with non-temporal stores where the CPU has them
/// (x86-64; elsewhere an ordinary copy), then fences them.
///
/// # Safety
/// `src` is readable and `dst` writable for `len` bytes, and the two ranges do not overlap.
pub unsafe fn copy_streaming(dst: *mut u8, src: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract; SSE2 is part of x86-64.
    unsafe {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        let head = (dst as usize).wrapping_neg() & 15;
        if len < head + 64 {
            std::ptr::copy_nonoverlapping(src, dst, len);
            return;
        }
        std::ptr::copy_nonoverlapping(src, dst, head);
        let (mut s, mut d, mut left) = chunks_of_64(src.add(head), dst.add(head), len - head, |to, v| _mm_stream_si128(to, v));
        while left >= 16 {
            _mm_stream_si128(d as *mut __m128i, _mm_loadu_si128(s as *const __m128i));
            (s, d, left) = (s.add(16), d.add(16), left - 16);
        }
        std::ptr::copy_nonoverlapping(s, d, left);
        _mm_sfence();
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, len)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_bytes_equals_memmove_near_alias_and_overlapping() {
        let page = 4096;
        let src: Vec<u8> = (0..3 * page as u32).map(|i| (i * 29 + 3) as u8).collect();
        for len in [0, 1, 100, 2047, 2048, 2049, 5000, 8191] {
            for dof in [0, 1, 15, 16, 31, 32, 33, 64] {
                // A destination `dof` bytes past the source modulo a page (the near-alias case).
                let mut dst = vec![0xeeu8; 3 * page + 2 * page];
                let base = dst.as_ptr() as usize;
                let at = (src.as_ptr() as usize + dof).wrapping_sub(base) % page + page;
                // SAFETY: both ranges are inside their buffers and distinct.
                unsafe { copy_bytes(src.as_ptr(), dst.as_mut_ptr().add(at), len) };
                assert_eq!(&dst[at..at + len], &src[..len], "len {len}, distance {dof}");
                assert!(dst[..at].iter().all(|&b| b == 0xee) && dst[at + len..].iter().all(|&b| b == 0xee), "no byte outside");
            }
        }
        // Overlapping ranges keep memmove's meaning, in both directions.
        for shift in [1usize, 16, 31, 4097] {
            let mut buf: Vec<u8> = (0..20000u32).map(|i| i as u8).collect();
            let expect: Vec<u8> = buf[..8192].to_vec();
            // SAFETY: inside the buffer; overlap is allowed.
            unsafe { copy_bytes(buf.as_ptr(), buf.as_mut_ptr().add(shift), 8192) };
            assert_eq!(&buf[shift..shift + 8192], &expect[..], "forward overlap by {shift}");
            let mut buf: Vec<u8> = (0..20000u32).map(|i| i as u8).collect();
            let expect: Vec<u8> = buf[shift..shift + 8192].to_vec();
            // SAFETY: as above.
            unsafe { copy_bytes(buf.as_ptr().add(shift), buf.as_mut_ptr(), 8192) };
            assert_eq!(&buf[..8192], &expect[..], "backward overlap by {shift}");
        }
    }

    #[test]
    fn small_copies_equal_memmove_apart_and_overlapping() {
        for len in 0..=16usize {
            for off in 0..8 {
                let src: Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(37).wrapping_add(5)).collect();
                let mut dst = vec![0xeeu8; 48];
                // SAFETY: both ranges are inside their buffers and distinct.
                unsafe { copy_bytes(src.as_ptr().add(off), dst.as_mut_ptr().add(off + 8), len) };
                assert_eq!(&dst[off + 8..off + 8 + len], &src[off..off + len], "len {len}");
                assert!(dst[..off + 8].iter().all(|&b| b == 0xee) && dst[off + 8 + len..].iter().all(|&b| b == 0xee), "len {len}");
                // Overlapping, both directions: what memmove gives.
                for (from, to) in [(off, off + 3), (off + 3, off)] {
                    let mut buf: Vec<u8> = (0..32u8).collect();
                    let mut want = buf.clone();
                    want.copy_within(from..from + len, to);
                    // SAFETY: inside the buffer; overlap is allowed.
                    unsafe { copy_bytes(buf.as_ptr().add(from), buf.as_mut_ptr().add(to), len) };
                    assert_eq!(buf, want, "len {len}, from {from} to {to}");
                }
            }
        }
    }

    #[test]
    fn streaming_copy_equals_memcpy_at_every_alignment_and_length() {
        let src: Vec<u8> = (0..4096u32).map(|i| (i * 31 + 7) as u8).collect();
        for len in [0, 1, 15, 16, 63, 64, 65, 79, 80, 127, 128, 200, 1000, 3000] {
            for so in 0..17 {
                for dof in 0..17 {
                    let mut dst = vec![0xeeu8; 4096 + 64];
                    // SAFETY: both ranges are inside their buffers and distinct.
                    unsafe { copy_streaming(dst.as_mut_ptr().add(dof), src.as_ptr().add(so), len) };
                    assert_eq!(&dst[dof..dof + len], &src[so..so + len], "len {len}, src +{so}, dst +{dof}");
                    assert!(dst[..dof].iter().all(|&b| b == 0xee) && dst[dof + len..].iter().all(|&b| b == 0xee), "no byte outside");
                }
            }
        }
    }
}
