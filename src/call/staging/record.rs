//! The durable per-volume record of staging emulation, under
//! `node/<node id>/staging/<volume id>`: `{staging_path, staged, targets}`. Its existence means
//! "the volume may be staged at `staging_path` on that node", so the last unpublish unstages
//! even when a crash hid whether NodeStageVolume completed (unstaging what is not staged is OK
//! in CSI). Keyed by node, so node gateways sharing one etcd each see only their own mounts.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::grpc::Status;
use crate::metrics;
use crate::store::{Store, StoreError};

/// Where records were kept before they were keyed by node: adopted by the node that opens them.
const LEGACY_PREFIX: &str = "staging/";

/// CSI v1 caps `volume_id` at 128 bytes; the encoded name must stay a valid file name (255).
const MAX_VOLUME_ID: usize = 180;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub staging_path: String,
    /// NodeStageVolume answered OK at `staging_path`.
    pub staged: bool,
    /// Target paths recorded before their NodePublishVolume; removed after their unpublish.
    pub targets: BTreeSet<String>,
}

/// The gateway-owned staging path of a volume: its id in URL-safe base64 (reversible, no `/`,
/// no collisions) under the staging directory.
pub fn staging_path(dir: &Path, volume_id: &str) -> Result<PathBuf, Status> {
    if volume_id.is_empty() || volume_id.len() > MAX_VOLUME_ID {
        return Err(Status::invalid_argument(format!(
            "volume_id must be 1 to {MAX_VOLUME_ID} bytes for staging emulation"
        )));
    }
    Ok(dir.join(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(volume_id)))
}

/// This node's records in the [`Store`], plus the process-wide reference gauge.
pub struct Records {
    store: Arc<Store>,
    /// `node/<node id>/staging/`.
    prefix: String,
    /// Published targets across this node's records (`csi_gateway_staging_references`).
    references: AtomicI64,
}

const WHAT: &str = "staging emulation state";

fn decode(key: &str, value: &[u8]) -> Result<Record, StoreError> {
    serde_json::from_slice(value).map_err(|e| StoreError::Corrupt {
        key: key.to_string(),
        message: e.to_string(),
    })
}

/// `value` as a record; one that is not is reported as damaged and left out (it stops no start:
/// the calls for its volume get DATA_LOSS).
fn checked(store: &Store, key: &str, value: &[u8]) -> Option<Record> {
    decode(key, value)
        .map_err(|e| store.found_damaged(key, &e.to_string()))
        .ok()
}

impl Records {
    /// This node's records; adopts records written before they were keyed by node, and counts
    /// the references already recorded (a restart keeps the gauge truthful).
    pub async fn open(store: Arc<Store>, node_id: &str) -> Result<Records, StoreError> {
        let prefix = format!("node/{node_id}/staging/");
        for (key, value) in store.scan(LEGACY_PREFIX).await? {
            let volume_id = &key[LEGACY_PREFIX.len()..];
            if checked(&store, &key, &value).is_none() {
                continue;
            }
            store.put(&format!("{prefix}{volume_id}"), &value).await?;
            store.delete(&key).await?;
            tracing::info!(volume_id, node_id, "staging record adopted by this node");
        }
        let mut total = 0;
        for (key, value) in store.scan(&prefix).await? {
            total += checked(&store, &key, &value).map_or(0, |r| r.targets.len() as i64);
        }
        let records = Records {
            store,
            prefix,
            references: AtomicI64::new(total),
        };
        records.publish_gauge();
        Ok(records)
    }

    fn key(&self, volume_id: &str) -> String {
        format!("{}{volume_id}", self.prefix)
    }

    fn status(&self, e: StoreError) -> Status {
        self.store.status(WHAT, e)
    }

    fn publish_gauge(&self) {
        ::metrics::gauge!(metrics::STAGING_REFERENCES)
            .set(self.references.load(Ordering::Relaxed) as f64);
    }

