//! Single flight (`[calls.methods.NAME] single_flight = true`): a retry of a call still running
//! at the plugin joins it and gets its answer instead of reaching the plugin again. A retry is
//! the same method with the same request after canonical decoding (map entries in any order,
//! unknown fields as sent), compared by a SHA-256 digest so that no request, secrets included,
//! is held in plain form. Which calls contend follows the spec's idempotency rules, per method
//! (`validate::idempotency`); a different request on the key of a running call is ABORTED,
//! naming it.
//!
//! A call whose callers all left may finish later; its answer is then kept a short while for
//! the identical retry only ([`Flights::finish`]). The running of the call (its own task, how
//! long it outlives its callers) is `answer`'s; here is only the table of calls.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use metrics::{counter, gauge};
use prost_reflect::{DynamicMessage, MapKey, Value};
use tokio::sync::watch;

use crate::call::router::Route;
use crate::grpc::{Code, Status};
use crate::metrics::Origin;
use crate::observe::volume_id::volume_id;
use crate::observe::Report;
use crate::validate::idempotency::{Part, KEYS};

use crate::metrics::PROTECTION_OLDEST;
use crate::metrics::{
    SINGLE_FLIGHT_CALLS as IN_FLIGHT, SINGLE_FLIGHT_JOINED as JOINED, SINGLE_FLIGHT_KEPT as KEPT,
    SINGLE_FLIGHT_OLDEST as OLDEST,
};

/// Why a request cannot be keyed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GuardError {
    #[error("{0}: the request does not decode: {1}")]
    Undecodable(&'static str, String),
}

impl From<GuardError> for Status {
    fn from(e: GuardError) -> Status {
        Status::invalid_argument(e.to_string())
    }
}

/// A request as single flight sees it: its key, the volume it names, and its digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keyed {
    pub key: String,
    /// The volume id (CreateVolume: its name; snapshots: theirs), for logs and `GET /calls`.
    pub volume: String,
    digest: [u8; 32],
}

impl Keyed {
    /// `None`: the method has no key, or the request leaves its key empty (the plugin or the
    /// validation answers that, as without single flight).
    pub fn of(route: Route, message: &[u8]) -> Result<Option<Keyed>, GuardError> {
        let Some((_, space, parts)) = KEYS.iter().find(|(m, _, _)| *m == route.method.method)
        else {
            return Ok(None);
        };
        let request = decode(route, message)?;
        let mut key = (*space).to_string();
        let mut volume = None;
        for part in *parts {
            let value = match part {
                Part::Volume => volume_id(route.dialect, route.method.path, message),
                Part::Field(name) => string_field(&request, name),
            };
            let Some(value) = value.filter(|v| !v.is_empty()) else {
                return Ok(None);
            };
            volume.get_or_insert_with(|| value.clone());
            key.push('\0');
            key.push_str(&value);
        }
        Ok(volume.map(|volume| Keyed {
            key,
            volume,
            digest: digest(route.method.path, &request),
        }))
    }
}

fn decode(route: Route, message: &[u8]) -> Result<DynamicMessage, GuardError> {
    let path = route.method.path;
    let desc = route
        .dialect
        .descriptor_pool()
        .get_message_by_name(route.method.request)
        .ok_or_else(|| GuardError::Undecodable(path, "no descriptor".into()))?;
    DynamicMessage::decode(desc, message).map_err(|e| GuardError::Undecodable(path, e.to_string()))
}

fn string_field(request: &DynamicMessage, name: &str) -> Option<String> {
    match request.get_field_by_name(name).as_deref() {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    }
}

/// SHA-256 of the request's canonical encoding, after its method's path.
fn digest(path: &str, request: &DynamicMessage) -> [u8; 32] {
    let mut out = Vec::new();
    put(&mut out, path.as_bytes());
    canonical_message(&mut out, request);
    let d = ring::digest::digest(&ring::digest::SHA256, &out);
    // The canonical bytes hold the request's secrets: wiped before they are let go.
    out.iter_mut().for_each(|b| *b = 0);
    d.as_ref().try_into().expect("SHA-256 is 32 bytes")
}

