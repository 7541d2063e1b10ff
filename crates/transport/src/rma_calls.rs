//! The MPI conduit's choice of the MPI call that moves a contiguous transfer to or from
//! another host's segment: the one-sided call itself (MPI_Put, MPI_Rget) or its accumulate
//! twin (MPI_Accumulate with MPI_REPLACE, MPI_Rget_accumulate with MPI_NO_OP), which moves the
//! same bytes. Which one is faster depends on the MPI, the network and the size, by up to 4x
//! either way: over TCP between two emulated hosts (`bench/mpi_probes/rma_calls.c`, its header
//! says how to run it) MPICH's UCX moves a native put as emulated RDMA — the data, then a flush
//! handshake — and an accumulate as one active message answered once applied, so an 8 B put
//! takes 1.7x as long as its twin and a 32 KiB one 4x, but a 1 MiB one half as long; Open
//! MPI's osc/ucx is the other way round (its twins 2-4x slower up to 4 KiB). So with
//! ACTIVERMA_MPI_RMA_CALLS=auto each rank measures both calls on its first transfers of each
//! size class, SAMPLES of each, and keeps the one with the lower median; `native` and
//! `accumulate` fix the choice. Above CHOSEN_MAX bytes the native call moves everything.
//!
//!   call(len):   class = size class of len (None above CHOSEN_MAX: Native, no sample)
//!                chosen? -> it; else the call with fewer samples (Native first), sampled
//!   record(len, call, ns): add the sample; once both have SAMPLES, choose the lower median
//!
//! A put's sample runs from its issue to the flush that completes it, taken only when it was
//! the one put of that flush (`PutsSinceFlush`); gets are measured by a burst of both calls at
//! the first get of a class (mpi/started.rs), since a get's wait may follow computing.

use std::fmt;
use std::time::Instant;

/// The two ways to move a contiguous transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// MPI_Put / MPI_Rget.
    Native,
    /// MPI_Accumulate(MPI_REPLACE) / MPI_Rget_accumulate(MPI_NO_OP).
    Accumulate,
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Call::Native => "native",
            Call::Accumulate => "accumulate",
        })
    }
}

/// Samples of each call per size class before choosing.
pub const SAMPLES: usize = 5;
/// Largest transfer whose call is chosen; larger ones are native (over TCP a 1 MiB accumulate
/// took 1.5-2x the native call on MPICH, and no faster on Open MPI).
pub const CHOSEN_MAX: usize = 256 << 10;
/// Size classes: up to 64 B, then up to 4x the previous bound, to CHOSEN_MAX.
const CLASSES: usize = 7;

/// The choice for one kind of transfer (puts, or gets) of one rank.
pub struct Chooser {
    fixed: Option<Call>,
    classes: [Class; CLASSES],
}

#[derive(Default)]
struct Class {
    native: Vec<u64>,
    accumulate: Vec<u64>,
    chosen: Option<Call>,
}

impl Default for Chooser {
    /// Measuring ("auto").
    fn default() -> Chooser {
        Chooser::new("auto")
    }
}

impl Chooser {
    /// From the setting's value: "auto" measures, "native" / "accumulate" fix the call.
    pub fn new(setting: &str) -> Chooser {
        let fixed = match setting {
            "native" => Some(Call::Native),
            "accumulate" => Some(Call::Accumulate),
            _ => None,
        };
        Chooser { fixed, classes: Default::default() }
    }

    /// The call that moves `len` bytes, and whether its time is to be recorded (a sample).
    pub fn call(&self, len: usize) -> (Call, bool) {
        if let Some(call) = self.fixed {
            return (call, false);
        }
        let Some(class) = class_of(len).map(|c| &self.classes[c]) else {
            return (Call::Native, false);
        };
        match class.chosen {
            Some(call) => (call, false),
            None if class.accumulate.len() < class.native.len() => (Call::Accumulate, true),
            None => (Call::Native, true),
        }
    }

    /// A sample: `call` moved `len` bytes in `nanos`. Chooses once both calls have SAMPLES.
    pub fn record(&mut self, len: usize, call: Call, nanos: u64) {
        let Some(class) = class_of(len).map(|c| &mut self.classes[c]) else {
            return;
        };
        if class.chosen.is_some() {
            return;
        }
        match call {
            Call::Native => class.native.push(nanos),
            Call::Accumulate => class.accumulate.push(nanos),
        }
        if class.native.len() >= SAMPLES && class.accumulate.len() >= SAMPLES {
            class.chosen = Some(if median(&mut class.accumulate) < median(&mut class.native) { Call::Accumulate } else { Call::Native });
        }
    }

    /// What was chosen so far, per size class: (largest size of the class, the call), for
    /// ACTIVERMA_VERBOSE and tests.
    pub fn chosen(&self) -> Vec<(usize, Call)> {
        self.classes.iter().enumerate().filter_map(|(i, c)| c.chosen.map(|call| (class_bound(i), call))).collect()
    }
}

/// The puts since the last flush, as far as timing them goes: a put issued alone and then
/// flushed is a sample of its call (issue to flush returned); puts that share a flush are not
/// (the flush's time is theirs together), and nor is a put completed by a flush of another rank.
#[derive(Default)]
pub struct PutsSinceFlush(Since);

