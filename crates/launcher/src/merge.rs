//! Merging of stderr lines that several ranks print alike (every rank failing init with the same
//! message about a bad setting, say), so that such a line is shown once with the ranks it came
//! from instead of once per rank.
//!
//! A rank's lines are never reordered: each rank has a chain of its waiting entries, an entry
//! goes out only when it heads the chain of every rank in it, and a line joins an earlier
//! entry only if that entry does not (through the chains) have to follow the rank's previous
//! line. Among entries free to go, the one made first goes first. A line waits at most
//! `WINDOW` for partners, plus the time its rank's earlier lines wait; `MAX_AGE` bounds that.
//! The search for a partner is bounded (`MAX_WAITING`, `MAX_TRIED`, `MAX_VISITED`) so that a
//! rank flooding stderr costs little: past a bound, a line simply is not merged.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

/// How long a stderr line waits for the same line from other ranks. Ranks that hit the same
/// error at init or in the same phase print it within milliseconds of each other; the window
/// leaves room for a loaded machine while keeping errors prompt.
pub const WINDOW: Duration = Duration::from_millis(200);

/// The longest any entry waits: then everything waiting goes out, merged or not.
const MAX_AGE: Duration = Duration::from_millis(600);

/// Entries waiting at most: a rank that floods stderr then gets its lines out without waiting
/// for the window, and looking for a partner stays cheap.
const MAX_WAITING: usize = 256;

/// Entries with the same text tried as a partner for one line.
const MAX_TRIED: usize = 4;

/// Entries visited to learn whether a partner must follow the rank's previous line; past it
/// the answer is taken to be yes (no merge), which is always safe.
const MAX_VISITED: usize = 32;

/// One line (or, when not mergeable, one piece of output without a newline) and its ranks.
#[derive(Debug)]
pub struct Entry {
    pub text: Vec<u8>,
    /// Ascending.
    pub ranks: Vec<u32>,
    born: Instant,
    mergeable: bool,
    /// The entries that held the previous line of each of its ranks (it must follow them).
    after: Vec<u64>,
}

pub struct Merger {
    /// Waiting entries by number, in the order they were made.
    waiting: BTreeMap<u64, Entry>,
    next: u64,
    /// Per rank, its waiting entries in the order it printed them.
    chains: Vec<VecDeque<u64>>,
}

impl Merger {
    pub fn new(ranks: usize) -> Merger {
        Merger { waiting: BTreeMap::new(), next: 0, chains: vec![VecDeque::new(); ranks] }
    }

    /// Queues `text` from `rank`: a whole line (mergeable) or a piece that must go out as it is.
    pub fn push(&mut self, rank: u32, text: Vec<u8>, mergeable: bool, now: Instant) {
        let r = rank as usize;
        let previous = self.chains[r].back().copied();
        let partner = if mergeable && self.chains.len() > 1 && self.waiting.len() < MAX_WAITING {
            self.waiting
                .iter()
                .filter(|(_, e)| e.mergeable && now < e.born + WINDOW && e.text == text && !e.ranks.contains(&rank))
                .map(|(&id, _)| id)
                .take(MAX_TRIED)
                .find(|&id| previous.is_none_or(|p| !self.must_follow(p, id)))
        } else {
            None
        };
        let id = match partner {
            Some(id) => {
                let e = self.waiting.get_mut(&id).expect("a waiting entry");
                let at = e.ranks.partition_point(|&x| x < rank);
                e.ranks.insert(at, rank);
                e.after.extend(previous);
                id
            }
            None => {
                let id = self.next;
                self.next += 1;
                self.waiting.insert(id, Entry { text, ranks: vec![rank], born: now, mergeable, after: previous.into_iter().collect() });
                id
            }
        };
        self.chains[r].push_back(id);
    }

