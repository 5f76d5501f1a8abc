//! Capability maps, as data: which enum value means the same capability in each revision.
//!
//! A capability crosses the gateway only if both the upstream's and the front's revision have
//! it: upstream value → hub value (dropped when the hub row has no value for the upstream's
//! revision) → front value (dropped when the front's revision has none). So a client is never
//! told it can do something its path can't: e.g. a v1 client of a v0.1 plugin never sees
//! snapshots, and a v0.1 or draft client never sees STAGE_UNSTAGE_VOLUME: its revision cannot
//! stage, so when the plugin requires staging the gateway stages for it (the gateway's `call::staging`).

use crate::dialect::Dialect;

/// One capability and its enum value per revision (`None`: the revision does not have it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapRow {
    pub name: &'static str,
    pub v1: i32,
    pub v0_3: Option<i32>,
    /// v0.2 (same package and values as v0.3, a subset of the capabilities).
    pub v0_2: Option<i32>,
    pub v0_1: Option<i32>,
    pub draft: Option<i32>,
    pub note: &'static str,
}

impl CapRow {
    /// This capability's value in `dialect`.
    pub fn value(&self, dialect: Dialect) -> Option<i32> {
        match dialect {
            Dialect::V1 => Some(self.v1),
            Dialect::V0_3 => self.v0_3,
            Dialect::V0_1 => self.v0_1,
            Dialect::V0_1Oneof => self.draft,
        }
    }
}

const fn cap(
    name: &'static str,
    v1: i32,
    v0_3: Option<i32>,
    v0_1: Option<i32>,
    draft: Option<i32>,
    note: &'static str,
) -> CapRow {
    CapRow {
        name,
        v1,
        v0_3,
        // v0.2 has everything of v0.3 but snapshots and topology, which arrived in v0.3.
        v0_2: v0_3,
        v0_1,
        draft,
        note,
    }
}

/// A row v0.3 introduced: a v0.2 peer does not have it.
const fn v0_3_only(mut row: CapRow) -> CapRow {
    row.v0_2 = None;
    row
}

/// `ControllerServiceCapability.RPC.Type`.
#[rustfmt::skip]
pub static CONTROLLER: &[CapRow] = &[
    cap("CREATE_DELETE_VOLUME", 1, Some(1), Some(1), Some(1), "since the draft"),
    cap("PUBLISH_UNPUBLISH_VOLUME", 2, Some(2), Some(2), Some(2), "since the draft"),
    cap("LIST_VOLUMES", 3, Some(3), Some(3), Some(3), "since the draft"),
    cap("GET_CAPACITY", 4, Some(4), Some(4), Some(4), "since the draft"),
    v0_3_only(cap("CREATE_DELETE_SNAPSHOT", 5, Some(5), None, None, "snapshots arrived in v0.3")),
    v0_3_only(cap("LIST_SNAPSHOTS", 6, Some(6), None, None, "snapshots arrived in v0.3")),
    cap("CLONE_VOLUME", 7, None, None, None, "v1.0"),
    cap("PUBLISH_READONLY", 8, None, None, None, "v1.0"),
    cap("EXPAND_VOLUME", 9, None, None, None, "v1.1"),
    cap("LIST_VOLUMES_PUBLISHED_NODES", 10, None, None, None, "v1.2"),
    cap("VOLUME_CONDITION", 11, None, None, None, "v1.3"),
    cap("GET_VOLUME", 12, None, None, None, "v1.3"),
    cap("SINGLE_NODE_MULTI_WRITER", 13, None, None, None, "v1.5"),
    cap("MODIFY_VOLUME", 14, None, None, None, "v1.9"),
    cap("GET_SNAPSHOT", 15, None, None, None, "v1.11"),
];

/// `NodeServiceCapability.RPC.Type`. v0.1 and the draft only have UNKNOWN.
#[rustfmt::skip]
pub static NODE: &[CapRow] = &[
    cap("STAGE_UNSTAGE_VOLUME", 1, Some(1), None, None,
        "v0.2; a pre-staging client never sees it"),
    cap("GET_VOLUME_STATS", 2, None, None, None, "v1.1"),
    cap("EXPAND_VOLUME", 3, None, None, None, "v1.1"),
    cap("VOLUME_CONDITION", 4, None, None, None, "v1.3"),
    cap("SINGLE_NODE_MULTI_WRITER", 5, None, None, None, "v1.5"),
    cap("VOLUME_MOUNT_GROUP", 6, None, None, None, "v1.5"),
];

/// `PluginCapability.Service.Type` (`GetPluginCapabilities`, v0.2+). For v0.1 and draft
/// upstreams the gateway synthesizes the answer: the column says what it may synthesize.
#[rustfmt::skip]
pub static PLUGIN_SERVICE: &[CapRow] = &[
    cap("CONTROLLER_SERVICE", 1, Some(1), Some(1), Some(1),
        "v0.1/draft: synthesized when the plugin answers ControllerGetCapabilities"),
    v0_3_only(cap("VOLUME_ACCESSIBILITY_CONSTRAINTS", 2, Some(2), None, None,
        "v0.3 ACCESSIBILITY_CONSTRAINTS; topology arrived in v0.3")),
    cap("GROUP_CONTROLLER_SERVICE", 3, None, None, None, "v1.8"),
    cap("SNAPSHOT_METADATA_SERVICE", 4, None, None, None, "v1.10"),
];

