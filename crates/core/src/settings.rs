//! The one table of `ACTIVERMA_*` settings. Every tunable lives here with its type, default and
//! description; `activerma info` prints the table with effective values, and a bad value is an
//! error naming the variable and what it accepts.

use crate::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Int,
    /// A byte count; accepts suffixes K, M, G (powers of 1024).
    Size,
    Float,
    Enum(&'static [&'static str]),
    /// A file system path (any text; blank means unset).
    Path,
}

impl Kind {
    pub fn name(&self) -> String {
        match self {
            Kind::Bool => "bool".into(),
            Kind::Int => "int".into(),
            Kind::Size => "size".into(),
            Kind::Float => "float".into(),
            Kind::Enum(v) => v.join("|"),
            Kind::Path => "path".into(),
        }
    }
}

/// The part of the runtime a setting tunes; `activerma info` groups the table by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    Job,
    Conduit,
    Progress,
    Memory,
    Firehose,
    Part,
    ActiveAccess,
    Network,
    Iotlb,
    FaultTolerance,
    Dsm,
}

impl Layer {
    /// In the order `activerma info` shows them: from the job down to the models.
    pub const ALL: [Layer; 11] = [
        Layer::Job,
        Layer::FaultTolerance,
        Layer::Dsm,
        Layer::Conduit,
        Layer::Progress,
        Layer::Memory,
        Layer::Firehose,
        Layer::Part,
        Layer::ActiveAccess,
        Layer::Network,
        Layer::Iotlb,
    ];

    /// A short, stable key for tools (`activerma info --json`).
    pub fn key(self) -> &'static str {
        match self {
            Layer::Job => "job",
            Layer::Conduit => "conduit",
            Layer::Progress => "progress",
            Layer::Memory => "memory",
            Layer::Firehose => "firehose",
            Layer::Part => "part",
            Layer::ActiveAccess => "active-access",
            Layer::Network => "network",
            Layer::Iotlb => "iotlb",
            Layer::FaultTolerance => "fault-tolerance",
            Layer::Dsm => "dsm",
        }
    }

    /// The heading people read.
    pub fn title(self) -> &'static str {
        match self {
            Layer::Job => "job: waits and diagnostics",
            Layer::Conduit => "conduits: smp (one host) and mpi (many hosts)",
            Layer::Progress => "progress and active messages",
            Layer::Memory => "memory and registration",
            Layer::Firehose => "registration strategy firehose",
            Layer::Part => "registration strategy PART",
            Layer::ActiveAccess => "Active Access: access logs",
            Layer::Network => "modelled network",
            Layer::Iotlb => "modelled IOTLB",
            Layer::FaultTolerance => "fault tolerance: checkpoints and restart",
            Layer::Dsm => "object DSM (activerma-dsm)",
        }
    }
}

pub struct Setting {
    pub name: &'static str,
    pub layer: Layer,
    pub kind: Kind,
    pub default: &'static str,
    pub description: &'static str,
}

