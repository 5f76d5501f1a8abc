//! The etcd store: the same [`KeyValue`] contract on an etcd v3 cluster, so gateway replicas
//! share their state. A `Put` returns once etcd's Raft quorum committed it, which is the
//! durability the contract asks for.
//!
//! The client speaks gRPC to `etcd_endpoints`: plaintext `http://` (loopback or a trusted
//! network), or `https://` with a client certificate ([`crate::tls::Dialer`], reloaded on
//! change or SIGHUP like the bridge's). With a user name and password, it asks etcd's
//! `Auth.Authenticate` for a token, sends it with every call, and asks again when etcd says
//! the token expired. It uses a minimal subset of etcd's API (`proto-etcd/`, compiled by
//! `crates/proto/build.rs`), because the `etcd-client` crate needs a system `protoc` to build.
//!
//! Every operation is async on the caller's runtime: a hung member delays only the calls that
//! use the store, each bounded by [`super::Store`]'s timeout. Within that bound, members are
//! tried in turn, starting with the last one that answered, each for at most its share of the
//! bound (a member cut off by a network split hangs rather than refuses, and must not take the
//! whole bound); when none answered, the round is tried again after a jittered pause
//! ([`crate::backoff`]), so a leader election or a member's restart costs a few retries, not the
//! call.
//!
//! Every request asks for a member with a leader (etcd's `hasleader` metadata): a member cut off
//! from the majority refuses at once ("no leader") instead of holding the call until its own
//! request timeout, and the next member is tried. Reads are linearizable (etcd's default, never
//! `serializable`): a minority member cannot serve them, so no gateway reads metadata older
//! than a write another gateway had acknowledged.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::Code;

use super::{KeyValue, KvFuture, StoreError};
use crate::backoff::Backoff;
use crate::tls::{ClientSettings, Dialer};

/// The generated client and messages (`proto-etcd/`, compiled in crates/proto).
pub use csi_gateway_proto::etcd as proto;

use proto::etcdserverpb::{
    auth_client::AuthClient, kv_client::KvClient, AuthenticateRequest, DeleteRangeRequest,
    PutRequest, RangeRequest,
};

/// How to reach etcd (`[state]`'s etcd settings, validated).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `http://host:port` or `https://host:port`.
    pub endpoints: Vec<String>,
    pub prefix: String,
    /// Client certificate, key and CA for `https://` endpoints.
    pub tls: Option<ClientSettings>,
    /// etcd user name; its password is read from `password_file`.
    pub username: Option<String>,
    pub password_file: Option<PathBuf>,
    /// Bounds connecting to a member.
    pub connect_timeout: Duration,
}

struct Member {
    url: String,
    kv: KvClient<Channel>,
    auth: AuthClient<Channel>,
}

struct Credentials {
    name: String,
    password: String,
}

/// A [`KeyValue`] on etcd; every key is stored under `prefix`.
pub struct Etcd {
    members: Vec<Member>,
    /// The member tried first: the last one that answered.
    current: AtomicUsize,
    prefix: String,
    credentials: Option<Credentials>,
    token: Mutex<Option<MetadataValue<tonic::metadata::Ascii>>>,
    name: String,
    /// `state.timeout`, which bounds every operation in [`super::Store`].
    timeout: Duration,
    /// How long one operation keeps trying: a little under `timeout`, so the answer names
    /// the members rather than only the timeout.
    budget: Duration,
}

/// The first retry pause's ceiling, and the cap (see [`crate::backoff`]).
const RETRY_INITIAL: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_millis(800);

#[derive(Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Get(Vec<u8>),
    Delete(Vec<u8>),
    Scan(Vec<u8>),
}

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Why a round over the members failed.
enum Failure {
    /// Every member was unreachable, had no leader or did not answer in time: worth a retry.
    Unreachable(Vec<String>),
    /// An answer that another member would give too.
    Final(StoreError),
}

