//! Water on the object DSM (the Jackal paper's first application, Fig. 7): an N-squared
//! molecular dynamics of three-atom molecules. The data is laid out as the paper's Java Water
//! lays it out — per molecule and per order (position, velocity, force) a small array of
//! doubles per dimension, `double[NUM_DIMENSIONS][NUM_ATOMS]`, each its own region of 24
//! bytes, homed at the rank that owns the molecule — so the protocols move tens of thousands
//! of tiny regions, as the paper says Water makes them do.
//!
//! ```text
//! every step:
//!   forces:  for my molecules i: intra(i); for j in the next half of the ring: inter(i, j)
//!            (positions read through the DSM; contributions summed in private arrays)
//!            for every molecule m I contributed to: lock(m); force[m] += mine; unlock(m)
//!   barrier
//!   move:    for my molecules: velocity += force / mass * dt; position += velocity * dt;
//!            force = 0
//!   barrier
//! ```
//! This is SPLASH-2 Water-nsquared's sharing pattern (the ring of pairs, the per-molecule
//! locks on the force accumulation, two barriers per step), not its physics: bonds are
//! harmonic, the intermolecular forces Lennard-Jones plus Coulomb with a cutoff, and the
//! integrator a plain Euler step (`physics.rs`). `serial` runs the same computation on one
//! process; the DSM run must end within rounding of it.

pub mod physics;

use activerma::{Error, Result};
use activerma_dsm::{Dsm, GlobalRef};
use physics::Mol;
use std::time::Instant;

#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub molecules: usize,
    pub steps: usize,
    pub dt: f64,
}

impl Params {
    /// The paper's size: 1728 molecules.
    pub fn paper(steps: usize) -> Params {
        Params { molecules: 1728, steps, dt: 2e-4 }
    }
}

pub struct Outcome {
    /// Every molecule's final position (read through the DSM by this rank).
    pub positions: Vec<Mol>,
    /// Wall time of the steps (from the barrier before the first to the one after the last).
    pub seconds: f64,
}

/// Position, velocity and force of a molecule: the three orders.
const ORDERS: usize = 3;
const POS: usize = 0;
const VEL: usize = 1;
const FRC: usize = 2;

/// The molecules rank `r` of `n` owns.
fn owned(r: usize, n: usize, count: usize) -> std::ops::Range<usize> {
    r * count / n..(r + 1) * count / n
}

/// Where molecule m's order-o dimension-d array is in the directory.
fn slot(m: usize, o: usize, d: usize) -> usize {
    (m * ORDERS + o) * 3 + d
}

/// The same computation on one process.
pub fn serial(p: Params) -> Vec<Mol> {
    let n = p.molecules;
    let mut pos: Vec<Mol> = (0..n).map(|m| physics::start(m, n)).collect();
    let mut vel = vec![[[0.0; 3]; 3]; n];
    for _ in 0..p.steps {
        let mut frc = vec![[[0.0; 3]; 3]; n];
        for i in 0..n {
            physics::intra(&pos[i], &mut frc[i]);
            for j in physics::partners(i, n) {
                let (mut fi, mut fj) = (frc[i], frc[j]);
                physics::inter(&pos[i], &pos[j], &mut fi, &mut fj);
                (frc[i], frc[j]) = (fi, fj);
            }
        }
        for m in 0..n {
            physics::advance(&mut pos[m], &mut vel[m], &frc[m], p.dt);
        }
    }
    pos
}

fn read_mol(dsm: &Dsm, dir: &[GlobalRef], m: usize, o: usize) -> Result<Mol> {
    let mut out = [[0.0; 3]; 3];
    for (d, row) in out.iter_mut().enumerate() {
        let v = dsm.read(dir[slot(m, o, d)])?;
        for (a, x) in row.iter_mut().enumerate() {
            *x = v.get(a)?;
        }
    }
    Ok(out)
}

fn write_mol(dsm: &Dsm, dir: &[GlobalRef], m: usize, o: usize, value: &Mol) -> Result<()> {
    for (d, row) in value.iter().enumerate() {
        let mut v = dsm.write(dir[slot(m, o, d)])?;
        for (a, x) in row.iter().enumerate() {
            v.set(a, *x)?;
        }
    }
    Ok(())
}

