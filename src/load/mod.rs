//! The project's load tool (`csi-gateway-load`): a minimal fixed-reply upstream, and a load
//! generator that measures calls/s and latency percentiles against any CSI endpoint, so the
//! direct path and the gateway path can be measured in the same run and compared as a ratio.

pub mod fixed;
pub mod generate;

pub use generate::{measure, Figures, Load};
