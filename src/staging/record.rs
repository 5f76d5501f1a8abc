//! The durable per-volume record of staging emulation, under `staging/<volume id>`:
//! `{staging_path, staged, targets}`. Its existence means "the volume may be staged at
//! `staging_path`", so the last unpublish unstages even when a crash hid whether NodeStageVolume
//! completed (unstaging what is not staged is OK in CSI).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::grpc::Status;
use crate::metrics;
use crate::store::{KeyValue, StoreError};

const PREFIX: &str = "staging/";

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

/// Records in a [`KeyValue`] store, plus the process-wide reference gauge.
pub struct Records {
    kv: Arc<dyn KeyValue>,
    /// Published targets across all records (`csi_gateway_staging_references`).
    references: AtomicI64,
}

fn unavailable(op: &'static str, e: StoreError) -> Status {
    metrics::store_operation(op, false);
    Status::unavailable(format!("staging emulation state: {e}"))
}

impl Records {
    /// Counts the references already recorded (a restart keeps the gauge truthful).
    pub fn open(kv: Arc<dyn KeyValue>) -> Result<Records, StoreError> {
        let mut total = 0;
        for (key, value) in kv.scan(PREFIX)? {
            let r: Record = serde_json::from_slice(&value).map_err(|e| StoreError::Corrupt {
                key,
                message: e.to_string(),
            })?;
            total += r.targets.len() as i64;
        }
        metrics::store_operation("scan", true);
        let records = Records {
            kv,
            references: AtomicI64::new(total),
        };
        records.publish_gauge();
        Ok(records)
    }

    fn publish_gauge(&self) {
        ::metrics::gauge!(metrics::STAGING_REFERENCES)
            .set(self.references.load(Ordering::Relaxed) as f64);
    }

    /// Volumes whose record has no target left: a last unpublish was interrupted between
    /// dropping its target and deleting the record.
    pub fn orphans(&self) -> Result<Vec<String>, Status> {
        let entries = self.kv.scan(PREFIX).map_err(|e| unavailable("scan", e))?;
        metrics::store_operation("scan", true);
        Ok(entries
            .into_iter()
            .filter(|(_, v)| {
                serde_json::from_slice::<Record>(v).is_ok_and(|r| r.targets.is_empty())
            })
            .map(|(k, _)| k[PREFIX.len()..].to_string())
            .collect())
    }

    pub fn load(&self, volume_id: &str) -> Result<Option<Record>, Status> {
        let key = format!("{PREFIX}{volume_id}");
        let Some(bytes) = self.kv.get(&key).map_err(|e| unavailable("get", e))? else {
            metrics::store_operation("get", true);
            return Ok(None);
        };
        let record = serde_json::from_slice(&bytes).map_err(|e| {
            unavailable(
                "get",
                StoreError::Corrupt {
                    key,
                    message: e.to_string(),
                },
            )
        })?;
        metrics::store_operation("get", true);
        Ok(Some(record))
    }

    /// Writes `record` durably; `delta` is the change in its target count (for the gauge).
    pub fn save(&self, volume_id: &str, record: &Record, delta: i64) -> Result<(), Status> {
        let value = serde_json::to_vec(record).expect("a record serializes");
        self.kv
            .put(&format!("{PREFIX}{volume_id}"), &value)
            .map_err(|e| unavailable("put", e))?;
        metrics::store_operation("put", true);
        self.adjust(delta);
        Ok(())
    }

    pub fn remove(&self, volume_id: &str) -> Result<(), Status> {
        self.kv
            .delete(&format!("{PREFIX}{volume_id}"))
            .map_err(|e| unavailable("delete", e))?;
        metrics::store_operation("delete", true);
        Ok(())
    }

    fn adjust(&self, delta: i64) {
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

    #[test]
    fn records_survive_a_reopen_and_count_references() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let record = Record {
            staging_path: "/s/x".into(),
            staged: true,
            targets: ["/t/1".to_string(), "/t/2".to_string()].into(),
        };
        {
            let kv = Arc::new(crate::store::embedded::Embedded::open(&path).unwrap());
            let r = Records::open(kv).unwrap();
            assert_eq!(r.load("vol").unwrap(), None);
            r.save("vol", &record, 2).unwrap();
            assert_eq!(r.references(), 2);
        }
        let kv = Arc::new(crate::store::embedded::Embedded::open(&path).unwrap());
        let r = Records::open(kv).unwrap();
        assert_eq!(r.references(), 2, "counted from the store at open");
        assert_eq!(r.load("vol").unwrap(), Some(record));
        r.remove("vol").unwrap();
        assert_eq!(r.load("vol").unwrap(), None);
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
