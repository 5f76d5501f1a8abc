//! The build-time half of the gateway's wire-identical fast path (`crates/translate/src/identical.rs` in
//! the gateway): for every unary RPC v0.3 and v1 both have, in each direction, whether its
//! messages are wire-compatible, decided from the descriptors by `build/identical.rs`.

use crate::dialect::Dialect;

/// One RPC both dialects have, in one direction, and whether its messages are wire-compatible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schema {
    pub front: Dialect,
    pub upstream: Dialect,
    pub method: &'static str,
    pub front_path: &'static str,
    pub upstream_path: &'static str,
    /// `None`: wire-compatible; else the first field or enum value that is not.
    pub why_not: Option<&'static str>,
    /// The front's request is a subset of the upstream's: whatever `why_not` says is about
    /// the reply.
    pub request_subset: bool,
    /// Neither revision's request message has a field: whatever bytes a client sends, the
    /// request it decodes to is the one empty request (`crates/translate/src/identical.rs`).
    pub request_empty: bool,
    /// The request's top-level fields as the upstream numbers them, (front, upstream), where
    /// the two revisions number them differently (`build/identical.rs`, `RENUMBERED`); a front
    /// field not listed is not copied. Empty where the numbers are the same.
    pub renumber: &'static [(u32, u32)],
}

include!(concat!(env!("OUT_DIR"), "/identical.rs"));