pub const CONDUIT: &str = "ACTIVERMA_CONDUIT";
pub const PROGRESS: &str = "ACTIVERMA_PROGRESS";
pub const SEGMENT_SIZE: &str = "ACTIVERMA_SEGMENT_SIZE";
pub const MAX_PRIVATE_PAGES: &str = "ACTIVERMA_MAX_PRIVATE_PAGES";
pub const MAX_REGIONS: &str = "ACTIVERMA_MAX_REGIONS";
pub const AM_SLOTS: &str = "ACTIVERMA_AM_SLOTS";
pub const AM_SLOT_SIZE: &str = "ACTIVERMA_AM_SLOT_SIZE";
pub const WAKE_INTERVAL_US: &str = "ACTIVERMA_WAKE_INTERVAL_US";
pub const NET_LATENCY_NS: &str = "ACTIVERMA_NET_LATENCY_NS";
pub const NET_BANDWIDTH_MBS: &str = "ACTIVERMA_NET_BANDWIDTH_MBS";
pub const NET_RECV_NS: &str = "ACTIVERMA_NET_RECV_NS";
pub const NET_LOG_NS: &str = "ACTIVERMA_NET_LOG_NS";
pub const NET_SCRATCHPAD_NS: &str = "ACTIVERMA_NET_SCRATCHPAD_NS";
pub const NET_INTERRUPT_NS: &str = "ACTIVERMA_NET_INTERRUPT_NS";
pub const NET_INTERRUPT_EVERY: &str = "ACTIVERMA_NET_INTERRUPT_EVERY";
pub const TIMEOUT_S: &str = "ACTIVERMA_TIMEOUT_S";
pub const VERBOSE: &str = "ACTIVERMA_VERBOSE";
pub const COUNTERS: &str = "ACTIVERMA_COUNTERS";
pub const SMP_EMULATE_REMOTE: &str = "ACTIVERMA_SMP_EMULATE_REMOTE";
pub const SMP_RANKS_PER_HOST: &str = "ACTIVERMA_SMP_RANKS_PER_HOST";
pub const MPI_ASYNC_PROGRESS_US: &str = "ACTIVERMA_MPI_ASYNC_PROGRESS_US";
pub const MPI_SHARED: &str = "ACTIVERMA_MPI_SHARED";
pub const MPI_RMA_CALLS: &str = "ACTIVERMA_MPI_RMA_CALLS";
pub const LOG_ARENA: &str = "ACTIVERMA_LOG_ARENA";
pub const FAULT_LOG_SIZE: &str = "ACTIVERMA_FAULT_LOG_SIZE";
pub const AA_NOTIFY: &str = "ACTIVERMA_AA_NOTIFY";
pub const AA_WAKE_THRESHOLD: &str = "ACTIVERMA_AA_WAKE_THRESHOLD";
pub const IOTLB_ENTRIES: &str = "ACTIVERMA_IOTLB_ENTRIES";
pub const IOTLB_WAYS: &str = "ACTIVERMA_IOTLB_WAYS";
pub const IOTLB_EVICTION: &str = "ACTIVERMA_IOTLB_EVICTION";
pub const IOTLB_MISS_NS: &str = "ACTIVERMA_IOTLB_MISS_NS";
pub const REGISTRATION: &str = "ACTIVERMA_REGISTRATION";
pub const PIN_LIMIT: &str = "ACTIVERMA_PIN_LIMIT";
pub const RMA_RENDEZVOUS_MIN: &str = "ACTIVERMA_RMA_RENDEZVOUS_MIN";
pub const PUT_STREAM_AFTER: &str = "ACTIVERMA_PUT_STREAM_AFTER";
pub const NONCONTIG: &str = "ACTIVERMA_NONCONTIG";
pub const ATOMICS: &str = "ACTIVERMA_ATOMICS";
pub const SGE_MAX: &str = "ACTIVERMA_SGE_MAX";
pub const NB_TARGET_FROM: &str = "ACTIVERMA_NB_TARGET_FROM";
pub const COPY_ENGINE: &str = "ACTIVERMA_COPY_ENGINE";
pub const TRANSFER: &str = "ACTIVERMA_TRANSFER";
pub const ARMCI_ACC: &str = "ACTIVERMA_ARMCI_ACC";
pub const ARMCI_GROUP_POOL: &str = "ACTIVERMA_ARMCI_GROUP_POOL";
pub const PIPELINE_CHUNK: &str = "ACTIVERMA_PIPELINE_CHUNK";
pub const PIPELINE_MIN: &str = "ACTIVERMA_PIPELINE_MIN";
pub const LANDING_ZONE: &str = "ACTIVERMA_LANDING_ZONE";
pub const FIREHOSE_M: &str = "ACTIVERMA_FIREHOSE_M";
pub const FIREHOSE_MAXVICTIM: &str = "ACTIVERMA_FIREHOSE_MAXVICTIM";
pub const FIREHOSE_BUCKET: &str = "ACTIVERMA_FIREHOSE_BUCKET";
pub const PART_BLOCK: &str = "ACTIVERMA_PART_BLOCK";
pub const PART_PAGEIN: &str = "ACTIVERMA_PART_PAGEIN";
pub const PART_RETRANSMIT: &str = "ACTIVERMA_PART_RETRANSMIT";
pub const PART_PRETOUCH: &str = "ACTIVERMA_PART_PRETOUCH";
pub const PART_FAULT_PROB: &str = "ACTIVERMA_PART_FAULT_PROB";
pub const RESTART_FROM: &str = "ACTIVERMA_RESTART_FROM";
pub const CKPT_KILL_PAGES: &str = "ACTIVERMA_CKPT_KILL_PAGES";
pub const DSM_PROTOCOL: &str = "ACTIVERMA_DSM_PROTOCOL";
pub const DSM_HEAP: &str = "ACTIVERMA_DSM_HEAP";
pub const DSM_CHUNK: &str = "ACTIVERMA_DSM_CHUNK";
pub const DSM_RDMA_BUFFER: &str = "ACTIVERMA_DSM_RDMA_BUFFER";
pub const DSM_DIFF_ARRAY: &str = "ACTIVERMA_DSM_DIFF_ARRAY";
pub const DSM_LOCK_LEASE_US: &str = "ACTIVERMA_DSM_LOCK_LEASE_US";
pub const DSM_ACCESS: &str = "ACTIVERMA_DSM_ACCESS";