    /// Volumes whose record has no target left: a last unpublish was interrupted between
    /// dropping its target and deleting the record.
    pub async fn orphans(&self) -> Result<Vec<String>, Status> {
        let entries = self
            .store
            .scan(&self.prefix)
            .await
            .map_err(|e| self.status(e))?;
        Ok(entries
            .into_iter()
            .filter(|(k, v)| decode(k, v).is_ok_and(|r| r.targets.is_empty()))
            .map(|(k, _)| k[self.prefix.len()..].to_string())
            .collect())
    }

    pub async fn load(&self, volume_id: &str) -> Result<Option<Record>, Status> {
        let key = self.key(volume_id);
        let Some(bytes) = self.store.get(&key).await.map_err(|e| self.status(e))? else {
            return Ok(None);
        };
        decode(&key, &bytes).map(Some).map_err(|e| {
            self.store.found_damaged(&key, &e.to_string());
            self.status(e)
        })
    }

    /// Writes `record` durably; `delta` is the change in its target count (for the gauge).
    pub async fn save(&self, volume_id: &str, record: &Record, delta: i64) -> Result<(), Status> {
        let value = serde_json::to_vec(record).expect("a record serializes");
        self.store
            .put(&self.key(volume_id), &value)
            .await
            .map_err(|e| self.status(e))?;
        self.adjust(delta);
        Ok(())
    }

    pub async fn remove(&self, volume_id: &str) -> Result<(), Status> {
        self.store
            .delete(&self.key(volume_id))
            .await
            .map_err(|e| self.status(e))
    }

    pub fn adjust(&self, delta: i64) {
        if delta != 0 {
            self.references.fetch_add(delta, Ordering::Relaxed);
            self.publish_gauge();
        }
    }

    /// The gauge's current value (for tests).
    pub fn references(&self) -> i64 {
        self.references.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(path: &Path) -> Arc<Store> {
        let kv = Arc::new(crate::store::embedded::Embedded::open(path).unwrap());
        Arc::new(Store::new(kv, std::time::Duration::from_secs(5)))
    }

    #[tokio::test]
    async fn records_survive_a_reopen_and_count_references_per_node() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let record = Record {
            staging_path: "/s/x".into(),
            staged: true,
            targets: ["/t/1".to_string(), "/t/2".to_string()].into(),
        };
        {
            let s = store(&path);
            // A record from before records were keyed by node: adopted by the first opener.
            let legacy = serde_json::to_vec(&record).unwrap();
            s.put("staging/old", &legacy).await.unwrap();
            let r = Records::open(s, "node-a").await.unwrap();
            assert_eq!(r.references(), 2, "the adopted record counts");
            assert_eq!(r.load("vol").await.unwrap(), None);
            r.save("vol", &record, 2).await.unwrap();
            assert_eq!(r.references(), 4);
        }
        let r = Records::open(store(&path), "node-a").await.unwrap();
        assert_eq!(r.references(), 4, "counted from the store at open");
        assert_eq!(r.load("vol").await.unwrap(), Some(record.clone()));
        assert_eq!(r.load("old").await.unwrap(), Some(record));
        r.remove("vol").await.unwrap();
        assert_eq!(r.load("vol").await.unwrap(), None);
        drop(r);
        // Another node sharing the store sees none of node-a's records.
        let b = Records::open(store(&path), "node-b").await.unwrap();
        assert_eq!((b.references(), b.load("old").await.unwrap()), (0, None));
    }

    #[test]
    fn staging_paths_are_reversible_file_names() {
        let p = staging_path(Path::new("/st"), "pvc/a b").unwrap();
        let name = p.file_name().unwrap().to_str().unwrap();
        assert!(!name.contains('/'));
        let back = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(name)
            .unwrap();
        assert_eq!(back, b"pvc/a b");
        assert!(staging_path(Path::new("/st"), &"x".repeat(200)).is_err());
        assert!(staging_path(Path::new("/st"), "").is_err());
    }
}
