//! Protection for fragile plugins, per method (`[calls.methods.NAME]`): at most one call in
//! flight per volume among the serialized methods (gocsi's "serial volume access"), at most
//! `max_in_flight` calls of a method, and a default deadline for calls whose client set none.
//! A call is admitted or refused before it reaches the plugin; an admitted call holds a
//! [`Permit`] until its reply is in. With `queue = true`, a call over `max_in_flight` or
//! `qps` (a token bucket of `burst`) waits for its turn until its deadline instead.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use metrics::{counter, gauge, histogram};
use prost_reflect::{DynamicMessage, Value};
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::dialect::Dialect;
use crate::grpc::Status;
use crate::observe::volume_id::volume_id;

use crate::call::router::Route;
use crate::config::calls::{MethodPolicy, Policy};

pub const REJECTIONS: &str = "csi_gateway_protection_rejections_total";
pub const IN_FLIGHT: &str = "csi_gateway_protection_in_flight";
use crate::metrics::{PROTECTION_QUEUED as QUEUED, PROTECTION_QUEUE_WAIT as QUEUE_WAIT};

/// Why a call was refused (the `reason` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Another call on the same volume is in flight.
    VolumeBusy,
    /// `max_in_flight` reached.
    MaxInFlight,
    /// `qps` reached.
    Qps,
    /// The default deadline ran out.
    Deadline,
}

impl Reason {
    fn label(self) -> &'static str {
        match self {
            Reason::VolumeBusy => "volume_busy",
            Reason::MaxInFlight => "max_in_flight",
            Reason::Qps => "qps",
            Reason::Deadline => "default_deadline",
        }
    }
}

/// Counts a refusal or an expired default deadline.
pub fn count(route: Route, reason: Reason) {
    counter!(REJECTIONS, "method_name" => route.method.path, "reason" => reason.label())
        .increment(1);
}

pub struct Protection {
    policy: Policy,
    /// Calls in flight per protected method name.
    in_flight: HashMap<&'static str, AtomicUsize>,
    /// Volumes with a serialized call in flight.
    volumes: Arc<Mutex<HashSet<String>>>,
    /// One permit per call `max_in_flight` allows, per method that has one.
    slots: HashMap<&'static str, Semaphore>,
    /// Calls waiting in each method's queue.
    queued: HashMap<&'static str, AtomicUsize>,
    /// Per method with a `qps`.
    buckets: HashMap<&'static str, Mutex<Bucket>>,
    /// The single-flight calls.
    pub flights: super::guard::Flights,
    /// The other calls of guarded methods, for `GET /calls`.
    pub listed: super::guard::Listed,
}

/// What an admitted call holds until it is answered.
pub struct Permit<'a> {
    route: Route,
    counter: Option<&'a AtomicUsize>,
    volume: Option<String>,
    volumes: Arc<Mutex<HashSet<String>>>,
    _slot: Option<SemaphorePermit<'a>>,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.counter {
            let now = c.fetch_sub(1, Ordering::AcqRel) - 1;
            gauge!(IN_FLIGHT, "method_name" => self.route.method.path).set(now as f64);
        }
        if let Some(v) = self.volume.take() {
            self.volumes.lock().expect("volume set").remove(&v);
        }
    }
}