pub static TABLE: &[Setting] = &[
    Setting { name: RESTART_FROM, layer: Layer::FaultTolerance, kind: Kind::Path, default: "",
        description: "a checkpoint store (a directory): each rank's checkpointer (activerma-checkpoint) loads the newest complete checkpoint there into the memory it protects when the program asks it to restore; `activerma run --restart-from DIR` sets it; blank = start afresh" },
    Setting { name: CKPT_KILL_PAGES, layer: Layer::FaultTolerance, kind: Kind::Int, default: "0",
        description: "failure injection (tests, benchmarks): a rank's checkpointer kills its own process (SIGKILL) once it has written this many pages (counted over all its checkpoints), in the middle of that checkpoint (before it is complete); 0 = off" },
    Setting { name: DSM_PROTOCOL, layer: Layer::Dsm, kind: Kind::Enum(&["invalidate", "invalidate-rdma", "update-in-place", "update-diff"]), default: "invalidate-rdma",
        description: "the object DSM's consistency protocol: invalidate = home-based invalidation, objects fetched by request and reply messages; invalidate-rdma = the same, the home puts the reply straight into the requester's registered receive buffer; update-in-place = a writer puts its changes into every cached copy and its twin at release; update-diff = a writer broadcasts arrays of diffs by RMA, applied in sequence and acknowledged" },
    Setting { name: DSM_ACCESS, layer: Layer::Dsm, kind: Kind::Enum(&["checks", "mmu"]), default: "checks",
        description: "how the object DSM sees first accesses to other homes' regions: checks = an access check per view (the paper's), copies per region; mmu = page-granular, by the MMU: other homes' heaps are mirrored page for page, a first touch of an absent page faults and a thread of the rank gets the page from its home by RMA, written pages are found by write-protection at a release and diffed; with the invalidation protocols only (Linux 6.7+ userfaultfd)" },
    Setting { name: DSM_HEAP, layer: Layer::Dsm, kind: Kind::Size, default: "64M",
        description: "each rank's object-DSM heap (a segment: regions it is home of, cached copies, twins, receive buffers); virtual, pages cost memory only when touched" },
    Setting { name: DSM_CHUNK, layer: Layer::Dsm, kind: Kind::Size, default: "4K",
        description: "the object DSM splits arrays larger than this into chunks fetched and flushed separately" },
    Setting { name: DSM_RDMA_BUFFER, layer: Layer::Dsm, kind: Kind::Size, default: "64K",
        description: "invalidate-rdma: each rank's receive buffer for object replies; an object (plus its reply header) larger than this comes back as a message, as in the paper" },
    Setting { name: DSM_DIFF_ARRAY, layer: Layer::Dsm, kind: Kind::Size, default: "64K",
        description: "update-diff: the bytes of one diff-array; every rank keeps one such receive slot per other rank, and a writer's changes larger than a slot go out as several arrays in sequence" },
    Setting { name: DSM_LOCK_LEASE_US, layer: Layer::Dsm, kind: Kind::Int, default: "300",
        description: "the object DSM keeps a lock with its last owner after the unlock (taken again without a message); when others wait, the owner still takes it again for at least this many microseconds after it got it before handing it on (fewer hand-overs of a lock two ranks loop on), and for 20 message round trips where that is longer (measured when the DSM is made, at most 20 ms: a hand-over costs about two); 0 = no lease: hand it on at the first unlock while others wait" },
    Setting { name: CONDUIT, layer: Layer::Conduit, kind: Kind::Enum(&["auto", "smp", "mpi"]), default: "auto",
        description: "conduit: smp = one host, shared memory and cross-memory attach; mpi = many hosts, started by mpirun/srun (builds with the mpi feature); auto = mpi when started by an MPI launcher, else smp" },
    Setting { name: PROGRESS, layer: Layer::Progress, kind: Kind::Enum(&["app", "thread", "wake"]), default: "app",
        description: "who runs active-message handlers at a target: the application's progress()/blocking calls, a polling thread, or a thread sleeping on a futex wake-up" },
    Setting { name: SEGMENT_SIZE, layer: Layer::Memory, kind: Kind::Size, default: "1G",
        description: "per-rank symmetric heap from which segments are allocated (virtual; pages cost memory only when touched)" },
    Setting { name: MAX_PRIVATE_PAGES, layer: Layer::Memory, kind: Kind::Int, default: "1048576",
        description: "translation-table entries per rank for exposed private memory (pages)" },
    Setting { name: MAX_REGIONS, layer: Layer::Memory, kind: Kind::Int, default: "256",
        description: "exposed ranges a rank may have at once (segment allocations share one)" },
    Setting { name: AM_SLOTS, layer: Layer::Progress, kind: Kind::Int, default: "1024",
        description: "slots in each rank's active-message inbox, shared by every sender of its host or node (a power of two; memory per rank: slots x slot size)" },
    Setting { name: AM_SLOT_SIZE, layer: Layer::Progress, kind: Kind::Size, default: "256",
        description: "bytes per active-message inbox slot; longer messages are fragmented transparently (between nodes: MPI messages of up to 64 KiB)" },
    Setting { name: WAKE_INTERVAL_US, layer: Layer::Progress, kind: Kind::Int, default: "2000",
        description: "wake progress mode: longest sleep before the thread polls anyway (us)" },
    Setting { name: NET_LATENCY_NS, layer: Layer::Network, kind: Kind::Int, default: "0",
        description: "modelled network: latency added to every remote operation (ns); 0 = off" },
    Setting { name: NET_BANDWIDTH_MBS, layer: Layer::Network, kind: Kind::Int, default: "0",
        description: "modelled network: bandwidth limit per origin (MB/s = 1e6 B/s); under PART each block and each resend is booked on the link by itself; 0 = unlimited" },
    Setting { name: NET_RECV_NS, layer: Layer::Network, kind: Kind::Int, default: "0",
        description: "modelled network: CPU time to receive one active message (LogP's o: poll the NIC, copy the payload out), busy-waited by whoever runs its handler (ns)" },
    Setting { name: NET_LOG_NS, layer: Layer::Network, kind: Kind::Int, default: "0",
        description: "modelled network: the extended IOMMU's memory access per access-log entry it writes (the paper's 70 ns), busy-waited by the data mover (ns)" },
    Setting { name: NET_SCRATCHPAD_NS, layer: Layer::Network, kind: Kind::Int, default: "0",
        description: "modelled network: the extended IOMMU's scratchpad access per entry of a log a dedicated thread polls (notify=thread: the paper's direct CPU access, 15 ns), instead of NET_LOG_NS; busy-waited by the data mover (ns)" },
    Setting { name: NET_INTERRUPT_NS, layer: Layer::Network, kind: Kind::Int, default: "0",
        description: "modelled network: cost of one interrupt (the paper's 3 us): wake-notified logs and the wake progress mode then poll instead of sleeping on a futex and busy-wait this long per interrupt on the handler's CPU; an access log raises one per AA_WAKE_THRESHOLD (its threshold) entries; 0 = real futex wake-ups (ns)" },
    Setting { name: NET_INTERRUPT_EVERY, layer: Layer::Network, kind: Kind::Int, default: "10",
        description: "modelled network: active messages per modelled interrupt in the wake progress mode (the paper's AM-Ints: 10)" },
    Setting { name: TIMEOUT_S, layer: Layer::Job, kind: Kind::Float, default: "0",
        description: "give up a blocking wait (barrier, reply, full queue) after this many seconds; 0 = never (dead ranks are still detected)" },
    Setting { name: VERBOSE, layer: Layer::Job, kind: Kind::Bool, default: "0",
        description: "print protocol choices and job events to stderr" },
    Setting { name: COUNTERS, layer: Layer::Job, kind: Kind::Bool, default: "0",
        description: "at finalize, every rank prints its non-zero operation counters (which protocols moved how many operations and bytes) to stderr, one line per rank" },
    Setting { name: MPI_ASYNC_PROGRESS_US, layer: Layer::Conduit, kind: Kind::Int, default: "100",
        description: "mpi: a background thread drives MPI's progress engine this often (us) while the rank makes no MPI call itself (it backs off up to 32x while the rank does), so one-sided operations to a rank complete even while its code computes; not started on the one-host shared heap, which needs none; 0 = off (then some MPIs need the target to call in)" },
    Setting { name: MPI_SHARED, layer: Layer::Conduit, kind: Kind::Enum(&["auto", "off"]), default: "auto",
        description: "mpi conduit: when every rank runs on one host, map every rank's heap and table (one MPI shared window) and move data with the CPU as the smp conduit does; off: always MPI one-sided operations (use it to emulate separate hosts)" },
    Setting { name: MPI_RMA_CALLS, layer: Layer::Conduit, kind: Kind::Enum(&["auto", "native", "accumulate"]), default: "auto",
        description: "mpi conduit: the MPI call that moves a contiguous put, and a contiguous get started as a request (non-blocking gets, ARMCI's gets), of another host's segment: native = MPI_Put / MPI_Rget; accumulate = MPI_Accumulate(MPI_REPLACE) / MPI_Rget_accumulate(MPI_NO_OP), the same bytes moved as an accumulate (faster over MPICH's UCX on TCP, slower on Open MPI's osc/ucx); auto = each rank measures both on its first transfers of each size class up to 256 KiB and keeps the faster" },
    Setting { name: SMP_EMULATE_REMOTE, layer: Layer::Conduit, kind: Kind::Bool, default: "0",
        description: "smp: treat other ranks as if on other hosts (no direct mapping: one-sided engine for segments, the target for private memory) — tests the cross-host paths on one host" },
    Setting { name: SMP_RANKS_PER_HOST, layer: Layer::Conduit, kind: Kind::Int, default: "0",
        description: "smp: emulate hosts of this many consecutive ranks each (ranks 0..k-1 on the first): ranks of one host map each other's memory, others take the cross-host paths, as a node-aware mpi job spanning hosts does; 0 = one host" },
    Setting { name: LOG_ARENA, layer: Layer::ActiveAccess, kind: Kind::Size, default: "16M",
        description: "Active Access: memory for a rank's access logs, a shared file the rank makes when it first logs (create_log, set_fault_handler, or pages marked to log); ranks that never log reserve none" },
    Setting { name: FAULT_LOG_SIZE, layer: Layer::ActiveAccess, kind: Kind::Size, default: "64K",
        description: "Active Access: bytes of the default fault log (entries of pages marked E=0), a power of two" },
    Setting { name: AA_NOTIFY, layer: Layer::ActiveAccess, kind: Kind::Enum(&["poll", "wake", "thread"]), default: "poll",
        description: "Active Access: default notification mode of a new access log: poll = the application's progress(); wake = a thread woken when a log holds AA_WAKE_THRESHOLD entries or every WAKE_INTERVAL_US (the paper's interrupt); thread = a dedicated thread that spins (the paper's scratchpad core)" },
    Setting { name: AA_WAKE_THRESHOLD, layer: Layer::ActiveAccess, kind: Kind::Int, default: "1",
        description: "Active Access, wake mode: entries in a log before its thread is woken" },
    Setting { name: IOTLB_ENTRIES, layer: Layer::Iotlb, kind: Kind::Int, default: "0",
        description: "modelled IOTLB: translations cached per rank; 0 = model off (lookups are never counted)" },
    Setting { name: IOTLB_WAYS, layer: Layer::Iotlb, kind: Kind::Enum(&["full", "direct", "2", "4", "8", "16"]), default: "full",
        description: "modelled IOTLB associativity: fully associative, direct-mapped or n-way" },
    Setting { name: IOTLB_EVICTION, layer: Layer::Iotlb, kind: Kind::Enum(&["lru", "random"]), default: "lru",
        description: "modelled IOTLB eviction policy" },
    Setting { name: IOTLB_MISS_NS, layer: Layer::Iotlb, kind: Kind::Int, default: "0",
        description: "modelled IOTLB: cost charged per miss (ns, busy-waited by the origin)" },
    Setting { name: REGISTRATION, layer: Layer::Memory, kind: Kind::Enum(&["none", "pin-all", "bounce", "rendezvous", "rendezvous-unpin", "firehose", "part"]), default: "none",
        description: "how exposed private memory becomes a zero-copy target: none = registered at once, nothing pinned; pin-all = mlock at expose (and segments at allocation); bounce = never pinned, the target copies through its message buffers; rendezvous = pinned on first access, kept until unexposed; rendezvous-unpin = pinned for each operation; part = nothing pinned, a missing page fails the zero-copy block fast and the target pages it in (ACTIVERMA_PART_*); firehose = each origin keeps at most f firehoses (pinned buckets) on every other rank, a miss moves one with a message, released ones stay pinned as victims (ACTIVERMA_FIREHOSE_*)" },
    Setting { name: RMA_RENDEZVOUS_MIN, layer: Layer::Memory, kind: Kind::Size, default: "256K",
        description: "puts/gets to private memory of a rank on another host (mpi conduit, or smp emulating hosts) from this size on: the target registers the range with the conduit (MPI: attaches the exposure to the dynamic window) and the data moves one-sided; smaller ones travel in active messages through the target; 0 = never (not under bounce or part)" },
    Setting { name: PUT_STREAM_AFTER, layer: Layer::Memory, kind: Kind::Size, default: "32M",
        description: "implicit puts (put_nbi) of 4 KiB and more into a segment mapped here use non-temporal stores while the window to that rank (those puts since its last flush) has passed this many bytes, or the previous window did: a window larger than the last-level cache then goes to memory without reading every destination line first; set it to the last-level cache size; 0 = never" },
    Setting { name: ATOMICS, layer: Layer::Memory, kind: Kind::Enum(&["one-sided", "target"]), default: "one-sided",
        description: "who runs atomics on other ranks' memory: one-sided = the origin (CPU atomics on a segment of this host, the conduit's atomics across hosts; private memory is always the target's); target = the target's CPU for every word, asked by active message (ARMCI's server-based atomics: needs target progress, every rank must use the same)" },
    Setting { name: NONCONTIG, layer: Layer::Memory, kind: Kind::Enum(&["host-assisted", "per-piece", "packed", "target-assisted"]), default: "host-assisted",
        description: "strided and vector transfers (many pieces to one rank): host-assisted = the whole list at once, one check, then CPU copies to a segment mapped here, scatter/gather calls of up to SGE_MAX pieces to private memory on this host, one one-sided operation (MPI: an hindexed datatype) to another host's segments, one packed message to its private memory; per-piece = one blocking put/get per piece; packed = the pieces packed into one active message that the target's progress engine unpacks (the buffered protocol); target-assisted = the list (no bytes) in one active message, and the target's progress engine moves every piece straight between its memory and the origin's buffers with scatter/gather calls of up to SGE_MAX pieces (the paper's host-assisted zero-copy, done by the target: no origin CPU while a non-blocking transfer is in flight, but needs target progress; ranks of another host: packed)" },
    Setting { name: NB_TARGET_FROM, layer: Layer::Memory, kind: Kind::Size, default: "64K",
        description: "under host-assisted, non-blocking strided gets and puts (ARMCI's NbGetS / NbPutS) of this many bytes or more to a rank of this host whose progress engine runs on its own (ACTIVERMA_PROGRESS=thread or wake, ARMCI's data server) move as target-assisted: the target's engine moves the pieces while this rank computes, instead of this rank copying them at issue; 0 = never" },
    Setting { name: COPY_ENGINE, layer: Layer::Memory, kind: Kind::Enum(&["auto", "on", "off"]), default: "auto",
        description: "a helper thread per process that stands in for a NIC's DMA engine: non-blocking strided gets and puts (ARMCI's NbGetS / NbPutS) whose target does not move them itself (no progress thread of its own), and non-blocking contiguous gets (NbGet), of ACTIVERMA_NB_TARGET_FROM bytes or more between this rank's buffer and a segment of this node mapped here, are copied by it while this rank computes, instead of at issue; the thread never calls MPI or the runtime, starts at the first such transfer, polls briefly and then sleeps; auto = on where this process may run on more CPUs than its node has ranks and the conduit allows a thread beside the program's (not under MPI_THREAD_SINGLE), on = always (a program at MPI_THREAD_SINGLE too: the engine never enters MPI), off = never" },
    Setting { name: SGE_MAX, layer: Layer::Memory, kind: Kind::Int, default: "1024",
        description: "host-assisted transfers: pieces per scatter/gather call (the paper's scatter/gather-element limit), at most the kernel's IOV_MAX of 1024" },
    Setting { name: TRANSFER, layer: Layer::Memory, kind: Kind::Enum(&["auto", "zero-copy", "buffered", "pipelined", "dynamic-registration"]), default: "auto",
        description: "how a contiguous put/get of the transfer-protocol API (World::put_by, ARMCI's Put/Get) moves: zero-copy = the origin's engine between the user buffer and registered target memory (CPU copy, cross-memory attach, the conduit's one-sided engine); buffered = one active message, the target's CPU copies (needs target progress); pipelined = buffered in chunks of PIPELINE_CHUNK, several in flight; dynamic-registration = the user buffer is pinned for the call, then zero-copy; auto = zero-copy where the target memory is registered, else what the registration strategy does (pipelined from PIPELINE_MIN on when it goes through the target)" },
    Setting { name: ARMCI_ACC, layer: Layer::ActiveAccess, kind: Kind::Enum(&["lock", "active"]), default: "lock",
        description: "ARMCI accumulates: lock = get, add, put under the target rank's accumulate lock; active = an active put into a mailbox the target marked for logging, whose handler (a thread woken per entry) adds the data there: no lock, and the target's CPU does the adding; every rank must use the same" },
    Setting { name: ARMCI_GROUP_POOL, layer: Layer::Memory, kind: Kind::Size, default: "128M",
        description: "ARMCI: bytes of each rank's segment heap set aside at ARMCI_Init for allocations over part of the job (ARMCI_Malloc_group, ARMCI_Malloc over a smaller default group), so that their blocks are segment memory like ARMCI_Malloc's: one-sided atomics and transfers, and addressable directly by the ranks of the owner's node; a group allocation that does not fit fails with a message; 0 = no pool: such blocks are private memory each member exposes (reached through its CPU or cross-memory attach, not addressable by other ranks)" },
    Setting { name: PIPELINE_CHUNK, layer: Layer::Memory, kind: Kind::Size, default: "64K",
        description: "pipelined transfers: bytes per chunk (each one active message the target copies while the next travels)" },
    Setting { name: PIPELINE_MIN, layer: Layer::Memory, kind: Kind::Size, default: "256K",
        description: "ACTIVERMA_TRANSFER=auto: transfers that go through the target's CPU are pipelined from this size on (smaller ones travel in one message)" },
    Setting { name: LANDING_ZONE, layer: Layer::Memory, kind: Kind::Size, default: "4M",
        description: "buffered and pipelined transfers: bytes at the top of every rank's symmetric heap (beyond ACTIVERMA_SEGMENT_SIZE) set aside as pre-registered landing buffers, an equal part for every origin rank; an origin puts a chunk there zero-copy and the target's CPU copies it into place (gets: the other way), so those protocols move chunks of up to PIPELINE_CHUNK per message instead of active-message fragments; virtual, pages cost memory only when touched; 0 = none (buffered transfers travel inside active messages)" },
    Setting { name: PIN_LIMIT, layer: Layer::Memory, kind: Kind::Size, default: "0",
        description: "bytes a rank may keep pinned by its registration strategy, checked before mlock; 0 = no budget of our own (the kernel's RLIMIT_MEMLOCK, `ulimit -l`, still applies; root ignores it)" },
    Setting { name: FIREHOSE_M, layer: Layer::Firehose, kind: Kind::Size, default: "64M",
        description: "firehose: M, bytes a rank keeps pinned at most for other ranks' firehoses; each origin may hold f = M / (ranks - 1) bytes of firehoses on each target (rounded down to whole buckets)" },
    Setting { name: FIREHOSE_MAXVICTIM, layer: Layer::Firehose, kind: Kind::Size, default: "16M",
        description: "firehose: MAXVICTIM, bytes of released firehoses a rank keeps pinned as victims (lazy deregistration, reused on the next move); pinned memory never exceeds M + MAXVICTIM" },
    Setting { name: FIREHOSE_BUCKET, layer: Layer::Firehose, kind: Kind::Int, default: "1",
        description: "firehose: pages per bucket (the unit one firehose covers and one pin): 1 = page-based firehose; a power of two above 1 = the region flavour (fewer, larger firehoses and moves)" },
    Setting { name: PART_BLOCK, layer: Layer::Part, kind: Kind::Size, default: "16K",
        description: "PART: unit of retransmission (bytes, a multiple of the page size); a block that meets a missing page at the target is NACKed and resent whole" },
    Setting { name: PART_PAGEIN, layer: Layer::Part, kind: Kind::Enum(&["pio", "pi4", "pia", "pia-early"]), default: "pio",
        description: "PART: what the target pages in per fault before its ERR: pio = the faulting page; pi4 = the rest of its block; pia = the rest of the transfer (the origin holds new blocks meanwhile); pia-early = the rest of the block, then the ERR, then the rest of the transfer while the origin goes on with later blocks" },
    Setting { name: PART_RETRANSMIT, layer: Layer::Part, kind: Kind::Enum(&["err", "timeout:10us", "timeout:50us", "timeout:100us", "timeout:500us", "timeout:1ms", "timeout:10ms"]), default: "err",
        description: "PART: when the origin resends a NACKed block: err = on the target's explicit retransmission request; timeout:<t> = after that time (no ERR)" },
    Setting { name: PART_PRETOUCH, layer: Layer::Part, kind: Kind::Size, default: "0",
        description: "PART: transfers of at most this many bytes first page in the origin's own buffer (the paper's touch); 0 = off" },
    Setting { name: PART_FAULT_PROB, layer: Layer::Part, kind: Kind::Float, default: "0",
        description: "PART fault injection (tests, benchmarks), 0.0-1.0: before each put/get the origin asks the target to evict each page lying wholly inside the accessed range with this probability (contents kept), so the transfer meets real faults; 0 = off" },
];