/// Codes after which another member (or a later round) may succeed: unreachable, no leader or
/// leader changed, a request timed out in Raft, a connection reset under the call.
fn transient(code: Code) -> bool {
    matches!(
        code,
        Code::Unavailable
            | Code::DeadlineExceeded
            | Code::Unknown
            | Code::Cancelled
            | Code::ResourceExhausted
    )
}

impl Etcd {
    /// Connects to the endpoints and checks that the cluster answers (and accepts the
    /// credentials), so a wrong address, certificate or password fails the start-up rather
    /// than the first call.
    pub async fn open(settings: &Settings, timeout: Duration) -> Result<Etcd, StoreError> {
        let list = settings.endpoints.join(",");
        let name = format!("etcd {list}");
        let fail = |message: String| StoreError::Open {
            path: name.clone(),
            message,
        };
        let dialer = settings
            .tls
            .as_ref()
            .map(|t| Dialer::named("etcd client certificate", t))
            .transpose()
            .map_err(|e| fail(e.to_string()))?;
        let members = settings
            .endpoints
            .iter()
            .map(|url| member(url, settings.connect_timeout, dialer.clone()))
            .collect::<Result<Vec<_>, String>>()
            .map_err(fail)?;
        let credentials = match (&settings.username, &settings.password_file) {
            (Some(name), Some(file)) => Some(Credentials {
                name: name.clone(),
                password: read_password(file).map_err(fail)?,
            }),
            _ => None,
        };
        let store = Etcd {
            members,
            current: AtomicUsize::new(0),
            prefix: settings.prefix.clone(),
            credentials,
            token: Mutex::new(None),
            name: name.clone(),
            timeout,
            budget: timeout.mul_f64(0.9),
        };
        match tokio::time::timeout(timeout, store.run(Op::Get(store.key("health")))).await {
            Ok(Ok(_)) => Ok(store),
            Ok(Err(e)) => Err(fail(format!("not usable: {e}"))),
            Err(_) => Err(fail(format!("no answer within {timeout:?}"))),
        }
    }

    fn key(&self, key: &str) -> Vec<u8> {
        format!("{}{key}", self.prefix).into_bytes()
    }