/// Length-prefixed, so that no two different sequences encode alike.
fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// Known fields in number order (prost-reflect keeps them so), map entries sorted by their
/// encoding, unknown fields as sent.
fn canonical_message(out: &mut Vec<u8>, m: &DynamicMessage) {
    for (field, value) in m.fields() {
        out.extend_from_slice(&field.number().to_be_bytes());
        canonical_value(out, value);
    }
    out.push(0xff);
    for unknown in m.unknown_fields() {
        let mut raw = Vec::new();
        unknown.encode(&mut raw);
        put(out, &raw);
    }
}

fn canonical_value(out: &mut Vec<u8>, value: &Value) {
    let mut scalar = |tag: u8, bytes: &[u8]| {
        out.push(tag);
        put(out, bytes);
    };
    match value {
        Value::Bool(b) => scalar(1, &[*b as u8]),
        Value::I32(v) | Value::EnumNumber(v) => scalar(2, &v.to_be_bytes()),
        Value::I64(v) => scalar(3, &v.to_be_bytes()),
        Value::U32(v) => scalar(4, &v.to_be_bytes()),
        Value::U64(v) => scalar(5, &v.to_be_bytes()),
        Value::F32(v) => scalar(6, &v.to_bits().to_be_bytes()),
        Value::F64(v) => scalar(7, &v.to_bits().to_be_bytes()),
        Value::String(s) => scalar(8, s.as_bytes()),
        Value::Bytes(b) => scalar(9, b),
        Value::Message(m) => {
            out.push(10);
            let mut inner = Vec::new();
            canonical_message(&mut inner, m);
            put(out, &inner);
        }
        Value::List(items) => {
            out.push(11);
            out.extend_from_slice(&(items.len() as u64).to_be_bytes());
            items.iter().for_each(|v| canonical_value(out, v));
        }
        Value::Map(entries) => {
            let mut sorted: Vec<Vec<u8>> = entries
                .iter()
                .map(|(k, v)| {
                    let mut e = Vec::new();
                    canonical_value(&mut e, &map_key(k));
                    canonical_value(&mut e, v);
                    e
                })
                .collect();
            sorted.sort();
            out.push(12);
            out.extend_from_slice(&(sorted.len() as u64).to_be_bytes());
            sorted.iter().for_each(|e| put(out, e));
        }
    }
}

fn map_key(k: &MapKey) -> Value {
    match k {
        MapKey::Bool(b) => Value::Bool(*b),
        MapKey::I32(v) => Value::I32(*v),
        MapKey::I64(v) => Value::I64(*v),
        MapKey::U32(v) => Value::U32(*v),
        MapKey::U64(v) => Value::U64(*v),
        MapKey::String(s) => Value::String(s.clone()),
    }
}

/// A finished call's answer, shared by every caller it had.
#[derive(Debug)]
pub struct Answer {
    pub reply: Result<Vec<u8>, Status>,
    code: Code,
    origin: Option<Origin>,
    message: Option<String>,
    upstream: Option<Duration>,
    translated: bool,
}

impl Answer {
    /// The answer the call's own report noted.
    pub fn new(reply: Result<Vec<u8>, Status>, report: &Report) -> Answer {
        Answer {
            reply,
            code: report.code,
            origin: report.origin,
            message: report.message.clone(),
            upstream: report.upstream,
            translated: report.translated,
        }
    }

    /// The answer as `report`'s caller's.
    pub fn give(&self, report: &mut Report) -> Result<Vec<u8>, Status> {
        report.code = self.code;
        report.origin = self.origin;
        report.message = self.message.clone();
        report.upstream = self.upstream;
        report.translated = self.translated;
        self.reply.clone()
    }

    pub fn code(&self) -> Code {
        self.code
    }
}

