//! Diffs: the bytes a writer changed in a copy since its twin (the copy as it was at the
//! first write of the interval). Exact to the byte, because several ranks may write
//! different bytes of one region in one interval (multiple writers): a diff that carried an
//! unchanged byte would overwrite another writer's change of it at the home.
//!
//! Encoded as ranges `[offset u32][length u32][bytes]`, one after another.

/// Appends the ranges where `copy` differs from `twin` to `out`; returns how many.
pub(crate) fn encode(copy: &[u8], twin: &[u8], out: &mut Vec<u8>) -> usize {
    debug_assert_eq!(copy.len(), twin.len());
    let n = copy.len();
    let (mut i, mut ranges) = (0, 0);
    while i < n {
        // Equal words are skipped eight bytes at a time.
        if i + 8 <= n && copy[i..i + 8] == twin[i..i + 8] {
            i += 8;
            continue;
        }
        if copy[i] == twin[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < n && copy[i] != twin[i] {
            i += 1;
        }
        out.extend_from_slice(&(start as u32).to_le_bytes());
        out.extend_from_slice(&((i - start) as u32).to_le_bytes());
        out.extend_from_slice(&copy[start..i]);
        ranges += 1;
    }
    ranges
}

/// The ranges of an encoded diff: (offset, bytes). Refuses a diff that runs past `len` bytes
/// or ends inside a range.
pub(crate) fn ranges(mut diff: &[u8], len: usize) -> Result<Vec<(usize, &[u8])>, String> {
    let mut out = Vec::new();
    while !diff.is_empty() {
        if diff.len() < 8 {
            return Err("a diff ends inside a range header".into());
        }
        let off = u32::from_le_bytes(diff[..4].try_into().unwrap()) as usize;
        let l = u32::from_le_bytes(diff[4..8].try_into().unwrap()) as usize;
        if diff.len() < 8 + l || off + l > len {
            return Err(format!("a diff range of {l} bytes at {off} runs past the region's {len} bytes or the message"));
        }
        out.push((off, &diff[8..8 + l]));
        diff = &diff[8 + l..];
    }
    Ok(out)
}

/// Writes every range of `diff` into `dst` (the region at the home, a copy, a twin).
pub(crate) fn apply(diff: &[u8], dst: &mut [u8]) -> Result<(), String> {
    for (off, bytes) in ranges(diff, dst.len())? {
        dst[off..off + bytes.len()].copy_from_slice(bytes);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn two_writers_merge_byte_exactly() {
        let base: Vec<u8> = (0..100u8).collect();
        let (mut a, mut b) = (base.clone(), base.clone());
        a[0] = 200;
        a[15] = 201;
        b[8] = 202; // between a's changes, in the same 16 bytes
        b[99] = 203;
        let (mut da, mut db) = (Vec::new(), Vec::new());
        assert_eq!(encode(&a, &base, &mut da), 2);
        assert_eq!(encode(&b, &base, &mut db), 2);
        let mut home = base.clone();
        apply(&da, &mut home).unwrap();
        apply(&db, &mut home).unwrap();
        let mut want = base;
        (want[0], want[15], want[8], want[99]) = (200, 201, 202, 203);
        assert_eq!(home, want);
    }

    #[test]
    fn random_changes_round_trip() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for len in [0, 1, 7, 8, 9, 64, 1000] {
            let twin: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            let mut copy = twin.clone();
            for _ in 0..len / 5 {
                let i = rng.gen_range(0..len);
                copy[i] = copy[i].wrapping_add(1);
            }
            let mut d = Vec::new();
            encode(&copy, &twin, &mut d);
            let mut out = twin.clone();
            apply(&d, &mut out).unwrap();
            assert_eq!(out, copy, "len {len}");
        }
    }

    #[test]
    fn bad_diffs_are_refused() {
        let mut d = Vec::new();
        encode(&[1, 2, 3], &[0, 0, 0], &mut d);
        assert!(apply(&d, &mut [0u8; 2]).is_err(), "runs past the region");
        assert!(apply(&d[..d.len() - 1], &mut [0u8; 3]).is_err(), "cut short");
    }
}