    /// One operation: rounds over the members until one answers, paused by jittered backoff,
    /// within the budget. An answer that is not about reachability (a refused permission, a
    /// damaged request) ends it at once.
    async fn run(&self, op: Op) -> Result<Pairs, StoreError> {
        let deadline = Instant::now() + self.budget;
        let mut backoff = Backoff::new(RETRY_INITIAL, RETRY_MAX);
        loop {
            let unreachable = match self.round(&op, deadline).await {
                Ok(out) => return Ok(out),
                Err(Failure::Final(e)) => return Err(e),
                Err(Failure::Unreachable(list)) => list,
            };
            let pause = backoff.next_pause();
            if Instant::now() + pause >= deadline {
                return Err(StoreError::Io(format!(
                    "no member answered within state.timeout ({:?}): {}",
                    self.timeout,
                    unreachable.join("; ")
                )));
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// Each member once, from the last one that answered, each bounded by its share of what
    /// is left of the budget.
    async fn round(&self, op: &Op, deadline: Instant) -> Result<Pairs, Failure> {
        let n = self.members.len();
        let first = self.current.load(Ordering::Relaxed);
        let mut unreachable = Vec::new();
        for i in 0..n {
            let at = (first + i) % n;
            let m = &self.members[at];
            let share = self.budget / n as u32;
            let left = deadline.saturating_duration_since(Instant::now());
            let bound = share.min(left);
            match tokio::time::timeout(bound, self.on_member(m, op.clone())).await {
                Ok(Ok(out)) => {
                    self.current.store(at, Ordering::Relaxed);
                    return Ok(out);
                }
                Ok(Err(s)) if transient(s.code()) => {
                    unreachable.push(format!("{}: {:?}: {}", m.url, s.code(), s.message()))
                }
                Ok(Err(s)) => return Err(Failure::Final(rpc(&m.url, s))),
                Err(_) => unreachable.push(format!("{}: no answer within {bound:?}", m.url)),
            }
        }
        Err(Failure::Unreachable(unreachable))
    }

    /// One operation on one member, authenticating first when credentials are configured and
    /// again once if etcd no longer knows the token.
    async fn on_member(&self, m: &Member, op: Op) -> Result<Pairs, tonic::Status> {
        let token = self.token(m, false).await?;
        match perform(m, op.clone(), token).await {
            Err(s) if self.credentials.is_some() && expired(&s) => {
                let token = self.token(m, true).await?;
                // Never the token itself: it is a credential.
                tracing::info!(member = %m.url, "etcd no longer knew the auth token (expired, or the member restarted): renewed");
                perform(m, op, token).await
            }
            other => other,
        }
    }

    async fn token(
        &self,
        m: &Member,
        renew: bool,
    ) -> Result<Option<MetadataValue<tonic::metadata::Ascii>>, tonic::Status> {
        let Some(c) = &self.credentials else {
            return Ok(None);
        };
        if !renew {
            if let Some(t) = self.token.lock().expect("etcd token").clone() {
                return Ok(Some(t));
            }
        }
        let ask = AuthenticateRequest {
            name: c.name.clone(),
            password: c.password.clone(),
        };
        let reply = m
            .auth
            .clone()
            .authenticate(request(ask, None))
            .await?
            .into_inner();
        let token = MetadataValue::try_from(reply.token)
            .map_err(|_| tonic::Status::internal("etcd returned a token that is not ASCII"))?;
        *self.token.lock().expect("etcd token") = Some(token.clone());
        Ok(Some(token))
    }
}

/// A channel to one member: plaintext, or TLS through `dialer` for `https://`.
fn member(
    url: &str,
    connect_timeout: Duration,
    dialer: Option<Arc<Dialer>>,
) -> Result<Member, String> {
    let endpoint = Endpoint::from_shared(url.to_string())
        .map_err(|e| format!("{url}: {e}"))?
        .connect_timeout(connect_timeout)
        // A connection to a member behind a network split hangs without an error: pings find
        // it (etcd refuses pings more often than every 5 s: --grpc-keepalive-min-time).
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(5))
        .keep_alive_while_idle(true);
    let channel = match (url.starts_with("https://"), dialer) {
        (false, _) => endpoint.connect_lazy(),
        (true, Some(dialer)) => {
            let connector = tower::service_fn(move |uri: Uri| {
                let dialer = dialer.clone();
                async move {
                    let addr = uri
                        .authority()
                        .map(|a| a.to_string())
                        .ok_or_else(|| std::io::Error::other("endpoint without host:port"))?;
                    dialer
                        .dial(&addr, connect_timeout)
                        .await
                        .map(TokioIo::new)
                        .map_err(std::io::Error::other)
                }
            });
            endpoint.connect_with_connector_lazy(connector)
        }
        (true, None) => return Err(format!("{url}: https:// needs state.etcd_tls")),
    };
    Ok(Member {
        url: url.to_string(),
        kv: KvClient::new(channel.clone()),
        auth: AuthClient::new(channel),
    })
}

/// The password, without the trailing newline an editor or `echo` leaves.
fn read_password(file: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("password file {}: {e}", file.display()))?;
    Ok(text.trim_end_matches(['\n', '\r']).to_string())
}

/// etcd's answer to a token it no longer knows (expired, or the member restarted).
fn expired(s: &tonic::Status) -> bool {
    s.message().contains("invalid auth token")
}

fn rpc(url: &str, e: tonic::Status) -> StoreError {
    StoreError::Io(format!("{url}: {:?}: {}", e.code(), e.message()))
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

fn request<T>(
    message: T,
    token: Option<MetadataValue<tonic::metadata::Ascii>>,
) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    // Refused at once by a member without a leader (cut off from the majority), instead of
    // held until etcd's own request timeout: the next member is tried.
    r.metadata_mut()
        .insert("hasleader", MetadataValue::from_static("true"));
    if let Some(t) = token {
        r.metadata_mut().insert("token", t);
    }
    r
}

async fn perform(
    m: &Member,
    op: Op,
    token: Option<MetadataValue<tonic::metadata::Ascii>>,
) -> Result<Pairs, tonic::Status> {
    let mut kv = m.kv.clone();
    match op {
        Op::Put(key, value) => {
            let req = PutRequest {
                key,
                value,
                ..Default::default()
            };
            kv.put(request(req, token)).await?;
            Ok(Vec::new())
        }
        Op::Get(key) => range(&mut kv, key, Vec::new(), token).await,
        Op::Scan(prefix) => {
            let end = prefix_end(&prefix);
            range(&mut kv, prefix, end, token).await
        }
        Op::Delete(key) => {
            let req = DeleteRangeRequest {
                key,
                ..Default::default()
            };
            kv.delete_range(request(req, token)).await?;
            Ok(Vec::new())
        }
    }
}

/// A linearizable read (etcd's default): it sees every write acknowledged before it began.
async fn range(
    kv: &mut KvClient<Channel>,
    key: Vec<u8>,
    range_end: Vec<u8>,
    token: Option<MetadataValue<tonic::metadata::Ascii>>,
) -> Result<Pairs, tonic::Status> {
    let req = RangeRequest {
        key,
        range_end,
        ..Default::default()
    };
    let resp = kv.range(request(req, token)).await?.into_inner();
    Ok(resp.kvs.into_iter().map(|kv| (kv.key, kv.value)).collect())
}

impl KeyValue for Etcd {
    fn name(&self) -> &str {
        &self.name
    }

