//! Protocol selection: the translation table says whether the target address is segment or
//! private memory (and checks protection); the conduit says whether the segment is mapped here.
//! For a rank whose table this process cannot read (another host), segments are checked against
//! our own copy of the segment map — identical on every rank, as allocation is collective — and
//! moved by the conduit's one-sided engine; private memory goes to the target, which checks
//! (and, for a large transfer, registers it for the engine: rendezvous_rma.rs).
//! Private memory on this host moves zero-copy (cross-memory attach) only if every page of the
//! access is REGISTERED in the target's table (a registration hit); otherwise the registration
//! strategy's slow path runs (a miss: bounce or rendezvous, `docs/design/registration.md`).
//! Under firehose the hit is decided by the origin's own firehose table instead (firehose.rs).
//! Every choice can be explained (`explain`), and with ACTIVERMA_VERBOSE=1 the first use of each
//! protocol towards each target is printed — never a silent fallback.

use crate::Proto;
use activerma_core::{Error, Rank, Result};
use activerma_mem::{AccessKind, HeapFast, Lookup};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    PutDirect,
    GetDirect,
    PutCma,
    GetCma,
    AtomicDirect,
    AtomicAm,
    PutRma,
    GetRma,
    AtomicRma,
    PutAm,
    GetAm,
    PutActive,
    GetActive,
    /// A writing atomic on a segment page marked to log puts' metadata (W, WL): the origin's
    /// CPU runs it and appends the write to the target's access log.
    AtomicActive,
    /// Registration miss, strategy bounce: put_am / get_am's code, chosen for another reason.
    PutBounce,
    GetBounce,
    /// Registration miss, strategy rendezvous(-unpin): ask the target to register, then zero-copy.
    PutRendezvous,
    GetRendezvous,
    /// Registration miss, strategy part: zero-copy into unpinned memory; faults NACKed, paged in
    /// by the target, blocks resent (part.rs).
    PutPart,
    GetPart,
    /// Registration miss, strategy firehose: move a firehose (pin at the target), then zero-copy.
    PutFirehose,
    GetFirehose,
    /// Private memory of a rank on another host, a large transfer: the target registers
    /// the range, then the conduit's one-sided engine moves it (rendezvous_rma.rs).
    PutRmaRendezvous,
    GetRmaRendezvous,
    /// Private memory of a rank on another host under firehose or pin-all: a key to the
    /// exposure, (this origin's firehoses there,) then the conduit's one-sided engine
    /// (keyed_rma.rs).
    PutKeyedRma,
    GetKeyedRma,
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
            Protocol::PutRma => "put_rma",
            Protocol::GetRma => "get_rma",
            Protocol::AtomicRma => "atomic_rma",
            Protocol::PutAm => "put_am",
            Protocol::GetAm => "get_am",
            Protocol::PutActive => "put_active",
            Protocol::GetActive => "get_active",
            Protocol::AtomicActive => "atomic_active",
            Protocol::PutBounce => "put_bounce",
            Protocol::GetBounce => "get_bounce",
            Protocol::PutRendezvous => "put_rendezvous",
            Protocol::GetRendezvous => "get_rendezvous",
            Protocol::PutPart => "put_part",
            Protocol::GetPart => "get_part",
            Protocol::PutFirehose => "put_firehose",
            Protocol::GetFirehose => "get_firehose",
            Protocol::PutRmaRendezvous => "put_rma_rendezvous",
            Protocol::GetRmaRendezvous => "get_rma_rendezvous",
            Protocol::PutKeyedRma => "put_keyed_rma",
            Protocol::GetKeyedRma => "get_keyed_rma",
        }
    }

    pub fn why(self) -> &'static str {
        match self {
            Protocol::PutDirect | Protocol::GetDirect => "the address is in the target's segment, which is mapped in this process: one memcpy",
            Protocol::PutCma | Protocol::GetCma => "the address is private memory the target exposed: one cross-memory-attach system call",
            Protocol::AtomicDirect => "the address is in the target's segment, mapped here: a CPU atomic instruction",
            Protocol::AtomicAm => "the address is private memory, which only the target's own CPU can update atomically: a request to the target's progress engine",
            Protocol::PutRma | Protocol::GetRma | Protocol::AtomicRma => {
                "the address is in the segment of a rank on another host: the conduit's one-sided engine moves it (checked against the segment map, which every rank shares)"
            }
            Protocol::PutAm | Protocol::GetAm => {
                "the address is private memory of a rank on another host: the data travels in an active message and the target checks and copies it"
            }
            Protocol::PutActive | Protocol::GetActive => {
                "the target marked a page of the access for Active Access: each page's bits decide whether the bytes are written/read and whether the access is logged into an access log"
            }
            Protocol::AtomicActive => {
                "the target marked the word's page to log puts without their data (W, WL; what incremental checkpoints track): a CPU atomic, logged into the access log as a write of the word"
            }
            Protocol::PutBounce | Protocol::GetBounce => {
                "a page of the target's private memory is not registered and the registration strategy is bounce: the data is copied through the target's pre-registered active-message buffers (fragmented and pipelined), by the target's progress engine"
            }
            Protocol::PutFirehose | Protocol::GetFirehose => {
                "a page of the target's private memory is not registered and the registration strategy is firehose: this origin's firehoses (at most f buckets pinned at the target on its behalf) are moved to cover it with one message (the target unpins released buckets beyond its victim budget and pins the new ones), then one cross-memory-attach call moves the data; if the target cannot pin, the operation bounces"
            }
            Protocol::PutPart | Protocol::GetPart => {
                "the registration strategy is part: nothing is pinned; cross-memory attach moves the data block by block into unpinned memory, and a block that meets a page missing at the target is NACKed, the target pages it in and the block is resent (on its ERR or after a time-out)"
            }
            Protocol::PutRmaRendezvous | Protocol::GetRmaRendezvous => {
                "the address is private memory of a rank on another host and the transfer is at least ACTIVERMA_RMA_RENDEZVOUS_MIN: a request has the target check the range and register it with the conduit (MPI: attach its exposure to the dynamic window; rendezvous strategies also pin), then the conduit's one-sided engine moves the data and a message releases it; if the target refuses for a resource, the data goes through the target as put_am / get_am"
            }
            Protocol::PutKeyedRma | Protocol::GetKeyedRma => {
                "the address is private memory of a rank on another host and the registration strategy keeps registrations (firehose, pin-all): with this origin's key to the exposure (asked for once: the target checks the access, registers the exposure with the conduit and names its protection) and, under firehose, its firehoses there (at most f buckets pinned on its behalf, moved with one message on a miss, none on a hit), the conduit's one-sided engine moves the data; an exposure with Active Access pages, or one the target cannot pin or register, is reached through the target (put_am / get_am)"
            }
            Protocol::PutRendezvous | Protocol::GetRendezvous => {
                "a page of the target's private memory is not registered and the registration strategy is rendezvous: a request asks the target to pin the pages and mark them registered, then one cross-memory-attach call moves the data (rendezvous-unpin: a message unpins them after it; on a pin failure the operation bounces)"
            }
        }
    }
}

