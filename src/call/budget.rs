//! The gateway's budgets, one for all connections together, held in [`super::Shared`]: the
//! request and reply bytes it holds (`Budget`, against `max_buffered_bytes`) and the streams
//! clients reset (`Rate`, against `max_resets_per_second`). The connection layer takes from
//! and gives back to them (`splice`); the limits of one connection are its own
//! (`splice::limits`).

use std::time::Duration;

/// The request and reply bytes held by every connection together, against
/// `max_buffered_bytes`.
#[derive(Debug)]
pub struct Budget {
    used: std::sync::atomic::AtomicUsize,
    limit: usize,
}

impl Budget {
    pub fn new(limit: usize) -> Budget {
        Budget {
            used: std::sync::atomic::AtomicUsize::new(0),
            limit,
        }
    }

    /// `n` more bytes are held: already granted, they are counted even past the limit.
    pub fn take(&self, n: usize) {
        self.used.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn give(&self, n: usize) {
        self.used.fetch_sub(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Takes `n` bytes only if the total stays within the limit: room reserved before what
    /// fills it is made (a reply produced by the gateway itself), so that the gateway never
    /// holds more than its limit. False, and nothing taken, when it would not fit.
    pub fn try_take(&self, n: usize) -> bool {
        use std::sync::atomic::Ordering;
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(n).filter(|total| *total <= self.limit)
            })
            .is_ok()
    }

    /// Whether more may be granted.
    pub fn room(&self) -> bool {
        self.used() < self.limit
    }

    pub fn used(&self) -> usize {
        self.used.load(std::sync::atomic::Ordering::Relaxed)
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
        b.take(9);
        assert!(b.room());
        b.take(5);
        assert!(!b.room(), "granted bytes are counted past the limit");
        b.give(5);
        assert!(b.room());
        assert_eq!(b.used(), 9);
    }

    #[test]
    fn budget_reserves_only_within_its_limit() {
        let b = Budget::new(10);
        assert!(b.try_take(6));
        assert_eq!(b.used(), 6);
        assert!(!b.try_take(5), "6 + 5 is past 10");
        assert_eq!(b.used(), 6, "a refused reservation takes nothing");
        assert!(b.try_take(4), "up to the limit exactly");
        assert_eq!(b.used(), 10);
        b.take(3);
        assert!(!b.room(), "granted bytes past the limit leave none");
        assert!(!b.try_take(1));
        b.give(13);
        assert!(b.try_take(10), "all of it once given back");
    }

    #[test]
    fn budget_reservations_race_within_the_limit() {
        let b = std::sync::Arc::new(Budget::new(1000));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || (0..1000).filter(|_| b.try_take(7)).count())
            })
            .collect();
        let taken: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(
            taken,
            1000 / 7,
            "as many as fit, from every thread together"
        );
        assert_eq!(b.used(), taken * 7);
    }
}
