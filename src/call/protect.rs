//! Protection for fragile plugins, per method (`[calls.methods.NAME]`): at most one call in
//! flight per volume among the serialized methods (gocsi's "serial volume access"), at most
//! `max_in_flight` calls of a method, and a default deadline for calls whose client set none.
//! A call is admitted or refused before it reaches the plugin; an admitted call holds a
//! [`Permit`] until its reply is in.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics::{counter, gauge};
use prost_reflect::{DynamicMessage, Value};

use crate::dialect::Dialect;
use crate::grpc::Status;
use crate::observe::volume_id::volume_id;

use crate::call::router::Route;
use crate::config::calls::{MethodPolicy, Policy};

pub const REJECTIONS: &str = "csi_gateway_protection_rejections_total";
pub const IN_FLIGHT: &str = "csi_gateway_protection_in_flight";

/// Why a call was refused (the `reason` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Another call on the same volume is in flight.
    VolumeBusy,
    /// `max_in_flight` reached.
    MaxInFlight,
    /// The default deadline ran out.
    Deadline,
}

impl Reason {
    fn label(self) -> &'static str {
        match self {
            Reason::VolumeBusy => "volume_busy",
            Reason::MaxInFlight => "max_in_flight",
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
}

/// What an admitted call holds until it is answered.
pub struct Permit<'a> {
    route: Route,
    counter: Option<&'a AtomicUsize>,
    volume: Option<String>,
    volumes: Arc<Mutex<HashSet<String>>>,
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
        let in_flight = Dialect::ALL
            .iter()
            .flat_map(|d| d.methods())
            .filter(|m| policy.method(m).is_some())
            .map(|m| (m.method, AtomicUsize::new(0)))
            .collect();
        Protection {
            policy,
            in_flight,
            volumes: Arc::default(),
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
    /// a serialized call in flight, RESOURCE_EXHAUSTED at the method's `max_in_flight`.
    pub fn admit(&self, route: Route, message: &[u8]) -> Result<Permit<'_>, Status> {
        let mut permit = Permit {
            route,
            counter: None,
            volume: None,
            volumes: self.volumes.clone(),
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
        if let Some(counter) = self.in_flight.get(route.method.method) {
            let now = counter.fetch_add(1, Ordering::AcqRel) + 1;
            permit.counter = Some(counter);
            if rule.max_in_flight.is_some_and(|max| now > max) {
                count(route, Reason::MaxInFlight);
                return Err(Status::resource_exhausted(format!(
                    "{path}: {} calls already in flight, the limit of calls.methods.{}.max_in_flight; retry later",
                    now - 1,
                    route.method.method
                )));
            }
            gauge!(IN_FLIGHT, "method_name" => path).set(now as f64);
        }
        Ok(permit)
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

    fn route(path: &str) -> Route {
        Route {
            dialect: Dialect::V1,
            method: Dialect::V1.method(path).unwrap(),
            v0_2: false,
            decode: true,
            identical: None,
            inline: [None; 4],
            inline_request: [crate::call::router::InlineRequest::Translated; 4],
            hub: None,
        }
    }

    fn protection(toml: &str) -> Protection {
        Protection::new(toml::from_str(toml).unwrap())
    }

    #[test]
    fn one_call_per_volume_among_serialized_methods() {
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
        let held = p.admit(publish, &on("a")).unwrap();
        let refused = p.admit(unpublish, &on("a")).err().unwrap();
        assert_eq!(refused.code(), Code::Aborted);
        assert!(refused.message().contains("volume a"), "{refused:?}");
        let other = p.admit(unpublish, &on("b")).unwrap();
        drop(held);
        let _again = p.admit(unpublish, &on("a")).unwrap();
        drop(other);
    }

    #[test]
    fn create_volume_is_serialized_by_name() {
        let p = protection("[methods.CreateVolume]\nserialize_per_volume = true\n");
        let create = route("/csi.v1.Controller/CreateVolume");
        let named = |n: &str| {
            v1::CreateVolumeRequest {
                name: n.into(),
                ..Default::default()
            }
            .encode_to_vec()
        };
        let _held = p.admit(create, &named("pvc-1")).unwrap();
        assert!(p.admit(create, &named("pvc-1")).is_err());
        assert!(p.admit(create, &named("pvc-2")).is_ok());
    }

    #[test]
    fn at_most_max_in_flight_and_the_default_deadline_only_without_the_clients() {
        let p = protection("[methods.Probe]\nmax_in_flight = 2\ndefault_deadline = \"5s\"\n");
        let probe = route("/csi.v1.Identity/Probe");
        let (a, b) = (p.admit(probe, &[]).unwrap(), p.admit(probe, &[]).unwrap());
        let refused = p.admit(probe, &[]).err().unwrap();
        assert_eq!(refused.code(), Code::ResourceExhausted);
        drop(a);
        let _c = p.admit(probe, &[]).unwrap();
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
        assert!(p.admit(other, &[]).is_ok());
    }
}
