//! csi-gateway-load: the project's load tool (binary `csi-gateway-load`, `main.rs`): a minimal
//! fixed-reply upstream ([`fixed`]), and a load generator that measures calls/s and latency
//! percentiles against any CSI endpoint, so the direct path and the gateway path can be
//! measured in the same run and compared as a ratio. The generator is this crate's own HTTP/2
//! client ([`generate`], on the gateway library's upstream connection) or h2load ([`h2load`]),
//! which shares no code with the gateway; [`cpu`] samples each process's CPU time. A plain tonic
//! pass-through proxy ([`tonic_proxy`]) is the reference point measured beside socat. The crash
//! loop ([`crashloop`]) SIGKILLs the gateway at random moments under concurrent clients and
//! checks, through the gateway library's stores, that its durable state lost and leaked
//! nothing. [`cluster`] runs volume lifecycles through gateways sharing one etcd while a driver
//! injects faults, and reports each phase's figures and what was lost.
//!
//! Its own crate, on top of the gateway library (`csi-gateway`), so the gateway's binary does
//! not carry it. The benches (`benches/` at the workspace root) drive its binary.
#![forbid(unsafe_code)]

pub mod cluster;
pub mod cpu;
pub mod crashloop;
pub mod fixed;
pub mod generate;
pub mod h2load;
pub mod requests;
pub mod tonic_proxy;

pub use generate::{measure, Figures, Load};

/// The threads a generator runs calls on: one per connection, up to the machine's CPUs. A
/// connection's calls on one thread do not wake each other across cores, and two threads
/// never contend for one core, so the generator measures its target and not its own scheduling
/// (h2load's model, which the tool's own client follows).
pub fn generator_threads(connections: usize) -> usize {
    threads_for(
        connections,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    )
}

fn threads_for(connections: usize, cores: usize) -> usize {
    connections.min(cores).max(1)
}

/// `a`'s figure divided by `b`'s round by round: the median, and the quartiles that show how
/// far the rounds spread (`None` without a round). Two targets measured in one round share
/// that round's machine: drift between rounds (another process, frequency, the host) moves
/// both, so their ratio per round is steadier than the ratio of their separate medians.
pub fn paired_ratio(a: &[f64], b: &[f64]) -> Option<Spread> {
    let mut ratios: Vec<f64> = a
        .iter()
        .zip(b)
        .filter(|(_, b)| **b > 0.0)
        .map(|(a, b)| a / b)
        .collect();
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    Some(Spread {
        median: quantile(&ratios, 0.5),
        low: quantile(&ratios, 0.25),
        high: quantile(&ratios, 0.75),
    })
}

/// A ratio over rounds: the median and the first and third quartiles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub low: f64,
    pub high: f64,
}

/// The `q` quantile of sorted, non-empty `values`, interpolated between the two nearest.
fn quantile(values: &[f64], q: f64) -> f64 {
    let at = q * (values.len() - 1) as f64;
    let (below, above) = (at.floor() as usize, at.ceil() as usize);
    values[below] + (values[above] - values[below]) * (at - below as f64)
}

#[cfg(test)]
mod tests {
    use super::{paired_ratio, threads_for};

    #[test]
    fn a_paired_ratio_is_the_median_of_the_ratios_round_by_round() {
        let median = |a: &[f64], b: &[f64]| paired_ratio(a, b).map(|s| s.median);
        // Round 2 ran on a slower machine for both: its ratio (0.5) is like the others'.
        assert_eq!(
            median(&[50.0, 25.0, 60.0], &[100.0, 50.0, 100.0]),
            Some(0.5)
        );
        // Not the ratio of the medians (50 / 100 = 0.5 here would hide the spread).
        assert_eq!(median(&[90.0, 40.0, 30.0], &[100.0, 50.0, 60.0]), Some(0.8));
        assert_eq!(median(&[1.0, 3.0], &[1.0, 1.0]), Some(2.0));
        assert_eq!(paired_ratio(&[1.0], &[0.0]), None);
        assert_eq!(paired_ratio(&[], &[]), None);
    }

    #[test]
    fn the_quartiles_show_how_far_the_rounds_spread() {
        // Ratios 0.6, 0.8, 0.9, 1.0, 1.2 (given out of order).
        let spread = paired_ratio(&[9.0, 6.0, 12.0, 8.0, 10.0], &[10.0; 5]).unwrap();
        assert_eq!((spread.low, spread.median, spread.high), (0.8, 0.9, 1.0));
        // Between two rounds the quartile lies between their ratios.
        let spread = paired_ratio(&[1.0, 2.0], &[1.0, 1.0]).unwrap();
        assert_eq!((spread.low, spread.high), (1.25, 1.75));
        let one = paired_ratio(&[3.0], &[2.0]).unwrap();
        assert_eq!((one.low, one.median, one.high), (1.5, 1.5, 1.5));
    }

    #[test]
    fn one_thread_per_connection_up_to_the_cores() {
        assert_eq!(threads_for(1, 2), 1);
        assert_eq!(threads_for(2, 2), 2);
        assert_eq!(threads_for(4, 2), 2);
        assert_eq!(threads_for(0, 2), 1);
        assert_eq!(threads_for(3, 8), 3);
    }
}