    /// Whether entry `later` must follow entry `earlier`: `earlier` comes before it in the
    /// chain of one of its ranks, directly or through other entries (or the search ran long).
    fn must_follow(&self, later: u64, earlier: u64) -> bool {
        let mut seen = HashSet::from([later]);
        let mut todo = vec![later];
        while let Some(id) = todo.pop() {
            if id == earlier || seen.len() > MAX_VISITED {
                return true;
            }
            // Entries gone out no longer order anything.
            let Some(e) = self.waiting.get(&id) else { continue };
            for &before in &e.after {
                if seen.insert(before) {
                    todo.push(before);
                }
            }
        }
        false
    }

    /// Takes the entries that may go out now, in an order that keeps every rank's: those that
    /// every rank has joined, that cannot be joined, or whose window has passed.
    pub fn due(&mut self, now: Instant) -> Vec<Entry> {
        let ranks = self.chains.len();
        let overdue = self.waiting.len() > MAX_WAITING || self.waiting.values().any(|e| now >= e.born + MAX_AGE);
        self.release(|e| overdue || !e.mergeable || e.ranks.len() == ranks || now >= e.born + WINDOW)
    }

    /// Takes every entry, in an order that keeps every rank's (the job is over, or the launcher
    /// has something to say).
    pub fn take_all(&mut self) -> Vec<Entry> {
        self.release(|_| true)
    }

    /// Takes, first made first, the entries that head the chains of all their ranks and are
    /// `done`, until none is left.
    fn release(&mut self, done: impl Fn(&Entry) -> bool) -> Vec<Entry> {
        let mut out = Vec::new();
        loop {
            let free = self.waiting.iter().find(|(id, e)| done(e) && e.ranks.iter().all(|&r| self.chains[r as usize].front() == Some(id)));
            let Some((&id, _)) = free else { break };
            let e = self.waiting.remove(&id).expect("a waiting entry");
            for &r in &e.ranks {
                self.chains[r as usize].pop_front();
            }
            out.push(e);
        }
        out
    }

    /// When `due` may next have something, after `now`, if anything waits. (An entry whose
    /// window has passed but that waits behind others goes with them, not at its own deadline:
    /// counting that deadline would have the caller spin.)
    pub fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let windows = self.waiting.values().map(|e| e.born + WINDOW).filter(|&d| d > now);
        let oldest = self.waiting.values().map(|e| e.born + MAX_AGE).min();
        windows.chain(oldest).min()
    }
}

