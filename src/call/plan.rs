//! What becomes of a call, decided from its head: the one copy of the decision, which the
//! connection (`splice::conn`) takes for every stream. [`decide`] gives the final kind of
//! stream from the head and the connection's [`View`] (its upstream connection attached or
//! not, room for a call the gateway answers itself), with the seed of the call's log record;
//! inside it, [`admit`] reads only the head (the route table, the peer's rule, the size of the
//! header list) and [`plan`] the plugin's dialect too. The one thing a connection decides
//! after — a header block it cannot rewrite for the upstream — is [`Decision::answer_here`].

use std::sync::Arc;

use super::rescue::header_list_too_large;
use crate::call::router::{Inline, Route};
use crate::call::services::{self, Handler};
use crate::call::Shared;
use crate::dialect::Dialect;
use crate::grpc::Status;
use crate::observe::Report;
use crate::tls::Authorization;
use crate::upstream::Live;

/// A call's head, as the decision reads it.
pub struct Head<'a> {
    pub path: String,
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
    let route = shared.router.route(&head.path);
    let limit = shared.limits.max_header_list_size;
    if head.header_list > limit as usize {
        return Admission::Refused(route, header_list_too_large(limit));
    }
    match route {
        Some(route) => match denied(head, &route) {
            Some(s) => Admission::Refused(Some(route), s),
            None => Admission::Call(route),
        },
        None => match shared.services.find(&head.path) {
            Some(handler) => match services::authorize(head.authorization, &head.path) {
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
    Some(a.denied(&head.path, route.method.service))
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

/// What a connection offers a new call, as the decision reads it.
#[derive(Clone, Copy)]
pub struct View<'a> {
    /// The plugin the connection's upstream connection reaches (`None`: none was detected).
    pub live: Option<&'a Live>,
    /// A new call may go on the connection's own upstream connection: attached, and neither
    /// draining (its GOAWAY came) nor gone.
    pub upstream_open: bool,
    /// The connection has room for one more call the gateway answers itself
    /// (`MAX_LOCAL_CALLS`).
    pub room_here: bool,
    /// The request did not end with its head: a call translated on the connection needs its
    /// message.
    pub has_message: bool,
}

/// The kind of stream a call becomes on its connection.
pub enum Kind {
    /// Relayed on the connection's own upstream connection as it came, or on the plugin's
    /// `rewrite` path (a wire-identical call).
    Relayed {
        route: Route,
        rewrite: Option<&'static str>,
    },
    /// Translated on the connection's own upstream connection ([`Plan::TranslateHere`]).
    Translated(Route, Inline),
    /// Answered by the gateway on its shared upstream connection (`call::answer`): the route,
    /// when the path has one; `Some` status when refused (the client's fault).
    Answered(Option<Route>, Option<Status>),
    /// A stream of one of the gateway's own services (reflection, health).
    Service(Handler),
    /// No room on the connection for another stream the gateway serves itself: refused
    /// (REFUSED_STREAM, which a client may retry).
    NoRoom,
}

/// The decision on a new call: its kind of stream, and the seed of its log record.
pub struct Decision {
    pub kind: Kind,
    pub report: Report,
}

impl Decision {
    /// The connection could not give the call's block to its upstream (its fields were not
    /// kept for a rewrite): the gateway answers it itself, if the connection has room.
    pub fn answer_here(&mut self, room_here: bool) {
        let route = match &self.kind {
            Kind::Relayed { route, .. } | Kind::Translated(route, _) => *route,
            _ => return,
        };
        self.report.translated = false;
        self.kind = match room_here {
            true => Kind::Answered(Some(route), None),
            false => Kind::NoRoom,
        };
    }

    /// The call goes on the connection's own upstream connection.
    pub fn on_upstream(&self) -> bool {
        matches!(self.kind, Kind::Relayed { .. } | Kind::Translated(..))
    }
}

/// The whole decision on a new call from its head and what its connection offers.
pub fn decide(shared: &Shared, head: Head, view: View) -> Decision {
    let admission = admit(shared, &head);
    let mut report = Report::new(head.path);
    report.bridge_peer = head.authorization.is_some();
    if let Some(live) = view.live {
        report.upstream_dialect = Some(live.detected.dialect);
        report.driver = Some(live.driver_name.clone());
    }
    let kind = match admission {
        Admission::Call(route) => {
            report.called = Some(route.called());
            let planned = view.live.map(|live| {
                let staging = live.session.requires_staging;
                plan(&route, live.detected.dialect, staging, view.has_message)
            });
            match planned {
                Some(Plan::Relay { rewrite }) if view.upstream_open => {
                    // Counted and logged as the translated call it stands for.
                    report.translated = rewrite.is_some();
                    Kind::Relayed { route, rewrite }
                }
                Some(Plan::TranslateHere(inline)) if view.upstream_open => {
                    report.translated = true;
                    Kind::Translated(route, inline)
                }
                _ => Kind::Answered(Some(route), None),
            }
        }
        Admission::Service(handler) => {
            report.service = Some(services::method_name(&report.path));
            Kind::Service(handler)
        }
        Admission::Unknown => Kind::Answered(None, None),
        Admission::Refused(route, s) => {
            report.called = route.map(|r| r.called());
            Kind::Answered(route, Some(s))
        }
    };
    let mut decision = Decision { kind, report };
    if !view.room_here && !decision.on_upstream() {
        decision.kind = Kind::NoRoom;
    }
    decision
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
