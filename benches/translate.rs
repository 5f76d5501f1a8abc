//! The cost of translation, per RPC, on the largest official sample message of each type
//! (`tests/fixtures/csi-wire/<dialect>/vectors.jsonl`, the `full_*` cases: maps, long and
//! non-ASCII strings, integers at their limits). For each older dialect and each of its unary
//! RPCs:
//! - `front/<dialect>/<Method>/decode`: the client's request → hub request;
//! - `front/<dialect>/<Method>/encode`: the hub reply → the client's reply;
//! - `upstream/<dialect>/<Method>`: a hub request → the plugin's dialect and its (canned,
//!   in-process) reply back to the hub: the whole `call_upstream`, with no socket.
//!
//! `cargo bench --bench translate` (criterion; filter with e.g. `-- front/v0.1-oneof`).

use std::collections::HashMap;
use std::hint::black_box;
use std::path::PathBuf;

use base64::Engine as _;
use criterion::{criterion_group, criterion_main, Criterion};
use csi_gateway::dialect::Dialect;
use csi_gateway::hub;
use csi_gateway::translate::{self, CallError, FrontCall, RawUpstream, UpstreamSession, Version};
use tonic::Status;

/// The largest encoded sample of each message type of `dialect`.
fn largest(dialect: Dialect) -> HashMap<String, Vec<u8>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/csi-wire")
        .join(dialect.name())
        .join("vectors.jsonl");
    let mut out: HashMap<String, Vec<u8>> = HashMap::new();
    for line in std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
    {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(v["binary_b64"].as_str().unwrap())
            .unwrap();
        let slot = out
            .entry(v["message"].as_str().unwrap().to_string())
            .or_default();
        if bytes.len() > slot.len() {
            *slot = bytes;
        }
    }
    out
}

/// A plugin answering every path with the largest sample of its reply type.
struct Canned {
    replies: HashMap<&'static str, Vec<u8>>,
}

impl Canned {
    fn new(dialect: Dialect) -> Canned {
        let samples = largest(dialect);
        let replies = dialect
            .methods()
            .iter()
            .filter_map(|m| Some((m.path, samples.get(m.response)?.clone())))
            .collect();
        Canned { replies }
    }
}

impl RawUpstream for Canned {
    fn unary<'a>(&'a self, path: &'static str, _body: Vec<u8>) -> translate::UnaryFuture<'a> {
        let reply = self
            .replies
            .get(path)
            .cloned()
            .ok_or_else(|| CallError::upstream(Status::unimplemented(path)));
        Box::pin(async move { reply })
    }
}

fn front(c: &mut Criterion) {
    let hub_replies = largest(Dialect::V1);
    for dialect in [Dialect::V0_3, Dialect::V0_1, Dialect::V0_1Oneof] {
        let samples = largest(dialect);
        for m in dialect.methods() {
            let Some(request) = samples.get(m.request) else {
                continue;
            };
            c.bench_function(&format!("front/{dialect}/{}/decode", m.method), |b| {
                b.iter(|| black_box(translate::decode_front(dialect, m.path, black_box(request))))
            });
            // The reply direction needs the hub method this front RPC becomes.
            let Ok(FrontCall::Hub(req)) = translate::decode_front(dialect, m.path, request) else {
                continue;
            };
            let method = req.method();
            let Some(bytes) = hub_replies.get(&format!("csi.v1.{}Response", method.name())) else {
                continue;
            };
            let Ok(reply) = hub::Response::decode(method, bytes) else {
                continue;
            };
            c.bench_function(&format!("front/{dialect}/{}/encode", m.method), |b| {
                b.iter(|| {
                    black_box(translate::encode_front(
                        dialect,
                        m.path,
                        Ok(black_box(reply.clone())),
                    ))
                })
            });
        }
    }
}

fn upstream(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let hub_requests = largest(Dialect::V1);
    let store = MemoryStore::default();
    for dialect in [Dialect::V0_3, Dialect::V0_1, Dialect::V0_1Oneof] {
        let canned = Canned::new(dialect);
        let version = matches!(dialect, Dialect::V0_1 | Dialect::V0_1Oneof).then_some(Version {
            major: 0,
            minor: 1,
            patch: 0,
        });
        let session = UpstreamSession::new(dialect, version);
        for &method in hub::Method::ALL {
            let Some(bytes) = hub_requests.get(&format!("csi.v1.{}Request", method.name())) else {
                continue;
            };
            let request = hub::Request::decode(method, bytes).unwrap();
            c.bench_function(&format!("upstream/{dialect}/{}", method.name()), |b| {
                b.iter(|| {
                    let call = translate::call_upstream(
                        &session,
                        &canned,
                        Some(&store),
                        black_box(request.clone()),
                    );
                    black_box(runtime.block_on(call))
                })
            });
        }
    }
}

/// An in-memory handle store, so the benches measure translation rather than disk syncs.
#[derive(Default)]
struct MemoryStore(std::sync::Mutex<HashMap<String, HashMap<String, String>>>);

impl translate::HandleStore for MemoryStore {
    fn put<'a>(
        &'a self,
        id: &'a str,
        m: &'a HashMap<String, String>,
    ) -> translate::StoreFuture<'a, ()> {
        self.0.lock().unwrap().insert(id.to_string(), m.clone());
        Box::pin(std::future::ready(Ok(())))
    }
    fn get<'a>(
        &'a self,
        id: &'a str,
    ) -> translate::StoreFuture<'a, Option<HashMap<String, String>>> {
        let found = self.0.lock().unwrap().get(id).cloned();
        Box::pin(std::future::ready(Ok(found)))
    }
    fn remove<'a>(&'a self, id: &'a str) -> translate::StoreFuture<'a, ()> {
        self.0.lock().unwrap().remove(id);
        Box::pin(std::future::ready(Ok(())))
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(std::time::Duration::from_millis(200)).measurement_time(std::time::Duration::from_millis(600)).sample_size(20);
    targets = front, upstream
}
criterion_main!(benches);