pub type Slot = watch::Sender<Option<Arc<Answer>>>;
pub type Waiter = watch::Receiver<Option<Arc<Answer>>>;

struct Flight {
    digest: [u8; 32],
    route: Route,
    volume: String,
    began: Instant,
    state: State,
}

enum State {
    Running {
        slot: Arc<Slot>,
        joined: usize,
    },
    /// Finished after its callers left; kept for the identical retry until then.
    Kept {
        answer: Arc<Answer>,
        until: Instant,
    },
}

/// What becomes of a call entering single flight.
pub enum Entry {
    /// The first: it makes the call, and answers every caller through `slot`.
    Lead { slot: Arc<Slot>, waiter: Waiter },
    /// A retry of a running call: its answer comes through the waiter.
    Join(Waiter),
    /// A retry of a call that finished after its callers left.
    Kept(Arc<Answer>),
    /// Another request runs on the same key (ABORTED).
    Busy(Status),
}

/// A call in flight, as `GET /calls` lists it.
#[derive(Debug, serde::Serialize)]
pub struct InFlight {
    pub method: &'static str,
    pub volume: String,
    pub age_seconds: f64,
    pub joined_retries: usize,
    pub client_dialect: String,
}

/// The single-flight calls, running or kept, by key.
#[derive(Default)]
pub struct Flights {
    flights: Mutex<HashMap<String, Flight>>,
}

impl Flights {
    /// Enters a call of `route` keyed `keyed`.
    pub fn enter(&self, route: Route, keyed: &Keyed) -> Entry {
        let now = Instant::now();
        let mut flights = self.flights.lock().expect("flights");
        flights.retain(|_, f| !matches!(f.state, State::Kept { until, .. } if until <= now));
        if let Some(f) = flights.get_mut(&keyed.key) {
            let same = f.digest == keyed.digest;
            match &mut f.state {
                State::Running { slot, joined } if same => {
                    *joined += 1;
                    counter!(JOINED, "method_name" => route.method.path).increment(1);
                    return Entry::Join(slot.subscribe());
                }
                State::Running { .. } => return Entry::Busy(busy(route, f, now)),
                State::Kept { answer, .. } if same => return Entry::Kept(answer.clone()),
                // A finished call's answer is never given to a different request.
                State::Kept { .. } => {}
            }
        }
        let (slot, waiter) = watch::channel(None);
        let slot = Arc::new(slot);
        flights.insert(
            keyed.key.clone(),
            Flight {
                digest: keyed.digest,
                route,
                volume: keyed.volume.clone(),
                began: now,
                state: State::Running {
                    slot: slot.clone(),
                    joined: 0,
                },
            },
        );
        publish(&flights, route, now);
        Entry::Lead { slot, waiter }
    }

    /// The call on `key` finished: its waiting callers get `answer`; with none left, it is kept
    /// for `keep` for the identical retry. Returns whether its callers had all left.
    pub fn finish(&self, key: &str, answer: Arc<Answer>, keep: Duration) -> bool {
        let now = Instant::now();
        let mut flights = self.flights.lock().expect("flights");
        let Some(f) = flights.get_mut(key) else {
            return false;
        };
        let State::Running { slot, .. } = &f.state else {
            return false;
        };
        let route = f.route;
        let left = slot.receiver_count() == 0;
        slot.send_replace(Some(answer.clone()));
        if left {
            let code = format!("{:?}", answer.code());
            counter!(KEPT, "method_name" => route.method.path, "grpc_status_code" => code)
                .increment(1);
        }
        if left && !keep.is_zero() {
            f.state = State::Kept {
                answer,
                until: now + keep,
            };
        } else {
            flights.remove(key);
        }
        publish(&flights, route, now);
        left
    }

