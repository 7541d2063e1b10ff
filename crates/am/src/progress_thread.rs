//! Target-side progress: who runs handlers when the application is busy elsewhere.

use crate::Am;
use activerma_core::backoff::IdlePoll;
use activerma_core::interrupt_model::ModelledInterrupt;
use activerma_core::{settings, Config, Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressMode {
    /// Handlers run inside the application's `progress()` and blocking calls.
    App,
    /// A thread polls continuously (the paper's dedicated core).
    Thread,
    /// A thread sleeps on a futex and is woken when a message arrives ("interrupts").
    Wake,
}

impl ProgressMode {
    /// The mode ACTIVERMA_PROGRESS names.
    pub fn from_config(cfg: &Config) -> Result<ProgressMode> {
        Ok(match cfg.get_enum(settings::PROGRESS)? {
            "app" => ProgressMode::App,
            "thread" => ProgressMode::Thread,
            "wake" => ProgressMode::Wake,
            other => return Err(Error::InvalidArgument(format!("unknown progress mode {other}"))),
        })
    }
    pub fn name(&self) -> &'static str {
        match self {
            ProgressMode::App => "app",
            ProgressMode::Thread => "thread",
            ProgressMode::Wake => "wake",
        }
    }
}

/// Wake mode: empty polls before the thread sleeps until a message wakes it.
const SLEEP_AFTER_EMPTY_POLLS: u32 = 64;

pub struct ProgressThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    am: Arc<Am>,
}

impl ProgressThread {
    /// Starts the thread for `Thread` and `Wake` modes; `None` for `App`.
    pub fn start(am: Arc<Am>, mode: ProgressMode) -> Result<Option<ProgressThread>> {
        if mode == ProgressMode::App {
            return Ok(None);
        }
        am.conduit().threads_may_call()?;
        let interval_ns = am.wake_interval_ns();
        let stop = Arc::new(AtomicBool::new(false));
        let (s, a) = (stop.clone(), am.clone());
        let mut interrupt =
            if mode == ProgressMode::Wake { ModelledInterrupt::new(am.net().interrupt_ns, am.interrupt_every()) } else { None };
        let handle = std::thread::Builder::new()
            .name("activerma-progress".into())
            .spawn(move || {
                let mut poll = IdlePoll::default();
                let stopped = || s.load(Ordering::Acquire);
                while !stopped() {
                    let handled = a.progress();
                    if handled > 0 {
                        if let Some(i) = interrupt.as_mut() {
                            i.handled(handled as u64);
                        }
                        poll.busy();
                    } else if mode == ProgressMode::Wake && interrupt.is_none() && poll.empty_polls() > SLEEP_AFTER_EMPTY_POLLS {
                        a.conduit().sleep(interval_ns, &mut || !stopped() && a.poll_inbox() == 0);
                        poll.busy();
                    } else {
                        poll.idle();
                    }
                }
            })
            .map_err(|e| Error::Os { call: "spawn progress thread", errno_text: e.to_string() })?;
        am.conduit().announce_serving(true);
        Ok(Some(ProgressThread { stop, handle: Some(handle), am }))
    }
}

impl Drop for ProgressThread {
    fn drop(&mut self) {
        self.am.conduit().announce_serving(false);
        self.stop.store(true, Ordering::Release);
        self.am.conduit().wake(self.am.conduit().rank());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
