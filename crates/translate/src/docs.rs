//! `docs/translation.md`, rendered from the tables (errors, capabilities, fields) so the user
//! documentation and the data never drift: a unit test asserts the committed file equals the
//! rendering; `UPDATE_DOCS=1 cargo test --lib docs` rewrites it.

use std::fmt::Write;

use super::capabilities::{self, CapRow};
use super::errors::{self, DraftRpc};
use super::{front, ids};

/// One renamed or retyped field, oldest revision first (`-`: the revision has no such field).
pub struct FieldRow {
    pub concept: &'static str,
    pub draft: &'static str,
    pub v0_1: &'static str,
    pub v0_3: &'static str,
    pub v1: &'static str,
    pub rule: &'static str,
}

const fn f(
    concept: &'static str,
    draft: &'static str,
    v0_1: &'static str,
    v0_3: &'static str,
    v1: &'static str,
    rule: &'static str,
) -> FieldRow {
    FieldRow {
        concept,
        draft,
        v0_1,
        v0_3,
        v1,
        rule,
    }
}

/// The field map the spokes implement (`v0_3/`, `v0_1/`, `v0_1_oneof/`: each `generated.rs` and
/// `overrides.rs`).
#[rustfmt::skip]
pub static FIELDS: &[FieldRow] = &[
    f("volume identity", "`VolumeHandle.id`", "`volume_id`", "`volume_id`", "`volume_id`", "renamed"),
    f("volume metadata", "`VolumeHandle.metadata`", "`volume_attributes` / `VolumeInfo.attributes`",
      "`volume_attributes` / `Volume.attributes`", "`volume_context`",
      "id-only calls to a draft plugin read it from the durable handle store (written before the CreateVolume/ListVolumes reply, and on publish; removed after delete); FAILED_PRECONDITION without a store; a volume unknown to the store is sent with empty metadata"),
    f("node identity", "`NodeID{values}`", "`node_id` string", "`node_id` string", "`node_id` string",
      "see the node id scheme below"),
    f("credentials", "`Credentials{data}`", "`user_credentials`",
      "`controller_create_secrets`, `controller_delete_secrets`, `controller_publish_secrets`, `controller_unpublish_secrets`, `node_stage_secrets`, `node_publish_secrets`, `create_snapshot_secrets`, `delete_snapshot_secrets`",
      "`secrets`", "renamed; secrets a revision has no field for (e.g. v1 ValidateVolumeCapabilities) are not sent"),
    f("publish info", "`PublishVolumeInfo{values}`", "`publish_volume_info`", "`publish_info`", "`publish_context`", "renamed"),
    f("capacities", "`uint64`", "`uint64`", "`int64`", "`int64`", "a value that does not fit is OUT_OF_RANGE, never wrapped"),
    f("list size", "`uint32 max_entries`", "`uint32 max_entries`", "`int32 max_entries`", "`int32 max_entries`",
      "negative → INVALID_ARGUMENT, over int32 → OUT_OF_RANGE"),
    f("request version", "`Version version`", "`Version version`", "-", "-",
      "checked on the front (v0.1: INVALID_ARGUMENT; draft: GeneralError UNSUPPORTED_REQUEST_VERSION / MISSING_REQUIRED_FIELD, must not retry); negotiated and filled in upstream"),
    f("probe", "`ProbeNode`", "`ControllerProbe` + `NodeProbe`", "`Probe`", "`Probe` (`ready` BoolValue, absent = ready)",
      "`ready = false` → v0.1 UNAVAILABLE, draft retryable GeneralError"),
    f("node id RPC", "`GetNodeID`", "`GetNodeID`", "`NodeGetId` (v0.2) / `NodeGetInfo`", "`NodeGetInfo`",
      "a csi.v0 plugin answering NodeGetInfo UNIMPLEMENTED is v0.2: NodeGetId"),
    f("plugin capabilities", "-", "-", "`GetPluginCapabilities`", "`GetPluginCapabilities`",
      "synthesized for v0.1/draft plugins: CONTROLLER_SERVICE only if ControllerGetCapabilities is served"),
    f("snapshot time", "-", "-", "`created_at` (int64 ns)", "`creation_time` (Timestamp)", "beyond int64 ns → OUT_OF_RANGE"),
    f("snapshot state", "-", "-", "`status` (READY, UPLOADING, ERROR_UPLOADING)", "`ready_to_use`",
      "READY ↔ true; UPLOADING/ERROR_UPLOADING → false; false → UPLOADING"),
    f("validation answer", "`supported`", "`supported`", "`supported`", "`confirmed` (present = supported)",
      "a supported v0.x answer confirms the request's context and capabilities"),
    f("clone source", "-", "-", "-", "`VolumeContentSource.volume`", "INVALID_ARGUMENT for older plugins"),
    f("snapshot source", "-", "-", "`VolumeContentSource.snapshot.id`", "`VolumeContentSource.snapshot.snapshot_id`",
      "INVALID_ARGUMENT for v0.1/draft plugins"),
    f("topology", "-", "-", "`accessibility_requirements`, `accessible_topology`", "same",
      "INVALID_ARGUMENT for v0.1/draft plugins; v0.3 ValidateVolumeCapabilities `accessible_topology` (removed in v1) → INVALID_ARGUMENT"),
    f("access modes", "modes 0–5", "modes 0–5", "modes 0–5", "adds SINGLE_NODE_SINGLE_WRITER, SINGLE_NODE_MULTI_WRITER",
      "v1-only modes and `volume_mount_group` → INVALID_ARGUMENT for older plugins"),
    f("v1-only parameters", "-", "-", "-", "`mutable_parameters`, ValidateVolumeCapabilities `parameters`",
      "non-empty → INVALID_ARGUMENT for older plugins"),
    f("staging", "-", "-", "`NodeStageVolume` / `NodeUnstageVolume`", "same",
      "pre-staging clients never see STAGE_UNSTAGE_VOLUME; while the plugin requires staging, the gateway emulates it for them: NodeStageVolume at a gateway-owned path on the first publish of a volume, published targets counted durably, NodeUnstageVolume after the last unpublish"),
    f("newer RPCs", "-", "-", "-", "expansion, stats, modify, get-volume/snapshot, group snapshots",
      "UNIMPLEMENTED for older plugins; snapshots UNIMPLEMENTED for v0.1/draft plugins"),
];

