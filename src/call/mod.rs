//! The call layer: what becomes of one call, with no transport in it. A call's way to the
//! plugin is one pipeline ([`Pipeline`]): the CO's target paths where the gateway owns them
//! ([`target`]), staging emulated for a client that predates it ([`staging`]), then the
//! translation to the plugin's dialect (`translate::call_upstream`). The connection layer
//! (`splice`, the listeners) hands calls down here; nothing here names it.

pub mod answer;
pub mod checked;
pub mod plan;
pub mod protect;
pub mod rescue;
pub mod staging;
pub mod target;
pub mod upstream;

pub use upstream::Pipeline;