pub fn lookup(name: &str) -> &'static Setting {
    TABLE.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("setting {name} is not in the table"))
}

/// Whether the environment sets `name` (to anything but blanks): a layer may pick its own
/// default for a setting the user left alone.
pub fn is_set(name: &str) -> bool {
    lookup(name);
    std::env::var(name).is_ok_and(|v| !v.trim().is_empty())
}

/// The raw effective value: the environment's, else the default.
pub fn raw(name: &str) -> String {
    let s = lookup(name);
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v.trim().to_string(),
        _ => s.default.to_string(),
    }
}

pub(crate) fn bad(name: &str, value: &str, why: impl Into<String>) -> Error {
    Error::BadSetting { name: name.into(), value: value.into(), why: why.into() }
}

pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, mult) = match t.chars().last()? {
        'k' | 'K' => (&t[..t.len() - 1], 1u64 << 10),
        'm' | 'M' => (&t[..t.len() - 1], 1 << 20),
        'g' | 'G' => (&t[..t.len() - 1], 1 << 30),
        't' | 'T' => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(mult)
}

pub fn get_u64(name: &str) -> Result<u64> {
    parse_u64(lookup(name), &raw(name))
}

pub fn get_f64(name: &str) -> Result<f64> {
    parse_f64(lookup(name), &raw(name))
}

