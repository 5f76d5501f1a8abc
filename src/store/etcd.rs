//! The etcd store: the same [`KeyValue`] contract on an etcd v3 cluster, so gateway replicas
//! share their state. A `Put` returns once etcd's Raft quorum committed it, which is the
//! durability the contract asks for.
//!
//! The client speaks gRPC over HTTP/2 *plaintext* to `etcd_endpoints` (loopback or a
//! cluster-internal network; etcd's TLS and auth are not configured by this build). It uses a
//! minimal subset of etcd's API (`proto-etcd/`, compiled by `build.rs`), because the
//! `etcd-client` crate needs a system `protoc` to build.
//!
//! [`KeyValue`] is synchronous (redb's commits are), while tonic is async: the client runs on
//! its own single-threaded runtime on a dedicated thread, and each operation is a message to
//! it with a bounded wait. That works under any runtime flavour of the caller, including the
//! gateway's current-thread mode, where blocking on the caller's own runtime would deadlock.

use std::sync::mpsc as sync_mpsc;
use std::time::Duration;

use tokio::sync::mpsc;
use tonic::transport::{Channel, Endpoint};

use super::{KeyValue, StoreError};

/// The generated client and messages (`proto-etcd/`).
#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod proto {
    pub mod mvccpb {
        include!(concat!(env!("OUT_DIR"), "/etcd/mvccpb.rs"));
    }
    pub mod etcdserverpb {
        include!(concat!(env!("OUT_DIR"), "/etcd/etcdserverpb.rs"));
    }
}

use proto::etcdserverpb::{kv_client::KvClient, DeleteRangeRequest, PutRequest, RangeRequest};

/// How long one etcd operation may take before the store reports itself unavailable.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(5);

enum Op {
    Put(Vec<u8>, Vec<u8>),
    Get(Vec<u8>),
    Delete(Vec<u8>),
    Scan(Vec<u8>),
}

type Reply = Result<Vec<(Vec<u8>, Vec<u8>)>, StoreError>;

struct Job {
    op: Op,
    reply: sync_mpsc::SyncSender<Reply>,
}

/// A [`KeyValue`] on etcd; every key is stored under `prefix`.
pub struct Etcd {
    jobs: mpsc::UnboundedSender<Job>,
    prefix: String,
    endpoints: String,
}