/// Why a protocol is being chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pass {
    /// For an access: registration hits and misses are counted.
    Access,
    /// For `explain`: nothing is counted or moved.
    Explain,
    /// A slow path (rendezvous, firehose) has had the target register the range: the table's
    /// REGISTERED bits alone decide whether it may now move zero-copy.
    Registered,
}

/// A checked choice; holds the table lookup (and with it the right to touch the memory).
pub struct Choice<'a> {
    pub protocol: Protocol,
    /// Local pointer for direct protocols.
    pub local: *mut u8,
    lookup: Option<Lookup<'a>>,
}

impl<'a> Choice<'a> {
    /// The table lookup behind a local choice (active protocols walk its pages).
    pub(crate) fn lookup(&self) -> &Lookup<'a> {
        self.lookup.as_ref().expect("a choice made from the target's table")
    }
}

impl Proto {
    /// The segment fast path: where the access goes in this process's mapping of `rank`'s
    /// segment, with what `heap_fast` found, when it is a plain access or an access to pages
    /// marked to log it; None sends the caller to `choose`, which decides every other case and
    /// names every error. Taken only where `segment_views` holds the heap (see `Proto::new`).
    #[inline(always)]
    pub(crate) fn segment_fast(&self, rank: Rank, addr: usize, len: usize, kind: AccessKind) -> Option<(*mut u8, HeapFast<'_>)> {
        let heap = (*self.segment_views.get(rank)?)?;
        if let Some(l) = &self.liveness {
            if !l.usable(rank) {
                return None; // the slow path says why (check_rank)
            }
        }
        let off = addr.wrapping_sub(heap.remote_base);
        if len == 0 || off >= heap.len || len > heap.len - off {
            return None;
        }
        let found = self.tables[rank].as_ref()?.heap_fast(off, len, kind)?;
        // SAFETY: off + len <= heap.len: inside the mapping.
        Some((unsafe { heap.local.add(off) }, found))
    }