pub fn get_bool(name: &str) -> Result<bool> {
    parse_bool(lookup(name), &raw(name))
}

pub fn get_enum(name: &str) -> Result<&'static str> {
    parse_enum(lookup(name), &raw(name))
}

/// A whole number or a size, as the setting's kind says.
pub(crate) fn parse_u64(s: &Setting, v: &str) -> Result<u64> {
    match s.kind {
        Kind::Int => v.parse().map_err(|_| bad(s.name, v, "expected a whole number")),
        Kind::Size => parse_size(v).ok_or_else(|| bad(s.name, v, "expected a size such as 4096, 64K, 1G")),
        _ => panic!("{} is not numeric", s.name),
    }
}

pub(crate) fn parse_f64(s: &Setting, v: &str) -> Result<f64> {
    v.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0).ok_or_else(|| bad(s.name, v, "expected a non-negative number"))
}

pub(crate) fn parse_bool(s: &Setting, v: &str) -> Result<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(bad(s.name, v, "expected 0/1, true/false, yes/no or on/off")),
    }
}

pub(crate) fn parse_enum(s: &Setting, v: &str) -> Result<&'static str> {
    let Kind::Enum(options) = s.kind else { panic!("{} is not an enum", s.name) };
    options
        .iter()
        .find(|o| o.eq_ignore_ascii_case(v))
        .copied()
        .ok_or_else(|| bad(s.name, v, format!("expected one of {}", options.join(", "))))
}