/// `PluginCapability.VolumeExpansion` (v1.1) has no counterpart in any older revision: it is
/// never passed to an older front and never synthesized for an older upstream.
pub const VOLUME_EXPANSION_NOTE: &str = "v1.1 only: dropped for older fronts, never synthesized";

/// Whether a v0.2 client may see hub (v1) `value` of `table` (a v0.3-package client told apart
/// as v0.2, see [`crate::front`]).
pub fn v0_2_has(table: &[CapRow], value: i32) -> bool {
    table.iter().any(|r| r.v1 == value && r.v0_2.is_some())
}

/// Front revisions whose clients need a non-empty `NodeGetCapabilities` list: an empty answer
/// reaches them as one `UNKNOWN` capability, which is what plugins of those revisions answered
/// when they had no node capability (their conformance suites assert the list is not nil, and
/// an empty repeated field decodes as nil).
pub static NODE_UNKNOWN_WHEN_EMPTY: &[(&str, &str)] = &[
    (
        "v0.1",
        "v0.1 has no node capability but UNKNOWN: the answer is always [UNKNOWN]",
    ),
    (
        "v0.2",
        "[UNKNOWN] when no capability v0.2 has is left (STAGE_UNSTAGE_VOLUME is its only one)",
    ),
    (
        "v0.3",
        "[UNKNOWN] when the list is empty: a `csi.v0` client may be of v0.2, whose csi-sanity \
         rejects an empty list (a nil slice in Go), and v0.3's lists UNKNOWN among its values",
    ),
];

/// Whether clients of `revision` get `[UNKNOWN]` for an empty node capability list.
pub fn node_unknown_when_empty(revision: &str) -> bool {
    NODE_UNKNOWN_WHEN_EMPTY.iter().any(|(r, _)| *r == revision)
}

/// `value` of `dialect` in `table` → the hub (v1) value, if the capability exists in v1.
pub fn to_hub(table: &[CapRow], dialect: Dialect, value: i32) -> Option<i32> {
    table
        .iter()
        .find(|r| r.value(dialect) == Some(value))
        .map(|r| r.v1)
}

/// Hub (v1) `value` in `table` → `dialect`'s value, if `dialect` has the capability.
pub fn from_hub(table: &[CapRow], dialect: Dialect, value: i32) -> Option<i32> {
    table
        .iter()
        .find(|r| r.v1 == value)
        .and_then(|r| r.value(dialect))
}

use crate::hub::v1;

/// A v1 controller capability with RPC type `v`.
pub(crate) fn v1_ctrl_cap(v: i32) -> v1::ControllerServiceCapability {
    use v1::controller_service_capability as t;
    v1::ControllerServiceCapability {
        r#type: Some(t::Type::Rpc(t::Rpc { r#type: v })),
    }
}
/// The RPC types of v1 controller capabilities.
pub(crate) fn v1_ctrl_values(c: Vec<v1::ControllerServiceCapability>) -> impl Iterator<Item = i32> {
    use v1::controller_service_capability::Type as T;
    c.into_iter().filter_map(|c| match c.r#type? {
        T::Rpc(r) => Some(r.r#type),
    })
}
/// A v1 node capability with RPC type `v`.
pub(crate) fn v1_node_cap(v: i32) -> v1::NodeServiceCapability {
    use v1::node_service_capability as t;
    v1::NodeServiceCapability {
        r#type: Some(t::Type::Rpc(t::Rpc { r#type: v })),
    }
}
/// The RPC types of v1 node capabilities.
pub(crate) fn v1_node_values(c: Vec<v1::NodeServiceCapability>) -> impl Iterator<Item = i32> {
    use v1::node_service_capability::Type as T;
    c.into_iter().filter_map(|c| match c.r#type? {
        T::Rpc(r) => Some(r.r#type),
    })
}
/// A v1 plugin service capability of type `v`.
pub(crate) fn v1_plugin_cap(v: i32) -> v1::PluginCapability {
    use v1::plugin_capability as t;
    v1::PluginCapability {
        r#type: Some(t::Type::Service(t::Service { r#type: v })),
    }
}
/// The service types of v1 plugin capabilities (`VolumeExpansion` entries are skipped).
pub(crate) fn v1_plugin_values(c: Vec<v1::PluginCapability>) -> impl Iterator<Item = i32> {
    use v1::plugin_capability::Type as T;
    c.into_iter().filter_map(|c| match c.r#type? {
        T::Service(s) => Some(s.r#type),
        T::VolumeExpansion(_) => None,
    })
}

