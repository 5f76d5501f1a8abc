//! Retry pauses with full jitter: each pause is drawn uniformly from zero up to an exponentially
//! growing ceiling. Gateways that lost the same etcd member or the same plugin at the same
//! moment (a rolling restart, a node reboot) would otherwise retry in lockstep, every one of
//! them at 0.1 s, 0.2 s, 0.4 s…, and hit the member that just came back all at once.

use std::time::Duration;

/// A doubling ceiling, capped, and a random pause under it.
#[derive(Clone, Debug)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    ceiling: Duration,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff {
            initial,
            max,
            ceiling: initial.min(max),
        }
    }

    /// The next pause: uniform in `[0, ceiling]`; the ceiling then doubles (up to `max`).
    pub fn next_pause(&mut self) -> Duration {
        let pause = full_jitter(self.ceiling, fastrand::f64());
        self.ceiling = (self.ceiling * 2).min(self.max);
        pause
    }

    /// After a success: the next failure starts again from `initial`.
    pub fn reset(&mut self) {
        self.ceiling = self.initial.min(self.max);
    }

    /// The ceiling of the next pause (for log messages).
    pub fn ceiling(&self) -> Duration {
        self.ceiling
    }
}

/// `ceiling` scaled by `unit` (a uniform draw from `[0, 1)`; clamped to `[0, 1]`).
pub fn full_jitter(ceiling: Duration, unit: f64) -> Duration {
    ceiling.mul_f64(unit.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_stays_under_its_ceiling_which_doubles_up_to_the_cap() {
        let (initial, max) = (Duration::from_millis(100), Duration::from_millis(800));
        let mut b = Backoff::new(initial, max);
        let mut ceilings = Vec::new();
        for _ in 0..6 {
            let ceiling = b.ceiling();
            ceilings.push(ceiling.as_millis());
            assert!(b.next_pause() <= ceiling);
        }
        assert_eq!(ceilings, [100, 200, 400, 800, 800, 800]);
        b.reset();
        assert_eq!(b.ceiling(), initial);
        // An initial pause above the cap starts at the cap.
        assert_eq!(Backoff::new(max * 2, max).ceiling(), max);
    }

    #[test]
    fn full_jitter_spans_zero_to_the_ceiling() {
        let c = Duration::from_secs(2);
        assert_eq!(full_jitter(c, 0.0), Duration::ZERO);
        assert_eq!(full_jitter(c, 0.5), Duration::from_secs(1));
        assert_eq!(full_jitter(c, 1.0), c);
        assert_eq!(full_jitter(c, 7.0), c, "a draw above 1 is clamped");
        assert_eq!(full_jitter(c, -1.0), Duration::ZERO);
    }

    #[test]
    fn pauses_of_many_retriers_spread_instead_of_coinciding() {
        // 64 gateways retrying at once: their first pauses under a 1 s ceiling spread over the
        // whole second (with lockstep, all 64 would be equal).
        let pauses: Vec<Duration> = (0..64)
            .map(|_| Backoff::new(Duration::from_secs(1), Duration::from_secs(1)).next_pause())
            .collect();
        let distinct: std::collections::BTreeSet<_> = pauses.iter().collect();
        assert!(distinct.len() > 32, "{pauses:?}");
        let early = pauses.iter().filter(|p| p.as_millis() < 500).count();
        assert!((8..=56).contains(&early), "{early} of 64 under 0.5 s");
    }
}