    /// The calls running now, with when each began.
    pub fn running(&self) -> Vec<(Instant, InFlight)> {
        let now = Instant::now();
        let flights = self.flights.lock().expect("flights");
        let mut all: Vec<(Instant, InFlight)> = flights
            .values()
            .filter_map(|f| match &f.state {
                State::Running { joined, .. } => Some((
                    f.began,
                    in_flight(f.route, &f.volume, f.began, now, *joined),
                )),
                State::Kept { .. } => None,
            })
            .collect();
        all.sort_by_key(|(began, _)| *began);
        all
    }

    /// Refreshes every method's gauges (the oldest call's age grows while nothing happens).
    pub fn publish_all(&self) {
        let now = Instant::now();
        let flights = self.flights.lock().expect("flights");
        let routes: Vec<Route> = flights.values().map(|f| f.route).collect();
        routes.into_iter().for_each(|r| publish(&flights, r, now));
    }
}

/// The calls of guarded methods that are not single flight (`max_in_flight`, `qps`,
/// `serialize_per_volume`, a default deadline or validation), listed by `GET /calls` with the
/// single-flight ones, and the age of each method's oldest (`PROTECTION_OLDEST`). Calls of
/// methods with nothing switched on are never here: they stay on the splice's fast path.
#[derive(Default)]
pub struct Listed {
    next: AtomicU64,
    calls: Mutex<HashMap<u64, Tracked>>,
}

struct Tracked {
    route: Route,
    volume: String,
    began: Instant,
}

/// A listed call, taken off the list when dropped (its answer in, or its caller gone).
pub struct Listing<'a> {
    listed: &'a Listed,
    id: u64,
}

impl Drop for Listing<'_> {
    fn drop(&mut self) {
        let mut calls = self.listed.calls.lock().expect("listed calls");
        if let Some(t) = calls.remove(&self.id) {
            publish_listed(&calls, t.route, Instant::now());
        }
    }
}

impl Listed {
    /// Lists a call of `route` on `volume` (empty: none) until the returned guard is dropped.
    pub fn enter(&self, route: Route, volume: String) -> Listing<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut calls = self.calls.lock().expect("listed calls");
        calls.insert(
            id,
            Tracked {
                route,
                volume,
                began: now,
            },
        );
        publish_listed(&calls, route, now);
        Listing { listed: self, id }
    }

    /// The listed calls, as `GET /calls` shows them (never joined: they are not single flight).
    pub fn running(&self) -> Vec<(Instant, InFlight)> {
        let now = Instant::now();
        let calls = self.calls.lock().expect("listed calls");
        calls
            .values()
            .map(|t| (t.began, in_flight(t.route, &t.volume, t.began, now, 0)))
            .collect()
    }

    /// Refreshes every listed method's oldest age.
    pub fn publish_all(&self) {
        let now = Instant::now();
        let calls = self.calls.lock().expect("listed calls");
        let routes: Vec<Route> = calls.values().map(|t| t.route).collect();
        routes
            .into_iter()
            .for_each(|r| publish_listed(&calls, r, now));
    }
}

/// `route`'s method's oldest listed call's age (0: none).
fn publish_listed(calls: &HashMap<u64, Tracked>, route: Route, now: Instant) {
    let path = route.method.path;
    let oldest = calls
        .values()
        .filter(|t| t.route.method.path == path)
        .map(|t| now - t.began)
        .max()
        .unwrap_or_default();
    gauge!(PROTECTION_OLDEST, "method_name" => path).set(oldest.as_secs_f64());
}

fn in_flight(route: Route, volume: &str, began: Instant, now: Instant, joined: usize) -> InFlight {
    InFlight {
        method: route.method.method,
        volume: volume.to_string(),
        age_seconds: (now - began).as_secs_f64(),
        joined_retries: joined,
        client_dialect: route.dialect.to_string(),
    }
}

