//! csi-gateway-load: the project's load tool (binary `csi-gateway-load`, `main.rs`): a minimal
//! fixed-reply upstream ([`fixed`]), and a load generator that measures calls/s and latency
//! percentiles against any CSI endpoint, so the direct path and the gateway path can be
//! measured in the same run and compared as a ratio. The generator is this crate's own HTTP/2
//! client ([`generate`], on the gateway library's upstream connection) or h2load ([`h2load`]),
//! which shares no code with the gateway; [`cpu`] samples each process's CPU time. A plain tonic
//! pass-through proxy ([`tonic_proxy`]) is the reference point measured beside socat. The crash
//! loop ([`crashloop`]) SIGKILLs the gateway at random moments under concurrent clients and
//! checks, through the gateway library's stores, that its durable state lost and leaked
//! nothing.
//!
//! Its own crate, on top of the gateway library (`csi-gateway`), so the gateway's binary does
//! not carry it. The benches (`benches/` at the workspace root) drive its binary.
#![forbid(unsafe_code)]

pub mod cpu;
pub mod crashloop;
pub mod fixed;
pub mod generate;
pub mod h2load;
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

#[cfg(test)]
mod tests {
    use super::threads_for;

    #[test]
    fn one_thread_per_connection_up_to_the_cores() {
        assert_eq!(threads_for(1, 2), 1);
        assert_eq!(threads_for(2, 2), 2);
        assert_eq!(threads_for(4, 2), 2);
        assert_eq!(threads_for(0, 2), 1);
        assert_eq!(threads_for(3, 8), 3);
    }
}