#[derive(Default)]
enum Since {
    #[default]
    Nothing,
    One {
        len: usize,
        call: Call,
        rank: usize,
        at: Option<Instant>,
    },
    More,
}

impl PutsSinceFlush {
    /// A put of `len` bytes to `rank` by `call` was issued; `sample`: the chooser wants its time.
    pub fn issued(&mut self, len: usize, call: Call, rank: usize, sample: bool) {
        self.0 = match self.0 {
            Since::Nothing => Since::One { len, call, rank, at: sample.then(Instant::now) },
            _ => Since::More,
        };
    }

    /// A flush of `rank` (None: of every rank) returned: the sample it completed, if any, as
    /// (bytes, call, ns). Puts to other ranks stay pending.
    pub fn flushed(&mut self, rank: Option<usize>) -> Option<(usize, Call, u64)> {
        if let Since::One { rank: to, .. } = self.0 {
            if rank.is_some_and(|r| r != to) {
                return None;
            }
        }
        match std::mem::take(&mut self.0) {
            Since::One { len, call, at: Some(at), .. } => Some((len, call, at.elapsed().as_nanos() as u64)),
            _ => None,
        }
    }
}

fn class_of(len: usize) -> Option<usize> {
    (len <= CHOSEN_MAX).then(|| (0..CLASSES).find(|&i| len <= class_bound(i)).expect("CHOSEN_MAX is the last bound"))
}

fn class_bound(i: usize) -> usize {
    64 << (2 * i)
}

fn median(samples: &mut [u64]) -> u64 {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chooser` samples for `len` until it chooses, the calls costing `native` and
    /// `accumulate` ns (the first sample of each `slow_first` ns: a cold start).
    fn calibrate(chooser: &mut Chooser, len: usize, native: u64, accumulate: u64, slow_first: u64) -> usize {
        let mut calls = 0;
        while let (call, true) = chooser.call(len) {
            let first = calls < 2;
            let ns = match call {
                Call::Native => native,
                Call::Accumulate => accumulate,
            };
            chooser.record(len, call, if first { slow_first } else { ns });
            calls += 1;
            assert!(calls <= 2 * SAMPLES, "no choice after {calls} samples");
        }
        calls
    }

    #[test]
    fn each_size_class_keeps_the_faster_call() {
        let mut c = Chooser::new("auto");
        assert_eq!(calibrate(&mut c, 8, 17_000, 10_000, 900_000), 2 * SAMPLES);
        assert_eq!(c.call(8), (Call::Accumulate, false));
        assert_eq!(c.call(64), (Call::Accumulate, false), "the same class");
        // Another class is measured on its own, and may choose otherwise.
        assert_eq!(c.call(65), (Call::Native, true));
        calibrate(&mut c, 65_536, 40_000, 60_000, 1);
        assert_eq!(c.call(65_536), (Call::Native, false));
        assert_eq!(c.chosen(), vec![(64, Call::Accumulate), (65_536, Call::Native)]);
    }

    #[test]
    fn calls_alternate_while_measuring() {
        let mut c = Chooser::new("auto");
        let mut seen = Vec::new();
        for _ in 0..4 {
            let (call, sample) = c.call(1000);
            assert!(sample);
            seen.push(call);
            c.record(1000, call, 5);
        }
        assert_eq!(seen, [Call::Native, Call::Accumulate, Call::Native, Call::Accumulate]);
    }

    #[test]
    fn large_transfers_and_fixed_settings_are_not_measured() {
        let c = Chooser::new("auto");
        assert_eq!(c.call(CHOSEN_MAX + 1), (Call::Native, false));
        assert!(c.call(CHOSEN_MAX).1);
        assert_eq!(Chooser::new("native").call(8), (Call::Native, false));
        assert_eq!(Chooser::new("accumulate").call(8), (Call::Accumulate, false));
        assert_eq!(Chooser::new("accumulate").call(1 << 30), (Call::Accumulate, false));
    }

    #[test]
    fn only_a_put_flushed_alone_is_a_sample() {
        let mut p = PutsSinceFlush::default();
        p.issued(8, Call::Accumulate, 3, true);
        assert_eq!(p.flushed(Some(2)), None, "another rank's flush does not complete it");
        let (len, call, _) = p.flushed(Some(3)).expect("flushed alone: a sample");
        assert_eq!((len, call), (8, Call::Accumulate));
        assert_eq!(p.flushed(None), None, "taken once");
        p.issued(8, Call::Native, 3, true);
        p.issued(8, Call::Native, 3, true);
        assert_eq!(p.flushed(None), None, "two puts share the flush");
        p.issued(8, Call::Native, 1, false);
        assert_eq!(p.flushed(None), None, "not wanted as a sample");
        p.issued(8, Call::Native, 1, true);
        assert!(p.flushed(None).is_some(), "a flush of every rank completes it");
    }

    #[test]
    fn a_tie_keeps_the_native_call() {
        let mut c = Chooser::new("auto");
        calibrate(&mut c, 100, 7, 7, 7);
        assert_eq!(c.call(100), (Call::Native, false));
    }
}
