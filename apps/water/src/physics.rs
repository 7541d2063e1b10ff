//! The forces, shared by the DSM run and the serial reference so that both compute the same
//! thing: a rigid-ish water model with harmonic bonds inside a molecule, and between molecules
//! Lennard-Jones on the oxygens plus Coulomb on every atom pair, cut off at `CUTOFF` (by the
//! oxygens' distance, as SPLASH's Water does). Units: Å, atomic masses, kcal/mol.
//!
//! A molecule is 3 atoms (H, O, H) x 3 dimensions: `[[f64; 3]; 3]` indexed [dimension][atom],
//! the paper's `double[NUM_DIMENSIONS][NUM_ATOMS]`.

pub type Mol = [[f64; 3]; 3];

pub const H1: usize = 0;
pub const O: usize = 1;
pub const H2: usize = 2;
pub const MASS: [f64; 3] = [1.008, 15.999, 1.008];
const CHARGE: [f64; 3] = [0.41, -0.82, 0.41];
const COULOMB: f64 = 332.06;
const LJ_EPS: f64 = 0.155;
const LJ_SIGMA: f64 = 3.166;
const BOND_K: f64 = 450.0;
const BOND_R: f64 = 1.0;
const HH_K: f64 = 55.0;
const HH_R: f64 = 1.633;
pub const CUTOFF: f64 = 6.5;
/// Lattice spacing of the starting positions.
pub const SPACING: f64 = 3.1;

fn atom(m: &Mol, a: usize) -> [f64; 3] {
    [m[0][a], m[1][a], m[2][a]]
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn norm2(d: [f64; 3]) -> f64 {
    d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
}

fn add_force(f: &mut Mol, a: usize, d: [f64; 3], s: f64) {
    for k in 0..3 {
        f[k][a] += s * d[k];
    }
}

/// The starting position of molecule `m` of `count`: on a cubic lattice, the hydrogens at a
/// fixed angle, slightly perturbed (deterministically) so that nothing is symmetric.
pub fn start(m: usize, count: usize) -> Mol {
    let side = (count as f64).cbrt().ceil() as usize;
    let (x, y, z) = (m % side, m / side % side, m / (side * side));
    let jitter = |k: usize| (((m * 7 + k * 13) % 17) as f64 - 8.0) * 0.004;
    let o = [x as f64 * SPACING + jitter(0), y as f64 * SPACING + jitter(1), z as f64 * SPACING + jitter(2)];
    let mut p = [[0.0; 3]; 3];
    for k in 0..3 {
        p[k][O] = o[k];
    }
    let h = [[0.8, 0.6, 0.0], [-0.8, 0.6, 0.0]];
    for (a, off) in [(H1, h[0]), (H2, h[1])] {
        for k in 0..3 {
            p[k][a] = o[k] + off[k] + jitter(a + 3 + k) * 0.5;
        }
    }
    p
}

/// Forces inside one molecule (its bonds), added to `f`.
pub fn intra(p: &Mol, f: &mut Mol) {
    for (a, b, k, r0) in [(O, H1, BOND_K, BOND_R), (O, H2, BOND_K, BOND_R), (H1, H2, HH_K, HH_R)] {
        let d = sub(atom(p, a), atom(p, b));
        let r = norm2(d).sqrt();
        let s = -k * (r - r0) / r;
        add_force(f, a, d, s);
        add_force(f, b, d, -s);
    }
}

/// Forces between molecules `pi` and `pj` (if their oxygens are within the cutoff): added to
/// `fi`, and with the opposite sign to `fj`. Returns whether they interacted.
pub fn inter(pi: &Mol, pj: &Mol, fi: &mut Mol, fj: &mut Mol) -> bool {
    let doo = sub(atom(pi, O), atom(pj, O));
    let roo2 = norm2(doo);
    if roo2 > CUTOFF * CUTOFF {
        return false;
    }
    let sr2 = LJ_SIGMA * LJ_SIGMA / roo2;
    let sr6 = sr2 * sr2 * sr2;
    let lj = 24.0 * LJ_EPS * (2.0 * sr6 * sr6 - sr6) / roo2;
    add_force(fi, O, doo, lj);
    add_force(fj, O, doo, -lj);
    for (a, qa) in CHARGE.iter().enumerate() {
        for (b, qb) in CHARGE.iter().enumerate() {
            let d = sub(atom(pi, a), atom(pj, b));
            let r2 = norm2(d);
            let s = COULOMB * qa * qb / (r2 * r2.sqrt());
            add_force(fi, a, d, s);
            add_force(fj, b, d, -s);
        }
    }
    true
}

/// The partners of molecule `i` among `count`: the next half of the ring (SPLASH's
/// Water-nsquared: each pair once; with an even count the opposite molecule is taken by the
/// lower half only).
pub fn partners(i: usize, count: usize) -> impl Iterator<Item = usize> {
    let half = count / 2;
    (1..=half).filter(move |&k| !(count.is_multiple_of(2) && k == half && i >= half)).map(move |k| (i + k) % count)
}

/// One step for one molecule: velocities from forces, positions from velocities.
pub fn advance(p: &mut Mol, v: &mut Mol, f: &Mol, dt: f64) {
    for k in 0..3 {
        for a in 0..3 {
            v[k][a] += f[k][a] / MASS[a] * dt;
            p[k][a] += v[k][a] * dt;
        }
    }
}
