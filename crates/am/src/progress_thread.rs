//! Target-side progress: who runs handlers when the application is busy elsewhere.

use crate::Am;
use activerma_core::{settings, Error, Result};
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
    pub fn from_settings() -> Result<ProgressMode> {
        Ok(match settings::get_enum(settings::PROGRESS)? {
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
        let interval_ns = settings::get_u64(settings::WAKE_INTERVAL_US)?.max(1) * 1000;
        let stop = Arc::new(AtomicBool::new(false));
        let (s, a) = (stop.clone(), am.clone());
        let handle = std::thread::Builder::new()
            .name("activerma-progress".into())
            .spawn(move || {
                let mut idle = 0u32;
                while !s.load(Ordering::Acquire) {
                    if a.progress() > 0 {
                        idle = 0;
                        continue;
                    }
                    idle = idle.saturating_add(1);
                    if mode == ProgressMode::Wake && idle > 64 {
                        a.conduit().sleep(interval_ns, &mut || !s.load(Ordering::Acquire) && a.poll_inbox() == 0);
                        idle = 0;
                    } else {
                        std::hint::spin_loop();
                        // As the access-log threads: after a short burst of empty polls, yield
                        // on each (free on a core of its own; hands a shared core back).
                        if idle > 16 {
                            std::thread::yield_now();
                        }
                    }
                }
            })
            .map_err(|e| Error::Os { call: "spawn progress thread", errno_text: e.to_string() })?;
        Ok(Some(ProgressThread { stop, handle: Some(handle), am }))
    }
}

impl Drop for ProgressThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.am.conduit().wake(self.am.conduit().rank());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