    fn put<'a>(&'a self, key: &'a str, value: Vec<u8>) -> KvFuture<'a, ()> {
        Box::pin(async move { self.run(Op::Put(self.key(key), value)).await.map(drop) })
    }

    fn get<'a>(&'a self, key: &'a str) -> KvFuture<'a, Option<Vec<u8>>> {
        Box::pin(async move {
            Ok(self
                .run(Op::Get(self.key(key)))
                .await?
                .pop()
                .map(|(_, v)| v))
        })
    }

    fn delete<'a>(&'a self, key: &'a str) -> KvFuture<'a, ()> {
        Box::pin(async move { self.run(Op::Delete(self.key(key))).await.map(drop) })
    }

    fn scan<'a>(&'a self, prefix: &'a str) -> KvFuture<'a, Vec<(String, Vec<u8>)>> {
        Box::pin(async move {
            let strip = self.prefix.len();
            self.run(Op::Scan(self.key(prefix)))
                .await?
                .into_iter()
                .map(|(k, v)| {
                    let k = String::from_utf8(k).map_err(|e| StoreError::Corrupt {
                        key: String::from_utf8_lossy(e.as_bytes()).into_owned(),
                        message: "a key that is not UTF-8".into(),
                    })?;
                    Ok((k[strip..].to_string(), v))
                })
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_answers_about_reachability_send_a_call_to_the_next_member() {
        // etcd's own: "no leader", "leader changed", "request timed out" (UNAVAILABLE), "too
        // many requests" (RESOURCE_EXHAUSTED); a connection reset (UNKNOWN, CANCELLED).
        for code in [
            Code::Unavailable,
            Code::DeadlineExceeded,
            Code::Unknown,
            Code::Cancelled,
            Code::ResourceExhausted,
        ] {
            assert!(transient(code), "{code:?}");
        }
        // Every member would answer these alike: the call fails at once.
        for code in [
            Code::PermissionDenied,
            Code::Unauthenticated,
            Code::InvalidArgument,
            Code::FailedPrecondition,
            Code::OutOfRange,
            Code::Internal,
        ] {
            assert!(!transient(code), "{code:?}");
        }
    }

    #[test]
    fn prefix_end_is_the_prefix_plus_one() {
        assert_eq!(prefix_end(b"/gw/"), b"/gw0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }
}