impl Etcd {
    /// Connects to `endpoints` (`http://host:port`) and checks that the cluster answers, so a
    /// wrong address fails the start-up rather than the first call.
    pub fn open(endpoints: &[String], prefix: &str) -> Result<Etcd, StoreError> {
        let list = endpoints.join(",");
        let fail = |message: String| StoreError::Open {
            path: format!("etcd {list}"),
            message,
        };
        let parsed = endpoints
            .iter()
            .map(|e| {
                Endpoint::from_shared(e.clone())
                    .map(|e| {
                        e.connect_timeout(OPERATION_TIMEOUT)
                            .timeout(OPERATION_TIMEOUT)
                    })
                    .map_err(|err| fail(format!("{e}: {err}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (jobs, rx) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("etcd-client".into())
            .spawn(move || serve(parsed, rx))
            .map_err(|e| fail(e.to_string()))?;
        let store = Etcd {
            jobs,
            prefix: prefix.to_string(),
            endpoints: list.clone(),
        };
        store
            .run(Op::Get(store.key("handle/")))
            .map_err(|e| fail(format!("not reachable: {e}")))?;
        Ok(store)
    }

    fn key(&self, key: &str) -> Vec<u8> {
        format!("{}{key}", self.prefix).into_bytes()
    }

    /// Sends one operation to the client thread and waits (bounded) for its outcome.
    fn run(&self, op: Op) -> Reply {
        let (reply, rx) = sync_mpsc::sync_channel(1);
        let gone = || StoreError::Io(format!("etcd {}: client stopped", self.endpoints));
        self.jobs.send(Job { op, reply }).map_err(|_| gone())?;
        let wait = || rx.recv_timeout(OPERATION_TIMEOUT * 2);
        // Blocking a worker of a multi-threaded runtime stalls its other tasks; tell tokio so
        // it moves them elsewhere. A current-thread runtime has no elsewhere: it just waits.
        let outcome = match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(wait),
            _ => wait(),
        };
        outcome.map_err(|_| {
            StoreError::Io(format!(
                "etcd {}: no answer within {:?}",
                self.endpoints,
                OPERATION_TIMEOUT * 2
            ))
        })?
    }
}

/// The client thread: one runtime, one balanced channel over every endpoint.
fn serve(endpoints: Vec<Endpoint>, mut jobs: mpsc::UnboundedReceiver<Job>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            while let Some(job) = jobs.blocking_recv() {
                let _ = job
                    .reply
                    .send(Err(StoreError::Io(format!("etcd runtime: {e}"))));
            }
            return;
        }
    };
    runtime.block_on(async move {
        let channel = Channel::balance_list(endpoints.into_iter());
        let client = KvClient::new(channel);
        while let Some(job) = jobs.recv().await {
            let mut client = client.clone();
            tokio::spawn(async move {
                let outcome = tokio::time::timeout(OPERATION_TIMEOUT, perform(&mut client, job.op))
                    .await
                    .unwrap_or_else(|_| {
                        Err(StoreError::Io(format!(
                            "etcd: no answer within {OPERATION_TIMEOUT:?}"
                        )))
                    });
                let _ = job.reply.send(outcome);
            });
        }
    });
}

fn rpc(e: tonic::Status) -> StoreError {
    StoreError::Io(format!("etcd: {:?}: {}", e.code(), e.message()))
}

/// The end of the range of every key starting with `prefix` (etcd's "prefix plus one").
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // All 0xff (or empty): every key from `prefix` on.
    vec![0]
}

async fn perform(client: &mut KvClient<Channel>, op: Op) -> Reply {
    match op {
        Op::Put(key, value) => {
            let req = PutRequest {
                key,
                value,
                ..Default::default()
            };
            client.put(req).await.map_err(rpc)?;
            Ok(Vec::new())
        }
        Op::Get(key) => range(client, key, Vec::new()).await,
        Op::Scan(prefix) => {
            let end = prefix_end(&prefix);
            range(client, prefix, end).await
        }
        Op::Delete(key) => {
            let req = DeleteRangeRequest {
                key,
                ..Default::default()
            };
            client.delete_range(req).await.map_err(rpc)?;
            Ok(Vec::new())
        }
    }
}

/// A linearizable read (etcd's default): it sees every write acknowledged before it began.
async fn range(client: &mut KvClient<Channel>, key: Vec<u8>, range_end: Vec<u8>) -> Reply {
    let req = RangeRequest {
        key,
        range_end,
        ..Default::default()
    };
    let resp = client.range(req).await.map_err(rpc)?.into_inner();
    Ok(resp.kvs.into_iter().map(|kv| (kv.key, kv.value)).collect())
}

impl KeyValue for Etcd {
    fn put(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.run(Op::Put(self.key(key), value.to_vec())).map(drop)
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.run(Op::Get(self.key(key)))?.pop().map(|(_, v)| v))
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.run(Op::Delete(self.key(key))).map(drop)
    }

    fn scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let strip = self.prefix.len();
        self.run(Op::Scan(self.key(prefix)))?
            .into_iter()
            .map(|(k, v)| {
                let k = String::from_utf8(k).map_err(|e| StoreError::Corrupt {
                    key: String::from_utf8_lossy(e.as_bytes()).into_owned(),
                    message: "a key that is not UTF-8".into(),
                })?;
                Ok((k[strip..].to_string(), v))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_the_prefix_plus_one() {
        assert_eq!(prefix_end(b"/gw/"), b"/gw0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }
}
