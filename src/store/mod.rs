//! Durable gateway state behind one small contract: a key-value store whose writes are on disk
//! before they return. The gateway keeps VolumeHandle metadata in it for id-only calls to a
//! draft plugin, written before the reply that reveals it leaves the gateway.
//!
//! Two implementations, chosen by `state.backend`: [`embedded`], a redb database file in a
//! state directory — never beside the front socket, since the spec forbids other files next to
//! `CSI_ENDPOINT` — and [`etcd`], shared by gateway replicas.
//!
//! [`Store`] is what the rest of the gateway uses. It never blocks the caller's thread (redb
//! runs on tokio's blocking pool, etcd is async), bounds every operation by `state.timeout` so
//! a hung store fails its calls with UNAVAILABLE naming it while every other call goes on,
//! seals each value with a checksum ([`envelope`]), and remembers its last failure for the
//! health endpoints.
//!
//! A damaged value is one volume's loss, not the store's: start-up counts and logs each one and
//! starts anyway, calls that read it get DATA_LOSS, and the damaged keys are reported (`/readyz`
//! body, `csi_gateway_store_damaged_values`) until the key is written or deleted again.
//!
//! Keys: `handle/<volume id>` (VolumeHandle metadata, [`Handles`]),
//! `node/<node id>/staging/<volume id>` (staging emulation, [`crate::call::staging`]) and `health`
//! (the health endpoint's write probe).

pub mod embedded;
pub mod envelope;
pub mod etcd;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::grpc::Status;
use crate::translate::{HandleStore, StoreFuture};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state store {path}: {message}")]
    Open { path: String, message: String },
    #[error("{0}")]
    Io(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("the value under {key} is damaged: {message}")]
    Corrupt { key: String, message: String },
}