fn code(c: Option<tonic::Code>) -> String {
    match c {
        None => "OK".to_string(),
        Some(c) => format!("{c:?}").to_uppercase_snake(),
    }
}

trait Snake {
    fn to_uppercase_snake(&self) -> String;
}
impl Snake for String {
    fn to_uppercase_snake(&self) -> String {
        let mut out = String::new();
        for (i, ch) in self.chars().enumerate() {
            if ch.is_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_uppercase());
        }
        out
    }
}

fn cap_table(out: &mut String, title: &str, rows: &[CapRow]) {
    let cell = |v: Option<i32>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
    let _ = writeln!(out, "### {title}\n\n| capability | v1 | v0.3 | v0.2 | v0.1 | v0.1-oneof | note |\n| --- | --- | --- | --- | --- | --- | --- |");
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.name,
            r.v1,
            cell(r.v0_3),
            cell(r.v0_2),
            cell(r.v0_1),
            cell(r.draft),
            r.note
        );
    }
    out.push('\n');
}

/// The whole document.
pub fn render() -> String {
    let mut out = String::new();
    out.push_str("# Translation reference\n\n<!-- Generated from crates/translate/src (errors/, capabilities.rs, docs.rs). Do not edit: run `UPDATE_DOCS=1 cargo test -p csi-gateway-translate docs`. -->\n\n");
    out.push_str("Every call crosses the gateway through the hub model (CSI v1): front dialect → v1 → upstream dialect, and back. This page lists what changes on the way.\n\n");

    out.push_str("## Fields\n\n| concept | v0.1-oneof (draft) | v0.1 | v0.3 | v1 | rule |\n| --- | --- | --- | --- | --- | --- |\n");
    for r in FIELDS {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            r.concept, r.draft, r.v0_1, r.v0_3, r.v1, r.rule
        );
    }

    let _ = write!(out, "\n## Node ids\n\nA draft `NodeID {{ values }}` of the form `{{\"{}\": s}}` (s non-empty, not starting with `{}`) is the string `s`. Any other `NodeID` is `{}` followed by the unpadded URL-safe base64 of its protobuf encoding with map entries sorted by key; an absent `NodeID` is the empty string. The mapping is self-contained (a gateway on another machine decodes it without lookups) and refuses, with OUT_OF_RANGE, an encoding over {} bytes.\n\n", ids::PLAIN_KEY, ids::PREFIX, ids::PREFIX, ids::MAX_NODE_ID_BYTES);

    out.push_str("## Capabilities\n\nA capability is passed on only if both the plugin's and the client's revision have it (values per revision below; `-`: absent).\n\n");
    cap_table(
        &mut out,
        "Controller (`ControllerServiceCapability.RPC.Type`)",
        capabilities::CONTROLLER,
    );
    cap_table(
        &mut out,
        "Node (`NodeServiceCapability.RPC.Type`)",
        capabilities::NODE,
    );
    cap_table(
        &mut out,
        "Plugin services (`PluginCapability.Service.Type`)",
        capabilities::PLUGIN_SERVICE,
    );
    let _ = writeln!(
        out,
        "`PluginCapability.VolumeExpansion`: {}.\n",
        capabilities::VOLUME_EXPANSION_NOTE
    );
    out.push_str("An empty node capability list reaches these clients as `[UNKNOWN]`:\n\n| client | why |\n| --- | --- |\n");
    for (rev, why) in capabilities::NODE_UNKNOWN_WHEN_EMPTY {
        let _ = writeln!(out, "| {rev} | {why} |");
    }
    out.push_str("\n## v0.2 clients\n\nv0.2 and v0.3 share the package `csi.v0`, and a client's calls do not say which it speaks before it is too late (its first calls, the capability queries, are the same in both). So the operator says it: `listen.v0_dialect = \"v0.2\"` serves `csi.v0` as v0.2. Those clients get the capability answers filtered to the v0.2 column above (translated, never relayed, whatever the plugin speaks), and UNIMPLEMENTED for the RPCs v0.2 does not have:\n\n| RPC | why |\n| --- | --- |\n");
    for (rpc, why) in front::V0_2_ABSENT {
        let _ = writeln!(out, "| {rpc} | {why} |");
    }
    out.push_str("\nOn the plugin side no setting is needed: a `csi.v0` plugin that answers `NodeGetInfo` with UNIMPLEMENTED is v0.2.\n\n");

    out.push_str("## Required fields\n\nChecked by the gateway on every translated call, before anything else it or the plugin would check (so a missing field is INVALID_ARGUMENT, never a precondition such as FAILED_PRECONDITION \"staging target path not set\"); a draft client gets `GeneralError MISSING_REQUIRED_FIELD`, must not retry. Every listed field is REQUIRED in at least one revision that has the RPC (a translated call always has a gRPC-status revision on one side, whose plugin would refuse it or whose client broke its own rules); `volume_capabilities[].x` means every entry's `x`.\n\n| RPC | required, in order |\n| --- | --- |\n");
    for (m, fields) in errors::REQUIRED {
        let _ = writeln!(out, "| {} | {} |", m.name(), fields.join(", "));
    }

    out.push_str("\n## Errors between gRPC-status revisions\n\n| RPC | plugin | client | plugin's code | client's code | why |\n| --- | --- | --- | --- | --- | --- |\n");
    for r in errors::CODES {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            r.method.name(),
            r.upstream.label(),
            r.front.label(),
            code(Some(r.from)),
            code(r.to),
            r.why
        );
    }
    out.push_str("\n## Target paths\n\nv1 leaves `target_path` to the plugin (it creates and removes it); v0.x plugins expect the CO to have created it. Between a v1 client and a v0.x plugin the gateway creates a missing target before NodePublishVolume (a directory for mount access, an empty file for block access; never its parent) and, after a successful NodeUnpublishVolume, removes it if it is an empty directory or empty file that is not a mount point (`/proc/self/mountinfo`). A publish the plugin refuses removes a target that call created, on the same terms. Nothing is recorded, so a restart between the steps converges on the CO's retry.\n\n");

    out.push_str("## Errors: draft plugin → gRPC status (v0.1, v0.3 and v1 clients)\n\nThe draft answers gRPC OK with an `Error`; the gateway turns it into the status v0.1.0 prescribes for the same condition. The description becomes the status message.\n\n");
    for rpc in DraftRpc::ALL {
        let rows: Vec<_> = errors::SPECIFIC.iter().filter(|r| r.rpc == rpc).collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "### {} (`{}`)\n\n| draft error | gRPC | why |\n| --- | --- | --- |",
            rpc.name(),
            rpc.error_message().unwrap_or("-")
        );
        for r in rows {
            let _ = writeln!(out, "| {} | {} | {} |", r.name, code(r.code), r.why);
        }
        out.push('\n');
    }
    out.push_str("### GeneralError (any RPC)\n\n| draft error | caller_must_not_retry | gRPC | why |\n| --- | --- | --- | --- |\n");
    for g in errors::GENERAL {
        let m = g
            .must_not_retry
            .map(|m| m.to_string())
            .unwrap_or_else(|| "any".into());
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            g.name,
            m,
            code(Some(g.code)),
            g.why
        );
    }

    out.push_str("\nPer-RPC exceptions, when the request sets a field:\n\n| RPC | draft error | caller_must_not_retry | request sets | gRPC | why |\n| --- | --- | --- | --- | --- | --- |\n");
    for o in errors::GENERAL_OVERRIDES {
        let _ = writeln!(
            out,
            "| {} | {} | {} | `{}` | {} | {} |",
            o.rpc.name(),
            o.name,
            o.must_not_retry,
            o.when_set,
            code(Some(o.code)),
            o.why
        );
    }
    out.push_str("\n## Errors: gRPC status → draft client\n\nA status from a newer plugin (or the gateway itself) reaches a draft client as the RPC's own error where one fits:\n\n| RPC | gRPC | draft error |\n| --- | --- | --- |\n");
    for r in errors::SPECIFIC.iter().filter(|r| r.back().is_some()) {
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            r.rpc.name(),
            code(r.back()),
            r.name
        );
    }
    out.push_str("\nEvery other status becomes `GeneralError UNDEFINED` with the message as description and `caller_must_not_retry` from the code's recovery behaviour:\n\n| gRPC | caller_must_not_retry | why |\n| --- | --- | --- |\n");
    for (c, m, why) in errors::RETRY {
        let _ = writeln!(out, "| {} | {} | {} |", code(Some(*c)), m, why);
    }
    out.push_str("\nPer-RPC exceptions:\n\n| RPC | gRPC | caller_must_not_retry | why |\n| --- | --- | --- | --- |\n");
    for (rpc, c, m, why) in errors::RETRY_OVERRIDES {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            rpc.name(),
            code(Some(*c)),
            m,
            why
        );
    }
    out.push_str("\nA v1 plugin's OK stays OK for a draft client (e.g. DeleteVolume of a volume that does not exist). A client version the gateway does not serve gets `GeneralError UNSUPPORTED_REQUEST_VERSION` (must not retry) from a draft front and INVALID_ARGUMENT from a v0.1 front. A draft request the gateway cannot translate (e.g. a capacity over int64) is answered with the RPC's error from these tables, never with a bare gRPC status.\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_match_the_tables() {
        // The repository's docs/, two levels above this crate.
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/translation.md");
        let rendered = render();
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(path, &rendered).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == rendered,
            "docs/translation.md is stale: run `UPDATE_DOCS=1 cargo test -p csi-gateway-translate docs`"
        );
    }

    #[test]
    fn rendering_lists_every_row() {
        let doc = render();
        for r in errors::SPECIFIC {
            assert!(
                doc.contains(&format!("| {} | {} |", r.name, code(r.code))),
                "{r:?}"
            );
        }
        for r in capabilities::CONTROLLER
            .iter()
            .chain(capabilities::NODE)
            .chain(capabilities::PLUGIN_SERVICE)
        {
            assert!(
                doc.contains(&format!("| {} | {} |", r.name, r.v1)),
                "{}",
                r.name
            );
        }
        assert!(doc.contains("| DeleteVolume | FAILED_PRECONDITION | false |"));
        assert_eq!(
            code(Some(tonic::Code::FailedPrecondition)),
            "FAILED_PRECONDITION"
        );
    }
}
