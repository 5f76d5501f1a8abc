//! The gateway's budgets, one for all connections together, held in [`super::Shared`]: the
//! request and reply bytes it holds (`Budget`, against `max_buffered_bytes`) and the streams
//! clients reset (`Rate`, against `max_resets_per_second`); the limits of one connection are
//! its own (`splice::limits`).
//!
//! The buffer budget is a ledger: every byte held against it is held by a [`Hold`], which
//! gives what it holds back when dropped, however its holder ends (a connection closed, a
//! task aborted, a call cancelled). Nothing else moves the shared count, so nothing can leak
//! from it or give back twice (as pingora's `inflight::Guard`). What is held: the request
//! bytes of calls the gateway reads itself and of its services' streams, and the reply bytes
//! it holds for clients, all connections together.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The bytes held by every connection together, against `max_buffered_bytes`.
#[derive(Debug)]
pub struct Budget {
    used: AtomicUsize,
    limit: usize,
}

impl Budget {
    pub fn new(limit: usize) -> Arc<Budget> {
        Arc::new(Budget {
            used: AtomicUsize::new(0),
            limit,
        })
    }

    /// A hold of nothing yet, to which bytes are added as they are held.
    pub fn hold(self: &Arc<Self>) -> Hold {
        Hold {
            budget: self.clone(),
            held: 0,
        }
    }

    /// `n` bytes of room, if they fit within the limit: room reserved before what fills it is
    /// made (a reply the gateway produces itself), so that the gateway never holds more than
    /// its limit. `None`, and nothing taken, when they would not fit.
    pub fn reserve(self: &Arc<Self>, n: usize) -> Option<Hold> {
        let taken = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(n).filter(|total| *total <= self.limit)
            })
            .is_ok();
        taken.then(|| Hold {
            budget: self.clone(),
            held: n,
        })
    }

    /// Whether more may be granted.
    pub fn room(&self) -> bool {
        self.used() < self.limit
    }

    /// What every hold holds now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
}

/// Bytes held against the [`Budget`] until dropped.
#[derive(Debug)]
#[must_use = "dropping a Hold gives its bytes back at once"]
pub struct Hold {
    budget: Arc<Budget>,
    held: usize,
}

impl Hold {
    /// What this hold holds.
    pub fn len(&self) -> usize {
        self.held
    }

    pub fn is_empty(&self) -> bool {
        self.held == 0
    }

    /// `n` more bytes held: bytes already received, counted even past the limit (the limit
    /// decides what is granted next, not what already came).
    pub fn add(&mut self, n: usize) {
        self.budget.used.fetch_add(n, Ordering::Relaxed);
        self.held += n;
    }

    /// `n` of the bytes held are let go.
    ///
    /// # Panics
    /// If this hold holds fewer than `n`: the caller's count is wrong.
    pub fn release(&mut self, n: usize) {
        assert!(n <= self.held, "releasing {n} of {} bytes held", self.held);
        self.budget.used.fetch_sub(n, Ordering::Relaxed);
        self.held -= n;
    }

    /// Holds exactly `n` bytes from now on (a count kept elsewhere, brought up to date).
    pub fn set(&mut self, n: usize) {
        match n >= self.held {
            true => self.add(n - self.held),
            false => self.release(self.held - n),
        }
    }

    /// `n` of the bytes held, moved to a hold of their own (the count unchanged): what a
    /// connection held for a request, handed to the call that reads it.
    pub fn split(&mut self, n: usize) -> Hold {
        assert!(n <= self.held, "splitting {n} of {} bytes held", self.held);
        self.held -= n;
        Hold {
            budget: self.budget.clone(),
            held: n,
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.held, Ordering::Relaxed);
    }
}

/// Counts events in one-second windows: `true` once more than `per_second` came in one.
#[derive(Debug)]
pub struct Rate {
    window: std::time::Instant,
    count: u32,
}

impl Default for Rate {
    fn default() -> Rate {
        Rate {
            window: std::time::Instant::now(),
            count: 0,
        }
    }
}

