//! The regular shape of a list of pieces, when it has one: equal pieces whose starts nest as
//! arithmetic progressions (a strided patch of any number of levels is one). The MPI conduit
//! describes such a list to MPI as nested vector datatypes — a few integers — instead of an
//! indexed datatype of one entry per piece, which the library ships to the target and walks
//! there: over MPICH (UCX over TCP) a strided get of 1024 rows of 64 B took 2x as long with
//! the indexed description as with the vector one (bench/armci_peers/run.sh --hosts mpich).

/// Pieces of `len` bytes whose starts are `first` plus every combination of `k * stride` over
/// the `levels`, innermost first, each (count >= 2, stride > 0 in bytes).
#[derive(Debug, PartialEq, Eq)]
pub struct Nest {
    pub first: usize,
    pub len: usize,
    pub levels: Vec<(usize, usize)>,
}

impl Nest {
    /// The shape of `pieces` (start, bytes), in their order; None when it has none (lengths
    /// differ, or starts that do not nest, go backwards or repeat). Adjacent innermost pieces
    /// become one longer piece.
    pub fn of(pieces: &[(usize, usize)]) -> Option<Nest> {
        let (first, len) = *pieces.first()?;
        if len == 0 || pieces.iter().any(|p| p.1 != len) {
            return None;
        }
        let mut starts: Vec<usize> = pieces.iter().map(|p| p.0).collect();
        let mut nest = Nest { first, len, levels: Vec::new() };
        while starts.len() > 1 {
            let stride = starts[1].checked_sub(starts[0]).filter(|&s| s > 0)?;
            let run = 1 + starts.windows(2).take_while(|w| w[1].checked_sub(w[0]) == Some(stride)).count();
            let regular = starts.len().is_multiple_of(run)
                && starts.chunks(run).all(|block| block.windows(2).all(|w| w[1].checked_sub(w[0]) == Some(stride)));
            if !regular {
                return None;
            }
            if nest.levels.is_empty() && stride == nest.len {
                nest.len *= run;
            } else {
                nest.levels.push((run, stride));
            }
            starts = starts.into_iter().step_by(run).collect();
        }
        Some(nest)
    }

    /// Every piece, in order (what `of` read back; for tests and checks).
    pub fn pieces(&self) -> Vec<(usize, usize)> {
        let mut starts = vec![self.first];
        for &(count, stride) in self.levels.iter().rev() {
            starts = starts.iter().flat_map(|&s| (0..count).map(move |k| s + k * stride)).collect();
        }
        starts.into_iter().map(|s| (s, self.len)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of `row` bytes: `counts` per level (innermost first) at `strides`.
    fn patch(first: usize, row: usize, counts: &[usize], strides: &[usize]) -> Vec<(usize, usize)> {
        Nest { first, len: row, levels: counts.iter().copied().zip(strides.iter().copied()).collect() }.pieces()
    }

    #[test]
    fn strided_patches_of_one_to_four_levels_are_found_again() {
        let cases: [(&[usize], &[usize]); 4] =
            [(&[1024], &[128]), (&[16, 8], &[100, 4096]), (&[3, 5, 7], &[64, 1000, 9000]), (&[2, 2, 2, 2], &[10, 30, 70, 200])];
        for (counts, strides) in cases {
            let pieces = patch(4096, 8, counts, strides);
            let nest = Nest::of(&pieces).unwrap_or_else(|| panic!("{counts:?} {strides:?}: no shape found"));
            assert_eq!(nest.pieces(), pieces, "{counts:?} {strides:?}");
            assert_eq!(nest.levels.len(), counts.len(), "{counts:?} {strides:?}: {nest:?}");
        }
    }

    #[test]
    fn adjacent_rows_become_one_piece() {
        let rows = patch(0, 64, &[16], &[64]);
        assert_eq!(Nest::of(&rows), Some(Nest { first: 0, len: 1024, levels: vec![] }));
        // Rows adjacent within a plane, planes apart: one piece per plane.
        let planes = patch(512, 64, &[4, 3], &[64, 1000]);
        assert_eq!(Nest::of(&planes), Some(Nest { first: 512, len: 256, levels: vec![(3, 1000)] }));
        assert_eq!(Nest::of(&[(7, 5)]), Some(Nest { first: 7, len: 5, levels: vec![] }));
    }

    #[test]
    fn irregular_lists_have_no_shape() {
        let irregular: [&[(usize, usize)]; 6] = [
            &[],
            &[(0, 8), (16, 4)],                                         // lengths differ
            &[(0, 8), (16, 8), (40, 8)],                                // strides differ
            &[(64, 8), (0, 8)],                                         // backwards
            &[(0, 8), (0, 8)],                                          // repeated
            &[(0, 8), (16, 8), (100, 8), (116, 8), (130, 8), (146, 8)], // outer step differs
        ];
        for pieces in irregular {
            assert_eq!(Nest::of(pieces), None, "{pieces:?}");
        }
        assert_eq!(Nest::of(&[(0, 0), (8, 0)]), None, "empty pieces");
    }
}
