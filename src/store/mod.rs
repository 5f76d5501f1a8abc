//! Durable gateway state behind one small contract: a key-value store whose writes are on disk
//! before they return. The gateway keeps VolumeHandle metadata in it for id-only calls to a
//! draft plugin, written before the reply that reveals it leaves the gateway.
//!
//! Two implementations, chosen by `state.backend`: [`embedded`], a redb database file in a
//! state directory — never beside the front socket, since the spec forbids other files next to
//! `CSI_ENDPOINT` — and [`etcd`], shared by gateway replicas.
//!
//! Keys: `handle/<volume id>` (VolumeHandle metadata, [`Handles`]) and `staging/<volume id>`
//! (staging emulation, [`crate::staging`]).

pub mod embedded;
pub mod etcd;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::grpc::Status;
use crate::translate::HandleStore;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state store {path}: {message}")]
    Open { path: String, message: String },
    #[error("state store: {0}")]
    Io(String),
    #[error("state store holds an undecodable value under {key}: {message}")]
    Corrupt { key: String, message: String },
}

/// Durable key-value storage. A write has reached the disk (or etcd's quorum) when it returns.
pub trait KeyValue: Send + Sync {
    fn put(&self, key: &str, value: &[u8]) -> Result<(), StoreError>;
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    fn delete(&self, key: &str) -> Result<(), StoreError>;
    /// Every entry whose key starts with `prefix`, in key order (for start-up bookkeeping).
    fn scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError>;
}

/// VolumeHandle metadata kept in a [`KeyValue`] store under `handle/<volume id>`.
pub struct Handles {
    kv: Arc<dyn KeyValue>,
}

impl Handles {
    pub fn new(kv: Arc<dyn KeyValue>) -> Handles {
        Handles { kv }
    }
}

fn key(volume_id: &str) -> String {
    format!("handle/{volume_id}")
}

/// A store failure reaches the caller as UNAVAILABLE: the call may succeed once the store is back.
fn unavailable(op: &'static str, e: StoreError) -> Status {
    crate::metrics::store_operation(op, false);
    Status::unavailable(format!("durable handle store: {e}"))
}

impl HandleStore for Handles {
    fn put(&self, volume_id: &str, metadata: &HashMap<String, String>) -> Result<(), Status> {
        let sorted: BTreeMap<&String, &String> = metadata.iter().collect();
        let value = serde_json::to_vec(&sorted).expect("a string map serializes");
        self.kv
            .put(&key(volume_id), &value)
            .map_err(|e| unavailable("put", e))?;
        crate::metrics::store_operation("put", true);
        Ok(())
    }

    fn get(&self, volume_id: &str) -> Result<Option<HashMap<String, String>>, Status> {
        let k = key(volume_id);
        let Some(bytes) = self.kv.get(&k).map_err(|e| unavailable("get", e))? else {
            crate::metrics::store_operation("get", true);
            return Ok(None);
        };
        let map = serde_json::from_slice(&bytes).map_err(|e| {
            unavailable(
                "get",
                StoreError::Corrupt {
                    key: k,
                    message: e.to_string(),
                },
            )
        })?;
        crate::metrics::store_operation("get", true);
        Ok(Some(map))
    }

    fn remove(&self, volume_id: &str) -> Result<(), Status> {
        self.kv
            .delete(&key(volume_id))
            .map_err(|e| unavailable("delete", e))?;
        crate::metrics::store_operation("delete", true);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_through_a_real_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let meta: HashMap<String, String> = [("path".to_string(), "/data/v1".to_string())].into();
        {
            let h = Handles::new(Arc::new(embedded::Embedded::open(&path).unwrap()));
            assert_eq!(h.get("vol-1").unwrap(), None);
            h.put("vol-1", &meta).unwrap();
        }
        // Reopened: what was put before is still there.
        let h = Handles::new(Arc::new(embedded::Embedded::open(&path).unwrap()));
        assert_eq!(h.get("vol-1").unwrap(), Some(meta));
        h.remove("vol-1").unwrap();
        assert_eq!(h.get("vol-1").unwrap(), None);
        h.remove("vol-1").unwrap(); // removing twice is fine
    }
}