/// Runs `call` while a caller waits on `slot`, then for `keep` more (a retry joining meanwhile
/// waits on it again); `None` when it was given up, no caller left. `on_age` is told the call's
/// age as it passes `ages.0`, then every `ages.1`.
pub async fn outlive<T>(
    slot: &Slot,
    keep: Duration,
    ages: (Duration, Duration),
    mut on_age: impl FnMut(Duration),
    call: impl std::future::Future<Output = T>,
) -> Option<T> {
    use tokio::time::{sleep_until, Instant};
    let began = Instant::now();
    let mut next_age = began + ages.0;
    let mut left_at: Option<Instant> = None;
    tokio::pin!(call);
    loop {
        let wake = left_at.map_or(next_age, |t| next_age.min(t + keep));
        tokio::select! {
            out = &mut call => return Some(out),
            _ = slot.closed(), if left_at.is_none() => left_at = Some(Instant::now()),
            _ = sleep_until(wake) => {
                let now = Instant::now();
                if now >= next_age {
                    on_age(now - began);
                    next_age += ages.1.max(Duration::from_secs(1));
                }
                if left_at.is_some_and(|t| now >= t + keep) {
                    if slot.receiver_count() == 0 {
                        return None;
                    }
                    left_at = None;
                }
            }
        }
    }
}

/// ABORTED naming the running call (the draft client: its OPERATION_PENDING_FOR_VOLUME, by
/// `rescue::error_reply`).
fn busy(route: Route, running: &Flight, now: Instant) -> Status {
    Status::aborted(format!(
        "{}: a different {} request on volume {} has been running at the plugin for {:.1}s \
         (calls.methods.{}.single_flight); retry the same request, or later",
        route.method.path,
        running.route.method.method,
        running.volume,
        (now - running.began).as_secs_f64(),
        route.method.method,
    ))
}

