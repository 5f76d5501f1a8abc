//! The project's load tool (`csi-gateway-load`): a minimal fixed-reply upstream, and a load
//! generator that measures calls/s and latency percentiles against any CSI endpoint, so the
//! direct path and the gateway path can be measured in the same run and compared as a ratio.
//! The generator is this crate's own HTTP/2 client (`generate`) or h2load (`h2load`), which
//! shares no code with the gateway.

pub mod fixed;
pub mod generate;
pub mod h2load;
pub mod tonic_proxy;

pub use generate::{measure, Figures, Load};
