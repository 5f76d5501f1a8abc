//! The call layer: what becomes of one call, with no transport in it. A call's way to the
//! plugin is one pipeline ([`Pipeline`]): the CO's target paths where the gateway owns them
//! ([`paths`]), staging emulated for a client that predates it ([`staging`]), then the
//! translation to the plugin's dialect (`translate::call_upstream`). Before it, the call is
//! routed by its gRPC path ([`router`]) and admitted ([`plan`]); calls to the gateway's own
//! services (reflection, health) go to [`services`] instead. What every call needs is
//! [`Shared`], and the budgets every connection counts against are [`budget`]'s. The
//! connection layer (`splice`: the front and its listeners) hands calls down here; nothing
//! here names it.

pub mod answer;
pub mod budget;
pub mod checked;
pub mod guard;
pub mod paths;
pub mod plan;
pub mod protect;
pub mod rescue;
pub mod router;
pub mod services;
mod shared;
pub mod staging;
pub mod upstream;

pub use router::Router;
pub use shared::Shared;
pub use upstream::Pipeline;