impl Protection {
    pub fn new(policy: Policy) -> Protection {
        let rules = || {
            Dialect::ALL
                .iter()
                .flat_map(|d| d.methods())
                .filter_map(|m| policy.method(m).map(|r| (m.method, r)))
        };
        let in_flight = rules().map(|(m, _)| (m, AtomicUsize::new(0))).collect();
        let queued = rules().map(|(m, _)| (m, AtomicUsize::new(0))).collect();
        let slots = rules()
            .filter_map(|(m, r)| Some((m, Semaphore::new(r.max_in_flight?))))
            .collect();
        let now = Instant::now();
        let buckets = rules()
            .filter_map(|(m, r)| {
                let qps = r.qps?;
                let burst = r.burst.map_or(qps.ceil().max(1.0), f64::from);
                Some((m, Mutex::new(Bucket::new(qps, burst, now))))
            })
            .collect();
        Protection {
            in_flight,
            queued,
            slots,
            buckets,
            volumes: Arc::default(),
            flights: Default::default(),
            listed: Default::default(),
            policy,
        }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    fn rule(&self, route: Route) -> Option<&MethodPolicy> {
        self.policy.method(route.method)
    }

    /// The deadline to apply: the client's, else the method's default. The flag says whether
    /// it is the default.
    pub fn deadline(&self, route: Route, client: Option<Duration>) -> (Option<Duration>, bool) {
        match (client, self.rule(route).and_then(|r| r.default_deadline)) {
            (Some(d), _) => (Some(d), false),
            (None, Some(d)) => (Some(d), true),
            (None, None) => (None, false),
        }
    }

    /// Admits the call whose request is `message`, or refuses it: ABORTED while its volume has
    /// a serialized call in flight, RESOURCE_EXHAUSTED over the method's `qps` or
    /// `max_in_flight` — with `queue`, only once its turn would come after `deadline`.
    pub async fn admit(
        &self,
        route: Route,
        message: &[u8],
        deadline: Option<Duration>,
    ) -> Result<Permit<'_>, Status> {
        let mut permit = Permit {
            route,
            counter: None,
            volume: None,
            volumes: self.volumes.clone(),
            _slot: None,
        };
        let Some(rule) = self.rule(route) else {
            return Ok(permit);
        };
        let path = route.method.path;
        if rule.serialize_per_volume {
            if let Some(key) = volume_key(route, message) {
                if !self.volumes.lock().expect("volume set").insert(key.clone()) {
                    count(route, Reason::VolumeBusy);
                    return Err(Status::aborted(format!(
                        "{path}: another call on volume {} is in flight (calls.methods.{}.serialize_per_volume); retry later",
                        key.split_once(':').map_or(key.as_str(), |(_, v)| v),
                        route.method.method
                    )));
                }
                permit.volume = Some(key);
            }
        }
        let queue = rule.queue.then_some(deadline);
        let began = Instant::now();
        self.rate(route, queue).await?;
        permit._slot = self.slot(route, queue, began).await?;
        if rule.queue {
            histogram!(QUEUE_WAIT, "method_name" => path).record(began.elapsed().as_secs_f64());
        }
        if let Some(counter) = self.in_flight.get(route.method.method) {
            let now = counter.fetch_add(1, Ordering::AcqRel) + 1;
            permit.counter = Some(counter);
            gauge!(IN_FLIGHT, "method_name" => path).set(now as f64);
        }
        Ok(permit)
    }

    /// A token of the method's `qps` bucket, waited for when `queue` is `Some` (within its
    /// deadline, if any).
    async fn rate(&self, route: Route, queue: Option<Option<Duration>>) -> Result<(), Status> {
        let Some(bucket) = self.buckets.get(route.method.method) else {
            return Ok(());
        };
        let within = queue.unwrap_or(Some(Duration::ZERO));
        let reserved = bucket
            .lock()
            .expect("bucket")
            .reserve(Instant::now(), within);
        let Some(wait) = reserved else {
            count(route, Reason::Qps);
            return Err(Status::resource_exhausted(format!(
                "{}: over the limit of calls.methods.{}.qps{}; retry later",
                route.method.path,
                route.method.method,
                if queue.is_some() {
                    " within the call's deadline"
                } else {
                    ""
                },
            )));
        };
        if !wait.is_zero() {
            let _queued = Queued::enter(self, route);
            tokio::time::sleep(wait).await;
        }
        Ok(())
    }

