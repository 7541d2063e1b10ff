//! An origin on the target's host plays the IOMMU for its own active accesses: it logs them
//! into the target's table itself (put_active, get_active), paying the modelled IOMMU's costs
//! when they are on. What a page's bits make an access do is the access layer's `log_append`.

use crate::Proto;
use activerma_access::Logged;
use activerma_core::Rank;
use activerma_mem::Lookup;

/// Set in the addresses of log pages given to the IOTLB model, so that they never share a
/// tag with the target's data pages (log addresses are this process's view of the log).
const LOG_PAGE_TAG: usize = 1 << 62;

/// Runs `f` with the identity of an access this origin logs itself into `rank`'s table, with
/// the modelled IOMMU costs if they are on.
pub(crate) fn logged<'a, R>(p: &'a Proto, rank: Rank, lookup: &'a Lookup<'a>, f: impl FnOnce(&Logged) -> R) -> R {
    let table = p.tables[rank].as_ref().expect("active accesses at the origin need the target's table");
    let translate = p.iotlb.enabled().then_some(|at: usize| p.model_iotlb(rank, at | LOG_PAGE_TAG, 1));
    let l = Logged {
        table,
        lookup,
        target: rank,
        origin: p.conduit.rank(),
        seq: p.next_seq(rank),
        log_ns: p.net.log_ns,
        scratchpad_ns: p.net.scratchpad_ns,
        translate_log: translate.as_ref().map(|f| f as &dyn Fn(usize)),
        owed_ns: std::cell::Cell::new(0),
    };
    f(&l)
}