/// A dialect's list of capabilities ↔ the hub's, through the `table` (a capability crosses only
/// if both revisions have it): `$to` and `$from` for the message `$msg` of dialect module `$p`,
/// whose `oneof type` variant `$variant` wraps `$inner { type }`. `$cap`/`$values` are the v1
/// side's helpers above.
macro_rules! capability_list_conversions {
    (
        $to:ident, $from:ident, $p:ident :: $msg:ident, $module:ident :: $variant:ident ($inner:ident),
        $table:expr, $dialect:expr, $cap:path, $values:path
    ) => {
        /// The capabilities this dialect reports → the hub's (the `capabilities` table).
        pub(crate) fn $to(c: Vec<crate::dialect::proto::$p::$msg>) -> Vec<crate::hub::v1::$msg> {
            use crate::dialect::proto::$p::$module::Type as T;
            c.into_iter()
                .filter_map(|c| match c.r#type? {
                    T::$variant(r) => crate::capabilities::to_hub($table, $dialect, r.r#type),
                })
                .map($cap)
                .collect()
        }
        /// The hub's capabilities → those this dialect knows (the `capabilities` table).
        pub(crate) fn $from(c: Vec<crate::hub::v1::$msg>) -> Vec<crate::dialect::proto::$p::$msg> {
            use crate::dialect::proto::$p::$module as t;
            $values(c)
                .filter_map(|v| crate::capabilities::from_hub($table, $dialect, v))
                .map(|v| crate::dialect::proto::$p::$msg {
                    r#type: Some(t::Type::$variant(t::$inner { r#type: v })),
                })
                .collect()
        }
    };
}
pub(crate) use capability_list_conversions;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::proto::{v0_1, v0_1_oneof, v0_3, v1};

    #[test]
    fn names_and_values_match_the_generated_enums() {
        use v1::controller_service_capability::rpc::Type as C1;
        use v1::node_service_capability::rpc::Type as N1;
        use v1::plugin_capability::service::Type as P1;
        for r in CONTROLLER {
            assert_eq!(C1::try_from(r.v1).unwrap().as_str_name(), r.name);
            if let Some(v) = r.v0_3 {
                let n = v0_3::controller_service_capability::rpc::Type::try_from(v).unwrap();
                assert_eq!(n.as_str_name(), r.name);
            }
            if let Some(v) = r.v0_1 {
                let n = v0_1::controller_service_capability::rpc::Type::try_from(v).unwrap();
                assert_eq!(n.as_str_name(), r.name);
            }
            if let Some(v) = r.draft {
                let n = v0_1_oneof::controller_service_capability::rpc::Type::try_from(v).unwrap();
                assert_eq!(n.as_str_name(), r.name);
            }
        }
        for r in NODE {
            assert_eq!(N1::try_from(r.v1).unwrap().as_str_name(), r.name);
            if let Some(v) = r.v0_3 {
                let n = v0_3::node_service_capability::rpc::Type::try_from(v).unwrap();
                assert_eq!(n.as_str_name(), r.name);
            }
        }
        for r in PLUGIN_SERVICE {
            assert_eq!(P1::try_from(r.v1).unwrap().as_str_name(), r.name);
            if let Some(v) = r.v0_3 {
                let n = v0_3::plugin_capability::service::Type::try_from(v).unwrap();
                // v0.3 spelled it ACCESSIBILITY_CONSTRAINTS.
                assert!(r.name.ends_with(n.as_str_name()), "{}", r.name);
            }
        }
        // Every non-UNKNOWN v1 value has a row.
        for v in 1..32 {
            assert_eq!(
                C1::try_from(v).is_ok(),
                CONTROLLER.iter().any(|r| r.v1 == v)
            );
            assert_eq!(N1::try_from(v).is_ok(), NODE.iter().any(|r| r.v1 == v));
            assert_eq!(
                P1::try_from(v).is_ok(),
                PLUGIN_SERVICE.iter().any(|r| r.v1 == v)
            );
        }
    }

    #[test]
    fn filtering_drops_what_a_revision_lacks() {
        assert_eq!(to_hub(CONTROLLER, Dialect::V0_3, 5), Some(5));
        assert_eq!(from_hub(CONTROLLER, Dialect::V0_1, 5), None);
        assert_eq!(from_hub(CONTROLLER, Dialect::V0_1Oneof, 6), None);
        assert_eq!(from_hub(CONTROLLER, Dialect::V0_3, 9), None);
        assert_eq!(from_hub(NODE, Dialect::V0_1, 1), None);
        assert_eq!(from_hub(NODE, Dialect::V0_1Oneof, 1), None);
        assert_eq!(from_hub(NODE, Dialect::V0_3, 1), Some(1));
        assert_eq!(to_hub(NODE, Dialect::V0_3, 7), None);
        assert_eq!(
            to_hub(CONTROLLER, Dialect::V0_1, 0),
            None,
            "UNKNOWN never crosses"
        );
        assert_eq!(from_hub(PLUGIN_SERVICE, Dialect::V0_3, 3), None);
        assert_eq!(from_hub(PLUGIN_SERVICE, Dialect::V0_3, 2), Some(2));
    }
}