    #[inline]
    pub(crate) fn choose(&self, rank: Rank, addr: usize, len: usize, kind: AccessKind) -> Result<Choice<'_>> {
        self.choose_for(rank, addr, len, kind, Pass::Access)
    }

    /// A choice for an access (`Pass::Access`, which records the registration hit or miss), for
    /// `explain` (moves nothing), or for the zero-copy move after a slow path registered the range.
    #[inline]
    pub(crate) fn choose_for(&self, rank: Rank, addr: usize, len: usize, kind: AccessKind, pass: Pass) -> Result<Choice<'_>> {
        let Some(table) = &self.tables[rank] else {
            return self.choose_remote(rank, addr, len, kind);
        };
        let lookup = table.check(addr, len, kind)?;
        if self.iotlb.enabled() {
            self.model_iotlb(rank, addr, len);
        }
        let (protocol, local) = if lookup.active {
            if lookup.private && self.registration_miss(table, &lookup, rank, addr, len, kind, pass) {
                // PART's block copies cannot log: Active Access pages go through the target.
                let p = match self.miss_protocol(kind) {
                    Protocol::PutPart => Protocol::PutBounce,
                    Protocol::GetPart => Protocol::GetBounce,
                    p => p,
                };
                (p, std::ptr::null_mut())
            } else {
                let local = if lookup.private {
                    std::ptr::null_mut()
                } else {
                    let w = self.heaps[rank].ok_or_else(|| Error::Unsupported(format!("rank {rank}'s segment is not mapped here")))?;
                    w.translate(addr, len).ok_or(Error::NotExposed { rank, addr, len })?
                };
                let p = match kind {
                    AccessKind::Put => Protocol::PutActive,
                    AccessKind::Get => Protocol::GetActive,
                    // Only a writing atomic on a W, WL page comes here (the table's check): a
                    // mapped segment's by our CPU, private memory's by the target's, which logs.
                    AccessKind::Atomic | AccessKind::AtomicRead if lookup.private => Protocol::AtomicAm,
                    AccessKind::Atomic | AccessKind::AtomicRead => Protocol::AtomicActive,
                };
                (p, local)
            }
        } else if lookup.private {
            let p = match kind {
                _ if self.registration_miss(table, &lookup, rank, addr, len, kind, pass) => self.miss_protocol(kind),
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
                AccessKind::Atomic | AccessKind::AtomicRead if self.cpu_atomics_coherent => Protocol::AtomicDirect,
                AccessKind::Atomic | AccessKind::AtomicRead => Protocol::AtomicRma,
            };
            (p, local)
        };
        if self.verbose {
            self.note_choice(protocol, rank);
        }
        Ok(Choice { protocol, local, lookup: Some(lookup) })
    }

    /// Private memory of another process on this host: is some page of a put/get not
    /// registered? Atomics are run by the target's CPU (atomic_am) and our own memory is
    /// copied by our CPU: neither uses the zero-copy path, so registration does not apply.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn registration_miss(
        &self,
        table: &activerma_mem::OriginTable,
        lookup: &Lookup,
        rank: Rank,
        addr: usize,
        len: usize,
        kind: AccessKind,
        pass: Pass,
    ) -> bool {
        // Under `none` every exposed page is registered at expose: no per-page walk (the
        // default configuration's private path stays as it was; hits are not counted).
        if self.strategy == activerma_mem::Strategy::None
            || !matches!(kind, AccessKind::Put | AccessKind::Get)
            || rank == self.conduit.rank()
        {
            return false;
        }
        // Firehose: the origin's own firehose table decides (firehose.rs counts its hits and
        // misses), as on a NIC, where an origin holds keys only for the buckets pinned on its
        // own behalf; pages another origin's firehoses keep pinned are no hit for us.
        if self.strategy == activerma_mem::Strategy::Firehose && pass != Pass::Registered {
            return true;
        }
        let hit = table.registered(lookup, addr, len);
        if pass == Pass::Access {
            let s = &self.reg_stats;
            activerma_core::counters::bump(if hit { &s.hits } else { &s.misses }, 1);
        }
        !hit
    }

    /// The slow path of this job's strategy. `none` and `pin-all` register every page at
    /// expose, so they never miss; should it happen, the bounce path is always correct.
    fn miss_protocol(&self, kind: AccessKind) -> Protocol {
        use activerma_mem::Strategy as S;
        match (self.strategy, kind) {
            (S::Rendezvous | S::RendezvousUnpin, AccessKind::Put) => Protocol::PutRendezvous,
            (S::Rendezvous | S::RendezvousUnpin, _) => Protocol::GetRendezvous,
            (S::Part, AccessKind::Put) => Protocol::PutPart,
            (S::Part, _) => Protocol::GetPart,
            (S::Firehose, AccessKind::Put) => Protocol::PutFirehose,
            (S::Firehose, _) => Protocol::GetFirehose,
            (_, AccessKind::Put) => Protocol::PutBounce,
            _ => Protocol::GetBounce,
        }
    }

    /// A rank whose table we cannot read: its segments by one-sided RMA after checking our own
    /// copy of the segment map; anything else through the target.
    fn choose_remote(&self, rank: Rank, addr: usize, len: usize, kind: AccessKind) -> Result<Choice<'_>> {
        let me = self.conduit.rank();
        let (theirs, mine) = (self.conduit.heap_base(rank), self.conduit.heap_base(me));
        let in_heap = addr.checked_sub(theirs).filter(|&off| off.checked_add(len).is_some_and(|end| end <= self.heap_len));
        let protocol = match in_heap {
            Some(off) => {
                // Same offsets, same allocations: check ours, report theirs. Segment pages are
                // read-write on every rank, so a protection or unsupported answer comes from
                // Active Access marks this rank put on its own copy, which say nothing about
                // the target's: the target applies its own (below).
                let own = self.tables[me].as_ref().expect("own table");
                match own.check(mine + off, len, kind) {
                    Ok(_) | Err(Error::Protection { .. } | Error::Unsupported(_)) => {}
                    Err(e) => return Err(retarget(e, rank, addr, len)),
                }
                if self.marks.touches(rank, off, len) {
                    // The target marked pages here: only it knows their bits and can apply them
                    // (an atomic there runs on its CPU, or is refused by its table exactly as
                    // on one host: a protection error without W, unsupported on logged pages).
                    match kind {
                        AccessKind::Put => Protocol::PutAm,
                        AccessKind::Get => Protocol::GetAm,
                        AccessKind::Atomic | AccessKind::AtomicRead => Protocol::AtomicAm,
                    }
                } else {
                    match kind {
                        AccessKind::Put => Protocol::PutRma,
                        AccessKind::Get => Protocol::GetRma,
                        AccessKind::Atomic | AccessKind::AtomicRead => Protocol::AtomicRma,
                    }
                }
            }
            None => match kind {
                AccessKind::Put if self.rma_keys.is_some() => Protocol::PutKeyedRma,
                AccessKind::Get if self.rma_keys.is_some() => Protocol::GetKeyedRma,
                AccessKind::Put if crate::rendezvous_rma::applies(self, len) => Protocol::PutRmaRendezvous,
                AccessKind::Get if crate::rendezvous_rma::applies(self, len) => Protocol::GetRmaRendezvous,
                AccessKind::Put => Protocol::PutAm,
                AccessKind::Get => Protocol::GetAm,
                AccessKind::Atomic | AccessKind::AtomicRead => Protocol::AtomicAm,
            },
        };
        if self.verbose {
            self.note_choice(protocol, rank);
        }
        Ok(Choice { protocol, local: std::ptr::null_mut(), lookup: None })
    }

    /// One modelled translation per page the access touches.
    #[cold]
    pub(crate) fn model_iotlb(&self, rank: Rank, addr: usize, len: usize) {
        let ps = activerma_core::page::page_size();
        for page in addr / ps..=(addr + len.max(1) - 1) / ps {
            let hit = self.iotlb.lookup(rank as u32, page as u64);
            let c = if hit { &self.counters.iotlb_hits } else { &self.counters.iotlb_misses };
            activerma_core::counters::bump(c, 1);
        }
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
        let c = self.choose_for(rank, addr, len.max(1), kind, Pass::Explain)?;
        Ok((c.protocol, c.protocol.why()))
    }
}

/// An error found in our copy of the segment map, restated for the rank and address asked.
fn retarget(e: Error, rank: Rank, addr: usize, len: usize) -> Error {
    match e {
        Error::NotExposed { .. } => Error::NotExposed { rank, addr, len },
        Error::Protection { op, prot, .. } => Error::Protection { rank, addr, len, op, prot },
        other => other,
    }
}