/// A boxed future of a [`KeyValue`] operation.
pub type KvFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Durable key-value storage. A write has reached the disk (or etcd's quorum) when it returns.
/// No operation blocks the calling thread.
pub trait KeyValue: Send + Sync {
    /// What the store is, for messages: `embedded database /path` or `etcd http://…`.
    fn name(&self) -> &str;
    fn put<'a>(&'a self, key: &'a str, value: Vec<u8>) -> KvFuture<'a, ()>;
    fn get<'a>(&'a self, key: &'a str) -> KvFuture<'a, Option<Vec<u8>>>;
    fn delete<'a>(&'a self, key: &'a str) -> KvFuture<'a, ()>;
    /// Every entry whose key starts with `prefix`, in key order (for start-up bookkeeping).
    fn scan<'a>(&'a self, prefix: &'a str) -> KvFuture<'a, Vec<(String, Vec<u8>)>>;
}

/// The gateway's view of a [`KeyValue`]: bounded operations, checksummed values, metrics and
/// the last failure.
pub struct Store {
    kv: Arc<dyn KeyValue>,
    timeout: Duration,
    /// The last failure of the store itself (not of a damaged value), until a write succeeds.
    failure: Mutex<Option<String>>,
    /// Keys whose value was found damaged, until they are written or deleted again.
    damaged: Mutex<BTreeSet<String>>,
}

const HEALTH_KEY: &str = "health";

impl Store {
    pub fn new(kv: Arc<dyn KeyValue>, timeout: Duration) -> Store {
        Store {
            kv,
            timeout,
            failure: Mutex::new(None),
            damaged: Mutex::new(BTreeSet::new()),
        }
    }

    pub fn name(&self) -> &str {
        self.kv.name()
    }

    /// One operation, bounded by the timeout, counted, and noted for the health endpoints.
    async fn run<T>(&self, op: &'static str, f: KvFuture<'_, T>) -> Result<T, StoreError> {
        let out = tokio::time::timeout(self.timeout, f)
            .await
            .unwrap_or(Err(StoreError::Timeout(self.timeout)));
        crate::metrics::store_operation(op, out.is_ok());
        let mut failure = self.failure.lock().expect("store failure");
        match &out {
            Err(e @ (StoreError::Io(_) | StoreError::Timeout(_) | StoreError::Open { .. })) => {
                *failure = Some(format!("{op}: {e}"))
            }
            // Only a write proves the store can commit again.
            Ok(_) if op == "put" || op == "delete" => *failure = None,
            _ => {}
        }
        out
    }

    pub async fn put(&self, key: &str, payload: &[u8]) -> Result<(), StoreError> {
        let sealed = envelope::seal(key, payload);
        self.run("put", self.kv.put(key, sealed)).await?;
        self.repaired(key);
        Ok(())
    }

    pub async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(stored) = self.run("get", self.kv.get(key)).await? else {
            return Ok(None);
        };
        self.unseal(key, &stored).map(Some)
    }

    pub async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.run("delete", self.kv.delete(key)).await?;
        self.repaired(key);
        Ok(())
    }

    /// Every intact entry under `prefix`. A damaged one is left out (and reported, see
    /// [`Store::damaged`]): it stands for one volume, which a get refuses with DATA_LOSS.
    pub async fn scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let entries = self.run("scan", self.kv.scan(prefix)).await?;
        Ok(entries
            .into_iter()
            .filter_map(|(k, v)| self.unseal(&k, &v).ok().map(|p| (k, p)))
            .collect())
    }

    /// At start-up: every value is checked, and each damaged one logged and counted (the
    /// gateway starts anyway; see the module's documentation). Values written before checksums
    /// existed (plain JSON) are sealed in place. Returns how many entries there are.
    pub async fn verify(&self) -> Result<usize, StoreError> {
        let entries = self.run("scan", self.kv.scan("")).await?;
        let count = entries.len();
        for (key, value) in entries {
            match envelope::open(&key, &value) {
                Ok(_) => {}
                Err(envelope::Damage::Unsealed)
                    if serde_json::from_slice::<serde_json::Value>(&value).is_ok() =>
                {
                    self.put(&key, &value).await?;
                }
                Err(d) => self.found_damaged(&key, &d.to_string()),
            }
        }
        Ok(count)
    }

    /// Notes that the value under `key` is damaged: logged once per key, counted until the key
    /// is written or deleted again.
    pub fn found_damaged(&self, key: &str, message: &str) {
        let mut damaged = self.damaged.lock().expect("store damaged");
        if damaged.insert(key.to_string()) {
            tracing::warn!(store = %self.name(), key, error = message, "a damaged value in the state store: calls that need it fail with DATA_LOSS until it is written or deleted again");
            crate::metrics::store_damaged_values(damaged.len());
        }
    }

    fn repaired(&self, key: &str) {
        let mut damaged = self.damaged.lock().expect("store damaged");
        if damaged.remove(key) {
            tracing::info!(store = %self.name(), key, "a damaged value in the state store was written again or deleted");
            crate::metrics::store_damaged_values(damaged.len());
        }
    }

    /// The keys whose value is damaged, in key order.
    pub fn damaged(&self) -> Vec<String> {
        let damaged = self.damaged.lock().expect("store damaged");
        damaged.iter().cloned().collect()
    }

    fn unseal(&self, key: &str, stored: &[u8]) -> Result<Vec<u8>, StoreError> {
        envelope::open(key, stored)
            .map(<[u8]>::to_vec)
            .map_err(|d| {
                self.found_damaged(key, &d.to_string());
                StoreError::Corrupt {
                    key: key.to_string(),
                    message: d.to_string(),
                }
            })
    }

    /// For `/healthz`: a small write, since a store that still reads may no longer commit.
    pub async fn check(&self) -> Result<(), String> {
        self.put(HEALTH_KEY, b"")
            .await
            .map_err(|e| format!("state store {}: {e}", self.name()))
    }

    /// For `/readyz`: the last failure of the store, until a write succeeds again.
    pub fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .expect("store failure")
            .as_ref()
            .map(|f| format!("state store {}: {f}", self.name()))
    }

    /// A failure as the status a call gets: UNAVAILABLE naming the store (the call may succeed
    /// once it is back), or DATA_LOSS for a damaged value (it will not).
    pub fn status(&self, what: &str, e: StoreError) -> Status {
        let message = format!("{what}: state store {}: {e}", self.name());
        match e {
            StoreError::Corrupt { .. } => Status::data_loss(message),
            _ => Status::unavailable(message),
        }
    }
}

