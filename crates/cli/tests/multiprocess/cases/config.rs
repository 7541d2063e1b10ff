//! A program that chooses its settings itself (`Config` + `init_with`): the job runs by them,
//! not by the environment's, and a bad value is refused before init.

use activerma::{settings, Config, Error, ProgressMode, RemotePtr, Result, Transfer};

/// The driver starts this case with ACTIVERMA_TRANSFER=pipelined in the environment.
pub fn settings_without_environment() -> Result<()> {
    let mut cfg = Config::from_env()?;
    assert_eq!(cfg.get_enum(settings::TRANSFER)?, "pipelined", "the driver's environment reached the program");
    let refused = cfg.set(settings::NET_LATENCY_NS, "fast");
    assert!(matches!(refused, Err(Error::BadSetting { .. })), "a bad value is refused by name: {refused:?}");
    cfg.set(settings::TRANSFER, "buffered")?.set(settings::PROGRESS, "thread")?;
    let w = activerma::init_with(cfg)?;
    let (me, n) = (w.rank(), w.size());
    assert_eq!(w.transfer()?, Transfer::Buffered, "rank {me}: the program's transfer protocol, not the environment's");
    assert_eq!(w.progress_mode(), ProgressMode::Thread, "rank {me}: the program's progress mode");
    assert_eq!(w.config().raw(settings::TRANSFER), "buffered");
    let seg = w.alloc_segment(4096 * n)?;
    let next = (me + 1) % n;
    let data: Vec<u8> = (0..4000).map(|i| (i * 7 + me) as u8).collect();
    let used = w.put_by(w.transfer()?, seg.remote(next, 4096 * me), &data)?;
    let expect = if next == me { Transfer::ZeroCopy } else { Transfer::Buffered };
    assert_eq!(used, expect, "rank {me}: a put by the run's protocol to rank {next}");
    w.barrier()?;
    let from = (me + n - 1) % n;
    let mut got = vec![0u8; 4000];
    w.get(RemotePtr::new(me, seg.remote(me, 4096 * from).addr), &mut got)?;
    assert!(got.iter().enumerate().all(|(i, &b)| b == (i * 7 + from) as u8), "rank {me}: the bytes rank {from} put");
    w.barrier()?;
    w.finalize()
}