/// Checks `v` as a value of setting `s`.
pub(crate) fn check(s: &Setting, v: &str) -> Result<()> {
    match s.kind {
        Kind::Bool => parse_bool(s, v).map(drop),
        Kind::Int | Kind::Size => parse_u64(s, v).map(drop),
        Kind::Float => parse_f64(s, v).map(drop),
        Kind::Enum(_) => parse_enum(s, v).map(drop),
        Kind::Path => Ok(()),
    }
}

/// Checks every setting present in the environment, so a typo in any value fails early.
pub fn validate_all() -> Result<()> {
    TABLE.iter().try_for_each(|s| check(s, &raw(s.name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("64K"), Some(65536));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn defaults_parse() {
        for s in TABLE {
            std::env::remove_var(s.name);
        }
        validate_all().unwrap();
        assert_eq!(get_enum(PROGRESS).unwrap(), "app");
    }

    #[test]
    fn every_layer_holds_a_setting() {
        for layer in Layer::ALL {
            assert!(TABLE.iter().any(|s| s.layer == layer), "{layer:?} is empty");
        }
    }

    #[test]
    fn bad_values_name_the_variable() {
        std::env::set_var(NET_LATENCY_NS, "fast");
        let e = get_u64(NET_LATENCY_NS).unwrap_err().to_string();
        std::env::remove_var(NET_LATENCY_NS);
        assert!(e.contains("ACTIVERMA_NET_LATENCY_NS") && e.contains("whole number"), "{e}");
    }
}