/// `route`'s method's calls in flight and the age of its oldest.
fn publish(flights: &HashMap<String, Flight>, route: Route, now: Instant) {
    let path = route.method.path;
    let ages = flights.values().filter_map(|f| match f.state {
        State::Running { .. } if f.route.method.path == path => Some(now - f.began),
        _ => None,
    });
    let (count, oldest) = ages.fold((0usize, Duration::ZERO), |(n, o), a| (n + 1, o.max(a)));
    gauge!(IN_FLIGHT, "method_name" => path).set(count as f64);
    gauge!(OLDEST, "method_name" => path).set(oldest.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::proto::v1;
    use crate::dialect::Dialect;
    use prost::Message;

    /// The router's own route for a v1 path.
    fn route(path: &str) -> Route {
        let router = crate::call::router::Router::new(&[Dialect::V1]).unwrap();
        router.route(path).unwrap()
    }

    const CREATE: &str = "/csi.v1.Controller/CreateVolume";
    const STAGE: &str = "/csi.v1.Node/NodeStageVolume";
    const UNSTAGE: &str = "/csi.v1.Node/NodeUnstageVolume";

    fn create(name: &str, size: i64, params: &[(&str, &str)]) -> Vec<u8> {
        v1::CreateVolumeRequest {
            name: name.into(),
            capacity_range: Some(v1::CapacityRange {
                required_bytes: size,
                limit_bytes: 0,
            }),
            parameters: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
        .encode_to_vec()
    }

    fn keyed(path: &str, message: &[u8]) -> Keyed {
        Keyed::of(route(path), message).unwrap().unwrap()
    }

    #[test]
    fn the_key_per_method_follows_the_spec() {
        let stage = v1::NodeStageVolumeRequest {
            volume_id: "v1".into(),
            staging_target_path: "/s".into(),
            ..Default::default()
        };
        let unstage = v1::NodeUnstageVolumeRequest {
            volume_id: "v1".into(),
            staging_target_path: "/s".into(),
        };
        let attach = v1::ControllerPublishVolumeRequest {
            volume_id: "v1".into(),
            node_id: "n1".into(),
            ..Default::default()
        };
        let publish = v1::NodePublishVolumeRequest {
            volume_id: "v1".into(),
            target_path: "/t".into(),
            ..Default::default()
        };
        let expand = v1::ControllerExpandVolumeRequest {
            volume_id: "v1".into(),
            ..Default::default()
        };
        let delete_snapshot = v1::DeleteSnapshotRequest {
            snapshot_id: "s1".into(),
            ..Default::default()
        };
        let cases: [(&str, Vec<u8>, &str, &str); 7] = [
            (
                CREATE,
                create("pvc-1", 1, &[]),
                "volume-name\0pvc-1",
                "pvc-1",
            ),
            (STAGE, stage.encode_to_vec(), "stage\0v1\0/s", "v1"),
            // Unstaging contends with staging the same volume on the same path.
            (UNSTAGE, unstage.encode_to_vec(), "stage\0v1\0/s", "v1"),
            (
                "/csi.v1.Controller/ControllerPublishVolume",
                attach.encode_to_vec(),
                "attach\0v1\0n1",
                "v1",
            ),
            (
                "/csi.v1.Node/NodePublishVolume",
                publish.encode_to_vec(),
                "publish\0v1\0/t",
                "v1",
            ),
            // Expanding contends with deleting the volume.
            (
                "/csi.v1.Controller/ControllerExpandVolume",
                expand.encode_to_vec(),
                "volume\0v1",
                "v1",
            ),
            (
                "/csi.v1.Controller/DeleteSnapshot",
                delete_snapshot.encode_to_vec(),
                "snapshot\0s1",
                "s1",
            ),
        ];
        for (path, message, key, volume) in cases {
            let k = keyed(path, &message);
            assert_eq!((k.key.as_str(), k.volume.as_str()), (key, volume), "{path}");
        }
        // No name: not keyed, the plugin answers it as without single flight.
        assert_eq!(Keyed::of(route(CREATE), &create("", 1, &[])), Ok(None));
        let probe = route("/csi.v1.Identity/Probe");
        assert_eq!(Keyed::of(probe, &[]), Ok(None));
        let bad = Keyed::of(route(CREATE), &[0xff, 0xff]).unwrap_err();
        assert!(Status::from(bad).message().contains("does not decode"));
    }

    #[test]
    fn a_retry_is_the_same_request_whatever_its_map_order() {
        // `parameters` (field 4) entries, in the order given.
        let with = |entries: &[(u8, u8)]| {
            let mut m = create("pvc-1", 1, &[]);
            for (k, v) in entries {
                m.extend_from_slice(&[34, 6, 10, 1, *k, 18, 1, *v]);
            }
            m
        };
        let a = with(&[(b'a', b'1'), (b'b', b'2'), (b'c', b'3')]);
        let b = with(&[(b'c', b'3'), (b'a', b'1'), (b'b', b'2')]);
        assert_ne!(a, b, "the maps are encoded in different orders");
        assert_eq!(keyed(CREATE, &a), keyed(CREATE, &b));
        let other = create("pvc-1", 2, &[("a", "1"), ("b", "2"), ("c", "3")]);
        assert_ne!(keyed(CREATE, &a).digest, keyed(CREATE, &other).digest);
        // An unknown field counts as sent.
        let mut unknown = a.clone();
        unknown.extend_from_slice(&[0xf8, 0x3e, 0x01]); // field 1000, varint 1
        assert_ne!(keyed(CREATE, &a).digest, keyed(CREATE, &unknown).digest);
    }

    fn answer(code: Code) -> Arc<Answer> {
        let mut report = Report::new(CREATE.into());
        report.code = code;
        Arc::new(Answer::new(Ok(vec![1]), &report))
    }

    #[test]
    fn retries_join_and_a_different_request_is_busy() {
        let flights = Flights::default();
        let r = route(CREATE);
        let first = keyed(CREATE, &create("pvc-1", 1, &[]));
        let Entry::Lead { slot: _, waiter } = flights.enter(r, &first) else {
            panic!("the first call leads");
        };
        let Entry::Join(mut joined) = flights.enter(r, &first) else {
            panic!("a retry joins");
        };
        let Entry::Busy(s) = flights.enter(r, &keyed(CREATE, &create("pvc-1", 2, &[]))) else {
            panic!("a different request is busy");
        };
        assert_eq!(s.code(), Code::Aborted);
        assert!(
            s.message().contains("CreateVolume request on volume pvc-1"),
            "{s:?}"
        );
        assert_eq!(flights.running()[0].1.joined_retries, 1);
        drop(waiter);
        let left = flights.finish(&first.key, answer(Code::Ok), Duration::from_secs(5));
        assert!(!left, "the retry still waits");
        assert!(joined.borrow_and_update().is_some());
        assert!(flights.running().is_empty());
        assert!(matches!(flights.enter(r, &first), Entry::Lead { .. }));
    }

    #[tokio::test]
    async fn a_call_outlives_its_callers_for_keep_then_is_given_up() {
        // Tenths of a second, for the test's time; `ages` counts at least a second apart, so
        // the ages are checked in seconds below.
        let secs = |n: u64| Duration::from_millis(n * 100);
        let long = |d| async move {
            tokio::time::sleep(d).await;
            "done"
        };
        let mut ages = Vec::new();
        let (slot, waiter) = watch::channel(None);
        drop(waiter);
        // No caller: it runs `keep` more and finishes within it.
        let age = |a: Duration| ages.push(a.as_millis() / 100);
        let done = outlive(&slot, secs(30), (secs(3), secs(10)), age, long(secs(20)));
        assert_eq!(done.await, Some("done"));
        assert_eq!(ages, [3, 13]);
        // Past `keep`, given up.
        let gave_up = outlive(
            &slot,
            secs(10),
            (secs(60), secs(60)),
            |_| {},
            long(secs(11)),
        );
        assert_eq!(gave_up.await, None);
        // A caller waiting keeps it going.
        let _waiter = slot.subscribe();
        let kept = outlive(
            &slot,
            secs(10),
            (secs(60), secs(60)),
            |_| {},
            long(secs(12)),
        );
        assert_eq!(kept.await, Some("done"));
    }

    #[test]
    fn an_answer_after_the_callers_left_is_kept_for_the_identical_retry_only() {
        let flights = Flights::default();
        let r = route(CREATE);
        let first = keyed(CREATE, &create("pvc-1", 1, &[]));
        let Entry::Lead { waiter, .. } = flights.enter(r, &first) else {
            panic!()
        };
        drop(waiter);
        assert!(flights.finish(&first.key, answer(Code::Ok), Duration::from_secs(5)));
        assert!(matches!(flights.enter(r, &first), Entry::Kept(a) if a.code() == Code::Ok));
        let other = keyed(CREATE, &create("pvc-1", 2, &[]));
        assert!(matches!(flights.enter(r, &other), Entry::Lead { .. }));
        // Expired: gone.
        let third = keyed(CREATE, &create("pvc-3", 1, &[]));
        let Entry::Lead { waiter, .. } = flights.enter(r, &third) else {
            panic!()
        };
        drop(waiter);
        flights.finish(&third.key, answer(Code::Ok), Duration::ZERO);
        assert!(matches!(flights.enter(r, &third), Entry::Lead { .. }));
    }

    #[test]
    fn listed_calls_leave_the_list_when_dropped() {
        let listed = Listed::default();
        let r = route("/csi.v1.Controller/DeleteVolume");
        let a = listed.enter(r, "vol-a".into());
        let b = listed.enter(r, String::new());
        let mut running: Vec<_> = listed.running().into_iter().map(|(_, c)| c).collect();
        running.sort_by(|x, y| x.volume.cmp(&y.volume));
        assert_eq!(running.len(), 2);
        assert_eq!(
            (running[1].method, running[1].joined_retries),
            ("DeleteVolume", 0)
        );
        assert_eq!(running[1].volume, "vol-a");
        drop(a);
        let left: Vec<_> = listed
            .running()
            .into_iter()
            .map(|(_, c)| c.volume)
            .collect();
        assert_eq!(left, vec![String::new()]);
        drop(b);
        assert!(listed.running().is_empty());
    }
}