/// VolumeHandle metadata kept in a [`Store`] under `handle/<volume id>`.
pub struct Handles {
    store: Arc<Store>,
}

impl Handles {
    pub fn new(store: Arc<Store>) -> Handles {
        Handles { store }
    }
}

fn key(volume_id: &str) -> String {
    format!("handle/{volume_id}")
}

const WHAT: &str = "durable handle store";

impl Handles {
    async fn put_async(
        &self,
        volume_id: &str,
        metadata: &HashMap<String, String>,
    ) -> Result<(), Status> {
        let sorted: BTreeMap<&String, &String> = metadata.iter().collect();
        let value = serde_json::to_vec(&sorted).expect("a string map serializes");
        self.store
            .put(&key(volume_id), &value)
            .await
            .map_err(|e| self.store.status(WHAT, e))
    }

    async fn get_async(&self, volume_id: &str) -> Result<Option<HashMap<String, String>>, Status> {
        let k = key(volume_id);
        let Some(bytes) = self
            .store
            .get(&k)
            .await
            .map_err(|e| self.store.status(WHAT, e))?
        else {
            return Ok(None);
        };
        let map = serde_json::from_slice(&bytes).map_err(|e| {
            self.store.found_damaged(&k, &e.to_string());
            let e = StoreError::Corrupt {
                key: k,
                message: e.to_string(),
            };
            self.store.status(WHAT, e)
        })?;
        Ok(Some(map))
    }
}

impl HandleStore for Handles {
    fn put<'a>(
        &'a self,
        volume_id: &'a str,
        metadata: &'a HashMap<String, String>,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.put_async(volume_id, metadata))
    }

    fn get<'a>(&'a self, volume_id: &'a str) -> StoreFuture<'a, Option<HashMap<String, String>>> {
        Box::pin(self.get_async(volume_id))
    }

    fn remove<'a>(&'a self, volume_id: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.store
                .delete(&key(volume_id))
                .await
                .map_err(|e| self.store.status(WHAT, e))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(path: &std::path::Path) -> Arc<Store> {
        let kv = embedded::Embedded::open(path).unwrap();
        Arc::new(Store::new(Arc::new(kv), Duration::from_secs(5)))
    }

    #[tokio::test]
    async fn handles_round_trip_through_a_real_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let meta: HashMap<String, String> = [("path".to_string(), "/data/v1".to_string())].into();
        {
            let h = Handles::new(store(&path));
            assert_eq!(h.get("vol-1").await.unwrap(), None);
            h.put("vol-1", &meta).await.unwrap();
        }
        // Reopened: what was put before is still there.
        let h = Handles::new(store(&path));
        assert_eq!(h.get("vol-1").await.unwrap(), Some(meta));
        h.remove("vol-1").await.unwrap();
        assert_eq!(h.get("vol-1").await.unwrap(), None);
        h.remove("vol-1").await.unwrap(); // removing twice is fine
    }

    #[tokio::test]
    async fn a_damaged_value_is_data_loss_and_a_plain_json_one_is_sealed_at_verify() {
        let dir = tempfile::tempdir().unwrap();
        let kv = Arc::new(embedded::Embedded::open(&dir.path().join("state.redb")).unwrap());
        let s = Store::new(kv.clone(), Duration::from_secs(5));
        kv.put("handle/old", b"{\"a\":\"1\"}".to_vec())
            .await
            .unwrap();
        assert_eq!(s.verify().await.unwrap(), 1);
        let h = Handles::new(Arc::new(s));
        assert_eq!(
            h.get("old").await.unwrap(),
            Some([("a".to_string(), "1".to_string())].into())
        );
        let mut sealed = kv.get("handle/old").await.unwrap().unwrap();
        *sealed.last_mut().unwrap() ^= 1;
        kv.put("handle/old", sealed).await.unwrap();
        let e = h.get("old").await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::DataLoss, "{e:?}");
        assert!(e.message().contains("handle/old"), "{e:?}");
    }
}
