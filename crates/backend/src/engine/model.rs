//! The dialect-free data model: what a volume, snapshot, attachment and publication are. These
//! types are also the durable state's schema (`state.json`), so changes must stay readable.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A topology segment: the node's (or a requirement's) key/value labels.
pub type Segment = BTreeMap<String, String>;

/// How a volume is backed and consumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A directory, consumed as a mounted filesystem.
    Mount,
    /// A sparse file, consumed as a raw block device.
    Block,
}

/// The access modes of CSI v1.12 (older dialects use a subset).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessMode {
    SingleNodeWriter,
    SingleNodeReaderOnly,
    MultiNodeReaderOnly,
    MultiNodeSingleWriter,
    MultiNodeMultiWriter,
    SingleNodeSingleWriter,
    SingleNodeMultiWriter,
}

impl AccessMode {
    /// Whether the volume may be attached to at most one node.
    pub fn single_node(self) -> bool {
        matches!(
            self,
            AccessMode::SingleNodeWriter
                | AccessMode::SingleNodeReaderOnly
                | AccessMode::SingleNodeSingleWriter
                | AccessMode::SingleNodeMultiWriter
        )
    }

    /// From the wire number, which every dialect shares (1..=5 since the draft; 6 and 7 since
    /// v1.5). `newest` is the highest number the calling dialect defines.
    pub fn from_wire(n: i32, newest: i32) -> Option<AccessMode> {
        if n > newest {
            return None;
        }
        Some(match n {
            1 => AccessMode::SingleNodeWriter,
            2 => AccessMode::SingleNodeReaderOnly,
            3 => AccessMode::MultiNodeReaderOnly,
            4 => AccessMode::MultiNodeSingleWriter,
            5 => AccessMode::MultiNodeMultiWriter,
            6 => AccessMode::SingleNodeSingleWriter,
            7 => AccessMode::SingleNodeMultiWriter,
            _ => return None,
        })
    }

    pub fn to_wire(self) -> i32 {
        match self {
            AccessMode::SingleNodeWriter => 1,
            AccessMode::SingleNodeReaderOnly => 2,
            AccessMode::MultiNodeReaderOnly => 3,
            AccessMode::MultiNodeSingleWriter => 4,
            AccessMode::MultiNodeMultiWriter => 5,
            AccessMode::SingleNodeSingleWriter => 6,
            AccessMode::SingleNodeMultiWriter => 7,
        }
    }

    /// Whether the mode only allows reading.
    pub fn read_only(self) -> bool {
        matches!(
            self,
            AccessMode::SingleNodeReaderOnly | AccessMode::MultiNodeReaderOnly
        )
    }
}

/// One requested volume capability.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capability {
    pub kind: Kind,
    /// Filesystem type for mount access; empty means "don't care".
    #[serde(default)]
    pub fs_type: String,
    #[serde(default)]
    pub mount_flags: Vec<String>,
    pub mode: AccessMode,
}

/// Where a new volume's initial content comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Snapshot(String),
    Volume(String),
}

/// One node a volume is attached to (ControllerPublish).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    pub readonly: bool,
    pub capability: Capability,
}

/// The staging of a volume at a staging path on this node (NodeStage).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Staging {
    pub capability: Capability,
}

/// One target path a volume is published at on this node (NodePublish).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Publication {
    pub readonly: bool,
    pub capability: Capability,
    #[serde(default)]
    pub staging_path: String,
    /// How the target was made, so unpublish undoes exactly that even if the flag changed.
    pub symlink: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Volume {
    pub id: String,
    pub name: String,
    pub kind: Kind,
    pub capacity: u64,
    pub parameters: BTreeMap<String, String>,
    #[serde(default)]
    pub mutable_parameters: BTreeMap<String, String>,
    pub source: Option<Source>,
    /// The capabilities the volume was created with (for the idempotency check).
    pub capabilities: Vec<Capability>,
    #[serde(default)]
    pub accessible_topology: Vec<Segment>,
    /// Node id → attachment.
    #[serde(default)]
    pub attachments: BTreeMap<String, Attachment>,
    /// Staging path → staging.
    #[serde(default)]
    pub stagings: BTreeMap<String, Staging>,
    /// Target path → publication.
    #[serde(default)]
    pub publications: BTreeMap<String, Publication>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub id: String,
    pub name: String,
    pub source_volume_id: String,
    pub kind: Kind,
    pub size: u64,
    /// Creation time, nanoseconds since the Unix epoch.
    pub created_at_ns: i64,
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
}

/// Everything the engine persists. Backing data lives beside it under the data directory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// Bumped for every id handed out, so ids are never reused, even after a delete.
    pub next_id: u64,
    pub volumes: BTreeMap<String, Volume>,
    pub snapshots: BTreeMap<String, Snapshot>,
}

impl State {
    /// Capacity accounted against the pool: every volume and every snapshot copy.
    pub fn used(&self) -> u64 {
        let volumes: u64 = self.volumes.values().map(|v| v.capacity).sum();
        let snapshots: u64 = self.snapshots.values().map(|s| s.size).sum();
        volumes.saturating_add(snapshots)
    }

    pub fn volume_by_name(&self, name: &str) -> Option<&Volume> {
        self.volumes.values().find(|v| v.name == name)
    }

    pub fn snapshot_by_name(&self, name: &str) -> Option<&Snapshot> {
        self.snapshots.values().find(|s| s.name == name)
    }

    /// Number of volumes attached to `node`.
    pub fn attached_to(&self, node: &str) -> usize {
        self.volumes
            .values()
            .filter(|v| v.attachments.contains_key(node))
            .count()
    }

    pub fn fresh_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}-{:06}", self.next_id)
    }
}
