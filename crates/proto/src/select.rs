//! Protocol selection: the translation table says whether the target address is segment or
//! private memory (and checks protection); the conduit says whether the segment is mapped here.
//! Every choice can be explained (`explain`), and with ACTIVERMA_VERBOSE=1 the first use of each
//! protocol towards each target is printed — never a silent fallback.

use crate::Proto;
use activerma_core::{Error, Rank, Result};
use activerma_mem::{AccessKind, Lookup};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    PutDirect,
    GetDirect,
    PutCma,
    GetCma,
    AtomicDirect,
    AtomicAm,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::PutDirect => "put_direct",
            Protocol::GetDirect => "get_direct",
            Protocol::PutCma => "put_cma",
            Protocol::GetCma => "get_cma",
            Protocol::AtomicDirect => "atomic_direct",
            Protocol::AtomicAm => "atomic_am",
        }
    }

    pub fn why(self) -> &'static str {
        match self {
            Protocol::PutDirect | Protocol::GetDirect => "the address is in the target's segment, which is mapped in this process: one memcpy",
            Protocol::PutCma | Protocol::GetCma => "the address is private memory the target exposed: one cross-memory-attach system call",
            Protocol::AtomicDirect => "the address is in the target's segment, mapped here: a CPU atomic instruction",
            Protocol::AtomicAm => "the address is private memory, which only the target's own CPU can update atomically: a request to the target's progress engine",
        }
    }
}

/// A checked choice; holds the table lookup (and with it the right to touch the memory).
pub struct Choice<'a> {
    pub protocol: Protocol,
    /// Local pointer for direct protocols.
    pub local: *mut u8,
    _lookup: Lookup<'a>,
}

impl Proto {
    #[inline]
    pub(crate) fn choose(&self, rank: Rank, addr: usize, len: usize, kind: AccessKind) -> Result<Choice<'_>> {
        let lookup = self.tables[rank].check(addr, len, kind)?;
        let (protocol, local) = if lookup.private {
            let p = match kind {
                AccessKind::Put => Protocol::PutCma,
                AccessKind::Get => Protocol::GetCma,
                AccessKind::Atomic | AccessKind::AtomicRead => Protocol::AtomicAm,
            };
            (p, std::ptr::null_mut())
        } else {
            let w = self.heaps[rank].ok_or_else(|| Error::Unsupported(format!("rank {rank}'s segment is not mapped here")))?;
            let local = w.translate(addr, len).ok_or(Error::NotExposed { rank, addr, len })?;
            let p = match kind {
                AccessKind::Put => Protocol::PutDirect,
                AccessKind::Get => Protocol::GetDirect,
                AccessKind::Atomic | AccessKind::AtomicRead => Protocol::AtomicDirect,
            };
            (p, local)
        };
        if self.verbose {
            self.note_choice(protocol, rank);
        }
        Ok(Choice { protocol, local, _lookup: lookup })
    }

    #[cold]
    fn note_choice(&self, p: Protocol, rank: Rank) {
        if self.seen.lock().unwrap().insert((p, rank)) {
            eprintln!("activerma: rank {} -> rank {rank}: {} ({})", self.conduit.rank(), p.name(), p.why());
        }
    }

    /// Which protocol an operation would use, and why (for `info`, benchmarks and users).
    pub fn explain(&self, rank: Rank, addr: usize, len: usize, kind: AccessKind) -> Result<(Protocol, &'static str)> {
        self.check_rank(rank)?;
        let c = self.choose(rank, addr, len.max(1), kind)?;
        Ok((c.protocol, c.protocol.why()))
    }
}