/// Sets up the molecules (collective: every rank allocates its own), runs the steps, and reads
/// every final position.
pub fn run(dsm: &mut Dsm, p: Params) -> Result<Outcome> {
    let (me, n) = (dsm.world().rank(), dsm.world().size());
    let count = p.molecules;
    let mine = owned(me, n, count);
    // Every rank allocates its molecules' arrays and enters them in a directory at rank 0
    // (itself a DSM array: the paper's MoleculeEnsemble of references).
    let entries = count * ORDERS * 3;
    let dir_array = dsm.share_array(0, if me == 0 { Some(dsm.alloc_array(entries * 8)?) } else { None })?;
    for m in mine.clone() {
        let start = physics::start(m, count);
        for o in 0..ORDERS {
            for (d, row) in start.iter().enumerate() {
                let r = dsm.alloc(24)?;
                if o == POS {
                    let mut v = dsm.write(r)?;
                    for (a, x) in row.iter().enumerate() {
                        v.set(a, *x)?;
                    }
                }
                let (chunk, at) = dir_array.locate((slot(m, o, d) * 8) as u64)?;
                dsm.write(chunk)?[at..at + 8].copy_from_slice(&r.to_bits().to_le_bytes());
            }
        }
    }
    dsm.barrier()?;
    let mut dir = Vec::with_capacity(entries);
    for e in 0..entries {
        let (chunk, at) = dir_array.locate((e * 8) as u64)?;
        let v = dsm.read(chunk)?;
        dir.push(GlobalRef::from_bits(u64::from_le_bytes(v[at..at + 8].try_into().unwrap())));
    }
    dsm.barrier()?;
    let t0 = Instant::now();
    for _ in 0..p.steps {
        step(dsm, &dir, &mine, count, p.dt)?;
    }
    let seconds = t0.elapsed().as_secs_f64();
    let positions = (0..count).map(|m| read_mol(dsm, &dir, m, POS)).collect::<Result<Vec<_>>>()?;
    dsm.barrier()?;
    Ok(Outcome { positions, seconds })
}

fn step(dsm: &mut Dsm, dir: &[GlobalRef], mine: &std::ops::Range<usize>, count: usize, dt: f64) -> Result<()> {
    // Forces: positions read once per step (the copies are fetched on first access).
    let mut pos: Vec<Option<Mol>> = vec![None; count];
    let mut acc: Vec<Option<Mol>> = vec![None; count];
    for i in mine.clone() {
        let pi = read_mol(dsm, dir, i, POS)?;
        pos[i] = Some(pi);
        let mut fi = acc[i].unwrap_or([[0.0; 3]; 3]);
        physics::intra(&pi, &mut fi);
        for j in physics::partners(i, count) {
            let pj = match pos[j] {
                Some(pj) => pj,
                None => *pos[j].insert(read_mol(dsm, dir, j, POS)?),
            };
            let mut fj = acc[j].unwrap_or([[0.0; 3]; 3]);
            if physics::inter(&pi, &pj, &mut fi, &mut fj) {
                acc[j] = Some(fj);
            }
        }
        acc[i] = Some(fi);
    }
    // Each contribution into the molecule's shared force, under its lock.
    for (m, f) in acc.iter().enumerate() {
        let Some(f) = f else { continue };
        let lock = dir[slot(m, FRC, 0)];
        dsm.lock(lock)?;
        let mut sum = read_mol(dsm, dir, m, FRC)?;
        for d in 0..3 {
            for a in 0..3 {
                sum[d][a] += f[d][a];
            }
        }
        write_mol(dsm, dir, m, FRC, &sum)?;
        dsm.unlock(lock)?;
    }
    dsm.barrier()?;
    for m in mine.clone() {
        let (mut p, mut v, f) = (read_mol(dsm, dir, m, POS)?, read_mol(dsm, dir, m, VEL)?, read_mol(dsm, dir, m, FRC)?);
        physics::advance(&mut p, &mut v, &f, dt);
        write_mol(dsm, dir, m, POS, &p)?;
        write_mol(dsm, dir, m, VEL, &v)?;
        write_mol(dsm, dir, m, FRC, &[[0.0; 3]; 3])?;
    }
    dsm.barrier()
}

/// The largest difference between two sets of positions, relative to the box's size.
pub fn deviation(a: &[Mol], b: &[Mol]) -> Result<f64> {
    if a.len() != b.len() {
        return Err(Error::InvalidArgument(format!("water: {} molecules against {}", a.len(), b.len())));
    }
    let mut worst: f64 = 0.0;
    for (x, y) in a.iter().zip(b) {
        for d in 0..3 {
            for k in 0..3 {
                worst = worst.max((x[d][k] - y[d][k]).abs());
            }
        }
    }
    Ok(worst / physics::SPACING)
}