/// Ranks as a compact list: "0-3", "0,2,5-7".
pub fn rank_list(ranks: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        parts.push(if j == i { ranks[i].to_string() } else { format!("{}-{}", ranks[i], ranks[j]) });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(entries: &[Entry]) -> Vec<(String, Vec<u32>)> {
        entries.iter().map(|e| (String::from_utf8_lossy(&e.text).into_owned(), e.ranks.clone())).collect()
    }

    #[test]
    fn a_line_every_rank_prints_goes_out_once_as_soon_as_all_have_it() {
        let t = Instant::now();
        let mut m = Merger::new(3);
        m.push(0, b"bad setting\n".to_vec(), true, t);
        m.push(2, b"bad setting\n".to_vec(), true, t);
        assert!(m.due(t).is_empty(), "rank 1 may still print it");
        m.push(1, b"bad setting\n".to_vec(), true, t);
        assert_eq!(texts(&m.due(t)), [("bad setting\n".into(), vec![0, 1, 2])]);
    }

    #[test]
    fn a_line_waits_no_longer_than_the_window() {
        let t = Instant::now();
        let mut m = Merger::new(4);
        m.push(1, b"only me\n".to_vec(), true, t);
        assert_eq!(m.next_deadline(t), Some(t + WINDOW));
        assert!(m.due(t + WINDOW / 2).is_empty());
        assert_eq!(texts(&m.due(t + WINDOW)), [("only me\n".into(), vec![1])]);
        // A late copy does not join a line that has gone out.
        m.push(2, b"only me\n".to_vec(), true, t + WINDOW * 2);
        assert_eq!(texts(&m.take_all()), [("only me\n".into(), vec![2])]);
    }

    #[test]
    fn no_rank_sees_its_lines_reordered() {
        // Rank 0 prints A then B, rank 1 prints B then A: rank 1's A may not join rank 0's A,
        // which went before the B that rank 1 printed first.
        let t = Instant::now();
        let mut m = Merger::new(2);
        for (r, line) in [(0, "A\n"), (0, "B\n"), (1, "B\n"), (1, "A\n")] {
            m.push(r, line.as_bytes().to_vec(), true, t);
        }
        assert_eq!(texts(&m.take_all()), [("A\n".into(), vec![0]), ("B\n".into(), vec![0, 1]), ("A\n".into(), vec![1])]);
    }

    #[test]
    fn lines_around_a_rank_s_own_line_merge_too() {
        // Every rank: a shared line, one of its own, another shared line. Rank 1's own line was
        // made after rank 0's second shared line; it still goes before rank 1's share of it.
        let t = Instant::now();
        let mut m = Merger::new(2);
        for r in [0, 1] {
            m.push(r, b"start\n".to_vec(), true, t);
            m.push(r, format!("rank {r}\n").into_bytes(), true, t);
            m.push(r, b"end\n".to_vec(), true, t);
        }
        assert!(m.due(t).iter().map(|e| e.ranks.len()).eq([2]), "the full first line goes at once");
        assert!(m.due(t + WINDOW / 2).is_empty(), "the own lines wait for the window");
        assert_eq!(texts(&m.due(t + WINDOW)), [("rank 0\n".into(), vec![0]), ("rank 1\n".into(), vec![1]), ("end\n".into(), vec![0, 1])]);
    }

    #[test]
    fn a_line_joined_late_waits_behind_the_joiner_s_earlier_line() {
        let t = Instant::now();
        let mut m = Merger::new(3);
        m.push(0, b"x\n".to_vec(), true, t);
        m.push(1, b"y\n".to_vec(), true, t + WINDOW * 9 / 10);
        m.push(1, b"x\n".to_vec(), true, t + WINDOW * 19 / 20);
        assert!(m.due(t + WINDOW).is_empty(), "x must follow rank 1's y, still in its window");
        assert_eq!(m.next_deadline(t + WINDOW), Some(t + WINDOW * 19 / 10), "the caller sleeps until y is due");
        assert_eq!(texts(&m.due(t + WINDOW * 19 / 10)), [("y\n".into(), vec![1]), ("x\n".into(), vec![0, 1])]);
    }

    #[test]
    fn a_rank_repeating_a_line_is_not_merged_with_itself() {
        let t = Instant::now();
        let mut m = Merger::new(2);
        m.push(0, b"tick\n".to_vec(), true, t);
        m.push(0, b"tick\n".to_vec(), true, t);
        m.push(1, b"tick\n".to_vec(), true, t);
        assert_eq!(texts(&m.take_all()), [("tick\n".into(), vec![0, 1]), ("tick\n".into(), vec![0])]);
    }

    #[test]
    fn pieces_without_newline_are_never_merged_and_keep_their_place() {
        let t = Instant::now();
        let mut m = Merger::new(2);
        m.push(0, b"first\n".to_vec(), true, t);
        m.push(0, b"partial".to_vec(), false, t);
        assert!(m.due(t).is_empty(), "rank 0's piece waits behind its line, which may still be joined");
        m.push(1, b"partial".to_vec(), false, t);
        m.push(1, b"first\n".to_vec(), true, t);
        // Rank 1 printed its piece first: it goes first, then the line both printed.
        assert_eq!(texts(&m.take_all()), [("partial".into(), vec![1]), ("first\n".into(), vec![0, 1]), ("partial".into(), vec![0])]);
    }

    #[test]
    fn one_rank_never_waits() {
        let t = Instant::now();
        let mut m = Merger::new(1);
        m.push(0, b"x\n".to_vec(), true, t);
        assert_eq!(m.due(t).len(), 1);
    }

    #[test]
    fn rank_lists_are_compact() {
        assert_eq!(rank_list(&[0, 1, 2, 3]), "0-3");
        assert_eq!(rank_list(&[0, 2, 5, 6, 7]), "0,2,5-7");
        assert_eq!(rank_list(&[4]), "4");
    }
}