    /// One of the method's `max_in_flight` permits, waited for when `queue` is `Some` until
    /// `began` plus its deadline.
    async fn slot(
        &self,
        route: Route,
        queue: Option<Option<Duration>>,
        began: Instant,
    ) -> Result<Option<SemaphorePermit<'_>>, Status> {
        let Some(slots) = self.slots.get(route.method.method) else {
            return Ok(None);
        };
        let acquired = match queue {
            None => slots.try_acquire().ok(),
            Some(deadline) => {
                let _queued = Queued::enter(self, route);
                let wait = slots.acquire();
                match deadline {
                    None => wait.await.ok(),
                    Some(d) => {
                        let at = tokio::time::Instant::from_std(began + d);
                        tokio::time::timeout_at(at, wait)
                            .await
                            .ok()
                            .and_then(Result::ok)
                    }
                }
            }
        };
        if acquired.is_none() {
            count(route, Reason::MaxInFlight);
            let max = self.rule(route).and_then(|r| r.max_in_flight).unwrap_or(0);
            return Err(Status::resource_exhausted(format!(
                "{}: {max} calls already in flight, the limit of calls.methods.{}.max_in_flight{}; retry later",
                route.method.path,
                route.method.method,
                if queue.is_some() { ", for the whole of the call's deadline" } else { "" },
            )));
        }
        Ok(acquired)
    }
}

/// A call waiting in a method's queue, counted in [`QUEUED`] while it waits.
struct Queued<'a>(Route, Option<&'a AtomicUsize>);

