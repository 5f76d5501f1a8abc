//! The project's load tool (`csi-gateway-load`): a minimal fixed-reply upstream, and a load
//! generator that measures calls/s and latency percentiles against any CSI endpoint, so the
//! direct path and the gateway path can be measured in the same run and compared as a ratio.
//! The generator is this crate's own HTTP/2 client (`generate`) or h2load (`h2load`), which
//! shares no code with the gateway. A plain tonic pass-through proxy (`tonic_proxy`) is the
//! reference point measured beside socat. The crash loop (`crashloop`) SIGKILLs the gateway at
//! random moments under concurrent clients and checks that its durable state lost and leaked
//! nothing.

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