impl Rate {
    pub fn exceeded(&mut self, now: std::time::Instant, per_second: u32) -> bool {
        if now.duration_since(self.window) >= Duration::from_secs(1) {
            self.window = now;
            self.count = 0;
        }
        self.count += 1;
        self.count > per_second
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn rate_counts_per_second() {
        let start = Instant::now();
        let mut r = Rate::default();
        for _ in 0..3 {
            assert!(!r.exceeded(start, 3));
        }
        assert!(r.exceeded(start, 3));
        assert!(
            !r.exceeded(start + Duration::from_secs(2), 3),
            "a new second"
        );
    }

    #[test]
    fn budget_has_room_until_its_limit() {
        let b = Budget::new(10);
        let mut hold = b.hold();
        hold.add(9);
        assert!(b.room());
        hold.add(5);
        assert!(!b.room(), "granted bytes are counted past the limit");
        hold.release(5);
        assert!(b.room());
        assert_eq!(b.used(), 9);
    }

    #[test]
    fn budget_reserves_only_within_its_limit() {
        let b = Budget::new(10);
        let six = b.reserve(6).expect("fits");
        assert_eq!(b.used(), 6);
        assert!(b.reserve(5).is_none(), "6 + 5 is past 10");
        assert_eq!(b.used(), 6, "a refused reservation takes nothing");
        let four = b.reserve(4).expect("up to the limit exactly");
        assert_eq!(b.used(), 10);
        let mut three = b.hold();
        three.add(3);
        assert!(!b.room(), "granted bytes past the limit leave none");
        assert!(b.reserve(1).is_none());
        drop((six, four, three));
        assert!(b.reserve(10).is_some(), "all of it once given back");
    }

    #[test]
    fn budget_reservations_race_within_the_limit() {
        let b = Budget::new(1000);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || {
                    (0..1000).filter_map(|_| b.reserve(7)).collect::<Vec<_>>()
                })
            })
            .collect();
        let holds: Vec<Hold> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        assert_eq!(
            holds.len(),
            1000 / 7,
            "as many as fit, from every thread together"
        );
        assert_eq!(b.used(), holds.len() * 7);
        drop(holds);
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn a_hold_gives_back_what_it_holds_when_dropped() {
        let budget = Budget::new(10);
        let mut hold = budget.hold();
        hold.add(4);
        hold.add(8); // past the limit: already received
        assert_eq!(budget.used(), 12);
        assert!(!budget.room());
        hold.release(5);
        assert_eq!((hold.len(), budget.used()), (7, 7));
        drop(hold);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn room_is_reserved_only_within_the_limit() {
        let budget = Budget::new(10);
        let six = budget.reserve(6).expect("fits");
        assert!(budget.reserve(5).is_none(), "11 > 10: nothing taken");
        assert_eq!(budget.used(), 6);
        let four = budget.reserve(4).expect("fits exactly");
        assert_eq!(budget.used(), 10);
        drop((six, four));
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn set_and_split_keep_the_count() {
        let budget = Budget::new(100);
        let mut hold = budget.hold();
        hold.set(30);
        hold.set(10);
        assert_eq!(budget.used(), 10);
        let part = hold.split(4);
        assert_eq!((hold.len(), part.len(), budget.used()), (6, 4, 10));
        drop(hold);
        assert_eq!(budget.used(), 4);
        drop(part);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    #[should_panic(expected = "releasing 3 of 2 bytes held")]
    fn releasing_more_than_held_is_a_bug_caught() {
        let budget = Budget::new(10);
        let mut hold = budget.hold();
        hold.add(2);
        hold.release(3);
    }

    #[test]
    fn holds_on_many_threads_add_up_and_return_to_zero() {
        let budget = Budget::new(1000);
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let budget = budget.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        let mut hold = budget.hold();
                        hold.add(3);
                        let _room = budget.reserve(1);
                        hold.release(1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(budget.used(), 0);
    }
}
