//! A replacement's question to every other rank: each answers with the bytes it keeps for the
//! replacement's rank (its logged gets, the puts it sent here). Shared by `GetLog` and `PutLog`.

use activerma::{AmCtx, Rank, Result, World};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The answers that arrived (rank -> bytes), filled by the answer handler.
#[derive(Clone, Default)]
pub(crate) struct Answers(Arc<Mutex<HashMap<Rank, Vec<u8>>>>);

impl Answers {
    /// Registers `ask` (answered from `answer_for(asker)` after `first()`) and `answer` (filed
    /// here): every rank, in the same order.
    pub(crate) fn register(
        w: &World,
        ask: u16,
        answer: u16,
        answer_for: impl Fn(&AmCtx) -> Vec<u8> + Send + Sync + 'static,
    ) -> Result<Answers> {
        w.register_handler(
            ask,
            Arc::new(move |ctx: &AmCtx, _: &[u8]| {
                let bytes = answer_for(ctx);
                ctx.reply(answer, ctx.token, &bytes);
            }),
        )?;
        let answers = Answers::default();
        let a = answers.clone();
        w.register_handler(
            answer,
            Arc::new(move |ctx: &AmCtx, p: &[u8]| {
                a.0.lock().unwrap().insert(ctx.src, p.to_vec());
            }),
        )?;
        Ok(answers)
    }

    /// Asks every other rank and waits for all their answers, serving requests meanwhile.
    /// Fails with `Error::RankFailed` if a rank that has not answered dies.
    pub(crate) fn ask_everyone(&self, w: &World, ask: u16) -> Result<HashMap<Rank, Vec<u8>>> {
        let (me, n) = (w.rank(), w.size());
        self.0.lock().unwrap().clear();
        for t in (0..n).filter(|&t| t != me) {
            w.send_am(t, ask, 0, &[])?;
        }
        loop {
            w.progress();
            let missing: Vec<Rank> = {
                let got = self.0.lock().unwrap();
                (0..n).filter(|&t| t != me && !got.contains_key(&t)).collect()
            };
            if missing.is_empty() {
                return Ok(std::mem::take(&mut *self.0.lock().unwrap()));
            }
            for t in missing {
                w.check_alive(t)?;
            }
        }
    }
}