impl<'a> Queued<'a> {
    fn enter(p: &'a Protection, route: Route) -> Queued<'a> {
        let q = Queued(route, p.queued.get(route.method.method));
        q.set(q.1.map_or(0, |n| n.fetch_add(1, Ordering::AcqRel) + 1));
        q
    }

    fn set(&self, n: usize) {
        gauge!(QUEUED, "method_name" => self.0.method.path).set(n as f64);
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.set(self.1.map_or(0, |n| n.fetch_sub(1, Ordering::AcqRel) - 1));
    }
}

/// A token bucket: `rate` tokens a second, at most `burst` held.
#[derive(Debug)]
struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn new(rate: f64, burst: f64, now: Instant) -> Bucket {
        Bucket {
            rate,
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Takes a token at `now`, or reserves the next one due: the wait until it is. `None`,
    /// taking nothing, when it is due later than `within` (`None`: any time).
    fn reserve(&mut self, now: Instant, within: Option<Duration>) -> Option<Duration> {
        let refill = now.saturating_duration_since(self.last).as_secs_f64() * self.rate;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.last = self.last.max(now);
        let wait = Duration::from_secs_f64(((1.0 - self.tokens) / self.rate).max(0.0));
        if within.is_some_and(|w| wait > w) {
            return None;
        }
        self.tokens -= 1.0;
        Some(wait)
    }
}

/// The volume a request is about: its id, or for CreateVolume its name (the id does not exist
/// yet; a retry names the same volume).
fn volume_key(route: Route, message: &[u8]) -> Option<String> {
    if let Some(id) = volume_id(route.dialect, route.method.path, message) {
        return Some(format!("id:{id}"));
    }
    let desc = route
        .dialect
        .descriptor_pool()
        .get_message_by_name(route.method.request)?;
    let name = desc.get_field_by_name("name")?;
    let request = DynamicMessage::decode(desc, message).ok()?;
    match request.get_field(&name).as_ref() {
        Value::String(n) if !n.is_empty() => Some(format!("name:{n}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::proto::v1;
    use crate::grpc::Code;
    use prost::Message;

    /// The router's own route for a v1 path.
    fn route(path: &str) -> Route {
        let router = crate::call::router::Router::new(&[Dialect::V1]).unwrap();
        router.route(path).unwrap()
    }

    fn protection(toml: &str) -> Protection {
        Protection::new(toml::from_str(toml).unwrap())
    }

    #[tokio::test]
    async fn one_call_per_volume_among_serialized_methods() {
        let p = protection(
            "[methods.NodePublishVolume]\nserialize_per_volume = true\n[methods.NodeUnpublishVolume]\nserialize_per_volume = true\n",
        );
        let publish = route("/csi.v1.Node/NodePublishVolume");
        let unpublish = route("/csi.v1.Node/NodeUnpublishVolume");
        let on = |id: &str| {
            v1::NodeUnpublishVolumeRequest {
                volume_id: id.into(),
                target_path: "/t".into(),
            }
            .encode_to_vec()
        };
        let held = p.admit(publish, &on("a"), None).await.unwrap();
        let refused = p.admit(unpublish, &on("a"), None).await.err().unwrap();
        assert_eq!(refused.code(), Code::Aborted);
        assert!(refused.message().contains("volume a"), "{refused:?}");
        let other = p.admit(unpublish, &on("b"), None).await.unwrap();
        drop(held);
        let _again = p.admit(unpublish, &on("a"), None).await.unwrap();
        drop(other);
    }

    #[tokio::test]
    async fn create_volume_is_serialized_by_name() {
        let p = protection("[methods.CreateVolume]\nserialize_per_volume = true\n");
        let create = route("/csi.v1.Controller/CreateVolume");
        let named = |n: &str| {
            v1::CreateVolumeRequest {
                name: n.into(),
                ..Default::default()
            }
            .encode_to_vec()
        };
        let _held = p.admit(create, &named("pvc-1"), None).await.unwrap();
        assert!(p.admit(create, &named("pvc-1"), None).await.is_err());
        assert!(p.admit(create, &named("pvc-2"), None).await.is_ok());
    }

    #[tokio::test]
    async fn at_most_max_in_flight_and_the_default_deadline_only_without_the_clients() {
        let p = protection("[methods.Probe]\nmax_in_flight = 2\ndefault_deadline = \"5s\"\n");
        let probe = route("/csi.v1.Identity/Probe");
        let (a, b) = (
            p.admit(probe, &[], None).await.unwrap(),
            p.admit(probe, &[], None).await.unwrap(),
        );
        let refused = p.admit(probe, &[], None).await.err().unwrap();
        assert_eq!(refused.code(), Code::ResourceExhausted);
        drop(a);
        let _c = p.admit(probe, &[], None).await.unwrap();
        drop(b);
        assert_eq!(
            p.deadline(probe, None),
            (Some(Duration::from_secs(5)), true)
        );
        assert_eq!(
            p.deadline(probe, Some(Duration::from_secs(1))),
            (Some(Duration::from_secs(1)), false)
        );
        let other = route("/csi.v1.Identity/GetPluginInfo");
        assert_eq!(p.deadline(other, None), (None, false));
        assert!(p.admit(other, &[], None).await.is_ok());
    }

    #[test]
    fn the_bucket_gives_its_burst_then_its_rate() {
        let t0 = Instant::now();
        let mut b = Bucket::new(2.0, 2.0, t0);
        let none = Some(Duration::ZERO);
        assert_eq!(b.reserve(t0, none), Some(Duration::ZERO));
        assert_eq!(b.reserve(t0, none), Some(Duration::ZERO));
        assert_eq!(b.reserve(t0, none), None, "empty, and no wait allowed");
        // Queued: the next token is due in half a second, the one after in a second.
        assert_eq!(b.reserve(t0, None), Some(Duration::from_millis(500)));
        assert_eq!(b.reserve(t0, Some(Duration::from_millis(900))), None);
        assert_eq!(b.reserve(t0, None), Some(Duration::from_secs(1)));
        let later = t0 + Duration::from_secs(10);
        assert_eq!(b.reserve(later, none), Some(Duration::ZERO));
    }

    #[tokio::test]
    async fn a_queue_waits_for_a_slot_until_the_deadline() {
        let p = protection("[methods.Probe]\nmax_in_flight = 1\nqueue = true\n");
        let probe = route("/csi.v1.Identity/Probe");
        let held = p.admit(probe, &[], None).await.unwrap();
        let second = Duration::from_millis(300);
        let refused = p.admit(probe, &[], Some(second)).await.err().unwrap();
        assert_eq!(refused.code(), Code::ResourceExhausted);
        assert!(refused.message().contains("whole of the call's deadline"));
        let waiting = p.admit(probe, &[], Some(second));
        let release = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            drop(held);
        };
        let (admitted, ()) = tokio::join!(waiting, release);
        assert!(admitted.is_ok());
    }
}
