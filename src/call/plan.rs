//! What becomes of a call, decided from its head: the one copy of the decision, which the
//! connection (`splice::conn`) takes for every stream. In two steps, because a connection may have to wait for its plugin
//! between them: [`admit`] reads only the head (the route table, the peer's rule, the size of
//! the header list), [`plan`] the plugin's dialect too. What a connection cannot do for a call
//! (its upstream connection gone, a header block it cannot rewrite) it decides itself, after.

use std::sync::Arc;

use super::rescue::header_list_too_large;
use crate::call::router::{Inline, Route};
use crate::call::services::{self, Handler};
use crate::call::Shared;
use crate::dialect::Dialect;
use crate::grpc::Status;
use crate::tls::Authorization;

/// A call's head, as the decision reads it.
pub struct Head<'a> {
    pub path: &'a str,
    /// The size of its header list as SETTINGS_MAX_HEADER_LIST_SIZE counts it.
    pub header_list: usize,
    /// The appliance listener's peer and its rule; `None` on the UNIX socket.
    pub authorization: Option<&'a Arc<Authorization>>,
}

/// What the head alone decides.
pub enum Admission {
    /// A CSI call of some dialect's: [`plan`] says how it goes.
    Call(Route),
    /// One of the gateway's own services (reflection, health), which this peer may call.
    Service(Handler),
    /// A path no dialect and no service of the gateway's has: answered UNIMPLEMENTED.
    Unknown,
    /// Refused, the client's fault: a header list over the limit, or a call the appliance peer
    /// may not make. The route, when the path has one, for the reply in its dialect.
    Refused(Option<Route>, Status),
}

/// The first step: what the head says, before the plugin is asked anything.
pub fn admit(shared: &Shared, head: &Head) -> Admission {
    let route = shared.router.route(head.path);
    let limit = shared.limits.max_header_list_size;
    if head.header_list > limit as usize {
        return Admission::Refused(route, header_list_too_large(limit));
    }
    match route {
        Some(route) => match denied(head, &route) {
            Some(s) => Admission::Refused(Some(route), s),
            None => Admission::Call(route),
        },
        None => match shared.services.find(head.path) {
            Some(handler) => match services::authorize(head.authorization, head.path) {
                Ok(()) => Admission::Service(handler.clone()),
                Err(s) => {
                    tracing::warn!(method = %head.path, "call refused: service not allowed for this peer");
                    Admission::Refused(None, s)
                }
            },
            None => Admission::Unknown,
        },
    }
}

/// PERMISSION_DENIED for a call to a CSI service the appliance peer may not make.
fn denied(head: &Head, route: &Route) -> Option<Status> {
    let a = head.authorization?;
    if a.allows(route.method.service) {
        return None;
    }
    tracing::warn!(peer = %a.peer, method = %head.path, "call refused: service not allowed for this peer");
    Some(a.denied(head.path, route.method.service))
}

/// How an admitted call goes to the plugin.
#[derive(Clone, Copy, Debug)]
pub enum Plan {
    /// Relayed as it came: the same dialect, or messages wire-identical to the plugin's, then
    /// on the plugin's `rewrite` path (counted and logged as the translated call it stands for).
    Relay { rewrite: Option<&'static str> },
    /// One call to the plugin, translated on the connection's own upstream connection: its
    /// head goes on at once with the plugin's path, its message once whole.
    TranslateHere(Inline),
    /// Read whole and answered by the gateway (`call::answer`): translated, protected,
    /// checked, or emulated around the plugin.
    Answer,
}

/// The second step: how `route` goes to a plugin of `upstream`'s dialect, which
/// `requires_staging` or not. `has_message`: the request did not end with its head (a call
/// translated here needs its message).
pub fn plan(route: &Route, upstream: Dialect, requires_staging: bool, has_message: bool) -> Plan {
    if route.relays_to(upstream) {
        return Plan::Relay { rewrite: None };
    }
    if let Some(path) = route.identical_path(upstream) {
        return Plan::Relay {
            rewrite: Some(path),
        };
    }
    match route.inline_call(upstream, requires_staging) {
        Some(inline) if has_message => Plan::TranslateHere(inline),
        _ => Plan::Answer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::router::Router;

    fn route(path: &str) -> Route {
        let router = Router::new(&[Dialect::V1, Dialect::V0_3, Dialect::V0_1Oneof]).unwrap();
        router.route(path).unwrap()
    }

    #[test]
    fn the_same_dialect_is_relayed_and_another_translated() {
        let probe = route("/csi.v1.Identity/Probe");
        assert!(matches!(
            plan(&probe, Dialect::V1, false, true),
            Plan::Relay { rewrite: None }
        ));
        // A draft plugin's probe is another call altogether: the gateway answers it.
        assert!(matches!(
            plan(&probe, Dialect::V0_1Oneof, false, true),
            Plan::Answer
        ));
    }

    #[test]
    fn wire_identical_calls_are_relayed_on_the_plugins_path() {
        let delete = route("/csi.v1.Controller/DeleteVolume");
        match plan(&delete, Dialect::V0_3, false, true) {
            Plan::Relay { rewrite } => {
                assert_eq!(rewrite, Some("/csi.v0.Controller/DeleteVolume"))
            }
            // Or checked and translated here, when a field differs: never answered whole.
            Plan::TranslateHere(inline) => {
                assert_eq!(inline.path, "/csi.v0.Controller/DeleteVolume")
            }
            Plan::Answer => panic!("DeleteVolume v1 -> v0.3 is one call to the plugin"),
        }
    }

    #[test]
    fn a_call_translated_here_needs_its_message() {
        let info = route("/csi.v0.Node/NodeGetId");
        let to_v1 = plan(&info, Dialect::V1, false, true);
        assert!(matches!(to_v1, Plan::TranslateHere(i) if i.path == "/csi.v1.Node/NodeGetInfo"));
        assert!(matches!(
            plan(&info, Dialect::V1, false, false),
            Plan::Answer
        ));
    }
}
