//! The route table: gRPC path → (front dialect, method). Built once from the generated method
//! tables of the dialects a listener serves; `csi.*` paths belong to whichever of `v0.1` and
//! `v0.1-oneof` the listener is configured for, since both use the package `csi`.

use std::path::Path;

use crate::dialect::{Dialect, MethodInfo};
use crate::hub::Method;

use crate::config::calls::Policy;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub dialect: Dialect,
    pub method: &'static MethodInfo,
    /// A `csi.v0` route served as v0.2 (`listen.v0_dialect = "v0.2"`).
    pub v0_2: bool,
    /// The gateway reads this method's messages (protection or validation is configured for
    /// it, `[calls]`, or it acts on the node paths they name: [`Router::bridging`]), so it is
    /// never relayed undecoded.
    pub decode: bool,
    /// The upstream dialect whose messages for this method are wire-identical to the front's,
    /// and its path there ([`crate::translate::identical`]).
    pub identical: Option<(Dialect, &'static str)>,
    /// Per upstream dialect (in [`Dialect::ALL`]'s order), the plugin method on which the
    /// splice translates this call as one call on its own upstream connection
    /// ([`Route::inline_call`]).
    pub inline: [Option<&'static MethodInfo>; 4],
    /// Per upstream dialect, what becomes of that call's request ([`InlineRequest`]).
    pub inline_request: [InlineRequest; 4],
    /// The hub method this route's calls are, where there is one.
    pub hub: Option<Method>,
}

/// What becomes of a call's request that the splice translates as one call on its own
/// upstream connection. One byte: a route is copied on every call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InlineRequest {
    /// Translated once whole.
    Translated,
    /// Neither revision's request has a field ([`crate::translate::identical::request_empty`]): it goes
    /// on as it came, and only the reply is translated.
    Empty,
    /// The call is wire-identical but for what its request may hold, and for its reply when
    /// `reply_translated` ([`crate::translate::identical::checked`]): a request the check finds the
    /// translation would copy goes on as it came, and the call is relayed from there, or its
    /// reply translated for the method alone (with secrets, at least when it is an error).
    Checked { reply_translated: bool },
}

/// A call the splice translates as one call on its own upstream connection.
#[derive(Clone, Copy, Debug)]
pub struct Inline {
    /// The plugin's path.
    pub path: &'static str,
    /// The hub method, when neither revision's request has a field
    /// ([`InlineRequest::Empty`]): the client's request is relayed as it came and only the
    /// reply is translated, for the empty request.
    pub empty_request: Option<Method>,
    /// The check a request that goes on as it came must pass ([`InlineRequest::Checked`]).
    pub check: Option<&'static crate::translate::identical::RequestCheck>,
    /// The reply of a request that passed its check is translated all the same.
    pub reply_translated: bool,
}

impl Route {
    /// The call as its log line and metrics name it.
    pub fn called(&self) -> crate::observe::Called {
        crate::observe::Called {
            dialect: self.dialect,
            method: self.method,
        }
    }

    /// Whether the call's messages pass untouched to an `upstream` plugin: same dialect, and
    /// no answer a v0.2 client must get filtered.
    pub fn passes_to(&self, upstream: Dialect) -> bool {
        self.dialect == upstream
            && !(self.v0_2 && crate::translate::front::v0_2_translates(self.method.method))
    }

    /// Whether the call is relayed without the gateway reading it: its messages pass untouched
    /// and no protection or validation needs them.
    pub fn relays_to(&self, upstream: Dialect) -> bool {
        self.passes_to(upstream) && !self.decode
    }

    /// The path an `upstream` plugin serves this call on when its messages are wire-identical
    /// between the two dialects ([`crate::translate::identical`]): the call is then relayed like a
    /// same-dialect one, its `:path` rewritten. `None` when it must be translated, or is read
    /// by the gateway.
    pub fn identical_path(&self, upstream: Dialect) -> Option<&'static str> {
        match self.identical {
            Some((d, path)) if d == upstream && !self.decode => Some(path),
            _ => None,
        }
    }

    /// The plugin path on which the splice translates this call as one call on a stream of its
    /// own upstream connection (`call::answer::inline_request`, `inline_reply`): where the call
    /// is one raw call to an `upstream` plugin ([`single_call_path`]) and the gateway keeps
    /// nothing of its own around it — no protection, validation or default deadline (those
    /// calls take `call::answer`'s path). Its request goes on as it came when it has
    /// no field ([`Inline::empty_request`]), or when it passes the check of a call that is
    /// wire-identical but for it ([`Inline::check`]). A plugin that `requires_staging` has the
    /// gateway refuse some requests itself (`identical::STAGED`), which the check reads too.
    ///
    /// [`single_call_path`]: crate::translate::upstream::single_call_path
    pub fn inline_call(&self, upstream: Dialect, requires_staging: bool) -> Option<Inline> {
        let at = Dialect::ALL.iter().position(|d| *d == upstream)?;
        let request = self.inline_request[at];
        Some(Inline {
            path: self.inline[at]?.path,
            empty_request: self.hub.filter(|_| request == InlineRequest::Empty),
            check: match (request, self.hub) {
                (InlineRequest::Checked { .. }, Some(m)) => {
                    crate::translate::identical::front_check(self.dialect, m, requires_staging)
                }
                _ => None,
            },
            reply_translated: matches!(
                request,
                InlineRequest::Checked {
                    reply_translated: true
                }
            ),
        })
    }

    /// The hub method of a `csi.v0` call that v1 renamed: a v0.3 client's NodeGetId (v1 kept
    /// only NodeGetInfo) is the NodeGetInfo its request translates to. The draft's and
    /// v0.1's renamed calls (GetNodeID, the probes) stay the gateway's to answer.
    fn renamed_hub(&self) -> Option<Method> {
        if self.dialect != Dialect::V0_3 {
            return None;
        }
        match crate::translate::front::decode_front_method(self.dialect, self.method, &[]) {
            Ok(crate::translate::FrontCall::Hub(request)) => Some(request.method()),
            _ => None,
        }
    }

    /// Works out [`Route::inline`] and [`Route::inline_request`] for the route as it is.
    fn with_inline(mut self) -> Route {
        self.hub = Method::ALL
            .iter()
            .copied()
            .find(|m| m.name() == self.method.method)
            .or_else(|| self.renamed_hub());
        self.inline = Dialect::ALL.map(|upstream| {
            if self.dialect == upstream || self.decode || self.method.server_streaming {
                return None;
            }
            let path =
                crate::translate::upstream::single_call_path(self.dialect, upstream, self.hub?)?;
            upstream.method(path)
        });
        // A v0.2 client's request may be refused by the gateway (`v0_2_refusal`): it is read.
        self.inline_request = Dialect::ALL.map(|upstream| {
            let path = self.method.path;
            if self.v0_2 {
                InlineRequest::Translated
            } else if crate::translate::identical::request_empty(self.dialect, path, upstream) {
                InlineRequest::Empty
            } else if let Some(reply_translated) =
                crate::translate::identical::request_checked(self.dialect, path, upstream)
            {
                InlineRequest::Checked { reply_translated }
            } else {
                InlineRequest::Translated
            }
        });
        self
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("the front can serve {0} or {1} under the package `csi`, not both")]
pub struct PackageClash(pub Dialect, pub Dialect);

pub struct Router {
    /// Looked up on every call with the client's path: foldhash, not SipHash (a fifth of the
    /// splice's cost per call went to hashing). The keys are fixed at start, so a client cannot
    /// choose colliding inserts; a lookup costs what its own bucket holds.
    routes: foldhash::HashMap<&'static str, Route>,
}

impl Router {
    pub fn new(dialects: &[Dialect]) -> Result<Router, PackageClash> {
        let mut routes = foldhash::HashMap::default();
        for &dialect in dialects {
            for method in dialect.methods() {
                let route = Route {
                    dialect,
                    method,
                    v0_2: false,
                    decode: false,
                    identical: crate::translate::identical::upstream_path(dialect, method.path),
                    inline: [None; 4],
                    inline_request: [InlineRequest::Translated; 4],
                    hub: None,
                }
                .with_inline();
                if let Some(other) = routes.insert(method.path, route) {
                    if other.dialect != dialect {
                        return Err(PackageClash(other.dialect, dialect));
                    }
                }
            }
        }
        Ok(Router { routes })
    }

    /// Serves the `csi.v0` routes as v0.2 when `v0_2` (the two share the package).
    pub fn serving_v0_2(mut self, v0_2: bool) -> Router {
        for r in self.routes.values_mut() {
            r.v0_2 = v0_2 && r.dialect == Dialect::V0_3;
            // What a v0.2 client gets filtered or refused is the gateway's answer.
            if r.v0_2 && crate::translate::front::v0_2_translates(r.method.method) {
                r.identical = None;
            }
            *r = r.with_inline();
        }
        self
    }

    /// Marks the methods `policy` needs read by the gateway (protection, validation).
    pub fn decoding(mut self, policy: &Policy) -> Router {
        for r in self.routes.values_mut() {
            r.decode = policy.decodes(r.method);
            *r = r.with_inline();
        }
        self
    }

    /// Marks the calls whose node paths the gateway acts on whatever the plugin's dialect
    /// ([`crate::call::paths::acts_on`]): a v1 client's publish and unpublish when the plugin is
    /// across the bridge (`bridged_upstream`), and every call naming node paths when there is
    /// an appliance listener, whose peers' paths are mirrored (its local clients' calls are
    /// read too, and passed on as they came).
    pub fn bridging(mut self, bridged_upstream: bool, appliance: bool) -> Router {
        use crate::call::paths::{acts_on, Side};
        let here = Path::new("/");
        for r in self.routes.values_mut() {
            let Some(m) = r.hub else { continue };
            let acts = |side| {
                Dialect::ALL
                    .iter()
                    .any(|&up| acts_on(side, r.dialect, up, m))
            };
            if (bridged_upstream && acts(Side::Bridged))
                || (appliance && acts(Side::Appliance { root: here }))
            {
                r.decode = true;
                *r = r.with_inline();
            }
        }
        self
    }

    pub fn route(&self, path: &str) -> Option<Route> {
        self.routes.get(path).copied()
    }

    /// The calls whose `:path` the splice rewrites to one of another length for an `upstream`
    /// plugin (a v0.3 client's NodeGetId is a v1 plugin's NodeGetInfo): each front path, and
    /// the upstream path's length. The splice keeps the plugin's header table apart for them
    /// (`csi_gateway_wire::headers::Follower`).
    pub fn renames(&self, upstream: Dialect, requires_staging: bool) -> Vec<(&'static str, usize)> {
        let mut renames: Vec<_> = self
            .routes
            .iter()
            .filter(|(_, r)| !r.relays_to(upstream))
            .filter_map(|(&path, r)| {
                let inline = r.inline_call(upstream, requires_staging).map(|i| i.path);
                let to = r.identical_path(upstream).or(inline)?;
                (to.len() != path.len()).then_some((path, to.len()))
            })
            .collect();
        renames.sort();
        renames
    }

    /// The dialects served, newest first.
    pub fn dialects(&self) -> Vec<Dialect> {
        let mut d: Vec<Dialect> = self.routes.values().map(|r| r.dialect).collect();
        d.sort();
        d.dedup();
        d.reverse();
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_every_path_of_the_served_dialects() {
        let r = Router::new(&[Dialect::V1, Dialect::V0_3, Dialect::V0_1Oneof]).unwrap();
        for d in [Dialect::V1, Dialect::V0_3, Dialect::V0_1Oneof] {
            for m in d.methods() {
                assert_eq!(r.route(m.path).unwrap().dialect, d);
            }
        }
        assert_eq!(
            r.route("/csi.Identity/GetSupportedVersions")
                .unwrap()
                .dialect,
            Dialect::V0_1Oneof
        );
        assert!(r.route("/csi.v2.Identity/Probe").is_none());
        assert_eq!(
            r.dialects(),
            vec![Dialect::V1, Dialect::V0_3, Dialect::V0_1Oneof]
        );
    }

    #[test]
    fn v0_2_routes_translate_the_calls_v0_2_answers_differently() {
        let r = Router::new(&[Dialect::V1, Dialect::V0_3])
            .unwrap()
            .serving_v0_2(true);
        let caps = r
            .route("/csi.v0.Controller/ControllerGetCapabilities")
            .unwrap();
        assert!(caps.v0_2 && !caps.relays_to(Dialect::V0_3));
        let snap = r.route("/csi.v0.Controller/CreateSnapshot").unwrap();
        assert!(!snap.relays_to(Dialect::V0_3));
        let create = r.route("/csi.v0.Controller/CreateVolume").unwrap();
        assert!(create.relays_to(Dialect::V0_3));
        let v1 = r
            .route("/csi.v1.Controller/ControllerGetCapabilities")
            .unwrap();
        assert!(!v1.v0_2 && v1.relays_to(Dialect::V1));
    }

    #[test]
    fn a_v0_3_node_get_id_is_one_node_get_info_call_to_a_v1_plugin() {
        let r = Router::new(&[Dialect::V1, Dialect::V0_3, Dialect::V0_1])
            .unwrap()
            .serving_v0_2(false);
        let id = r.route("/csi.v0.Node/NodeGetId").unwrap();
        assert_eq!(id.hub, Some(Method::NodeGetInfo));
        let inline = id.inline_call(Dialect::V1, false).unwrap();
        assert_eq!(inline.path, "/csi.v1.Node/NodeGetInfo");
        // Neither request has a field: the client's goes on as it came, and only the reply,
        // which v1 gave two more fields, is translated.
        assert!(inline.check.is_none());
        assert_eq!(inline.empty_request, Some(Method::NodeGetInfo));
        // To a csi.v0 plugin it is the gateway's (a v0.2 plugin answers NodeGetId).
        assert!(id.inline_call(Dialect::V0_3, false).is_none());
        // v0.1's node id call stays the gateway's too.
        let legacy = r.route("/csi.Node/GetNodeID").unwrap();
        assert!(legacy.inline_call(Dialect::V1, false).is_none());
    }

    /// The paths the splice gives another length, per plugin dialect: a v0.3 client's
    /// NodeGetId to a v1 plugin, and v0.1's calls that are one call to a plugin of a `csi.v*`
    /// package (every csi.v0 ↔ csi.v1 rewrite changes a digit).
    #[test]
    fn renames_are_the_rewrites_that_change_a_paths_length() {
        let r = Router::new(&[Dialect::V1, Dialect::V0_3, Dialect::V0_1])
            .unwrap()
            .serving_v0_2(false);
        let node_get_id = ("/csi.v0.Node/NodeGetId", "/csi.v1.Node/NodeGetInfo".len());
        for (upstream, package) in [(Dialect::V1, "csi.v1"), (Dialect::V0_3, "csi.v0")] {
            let renames = r.renames(upstream, false);
            assert_eq!(renames, r.renames(upstream, true));
            assert_eq!(renames.contains(&node_get_id), upstream == Dialect::V1);
            // v0.1's calls the splice makes one call to the plugin: `csi` becomes `csi.v1` or
            // `csi.v0`, three octets longer. Not every v0.1 call is one (ListVolumes is).
            let legacy: Vec<_> = renames.iter().filter(|&&r| r != node_get_id).collect();
            assert!(legacy.contains(&&("/csi.Controller/CreateVolume", 31)));
            for (from, len) in legacy {
                assert!(
                    from.starts_with("/csi.") && !from.starts_with("/csi.v"),
                    "{from}"
                );
                let to = r
                    .route(from)
                    .unwrap()
                    .inline_call(upstream, false)
                    .unwrap()
                    .path;
                assert_eq!(
                    (to.len(), to.replace(package, "csi")),
                    (*len, from.to_string())
                );
            }
        }
        // No rewrite to a v0.1 plugin is one call on the splice's connection.
        assert_eq!(r.renames(Dialect::V0_1, false), []);
        assert_eq!(r.renames(Dialect::V0_1Oneof, false), []);
    }

    #[test]
    fn wire_identical_routes_name_their_upstream_path() {
        let r = Router::new(&[Dialect::V1, Dialect::V0_3, Dialect::V0_1])
            .unwrap()
            .serving_v0_2(false);
        let probe = r.route("/csi.v0.Identity/Probe").unwrap();
        assert_eq!(
            probe.identical_path(Dialect::V1),
            Some("/csi.v1.Identity/Probe")
        );
        assert_eq!(
            probe.identical_path(Dialect::V0_3),
            None,
            "same dialect: relayed"
        );
        assert_eq!(probe.identical_path(Dialect::V0_1), None);
        let caps = r.route("/csi.v0.Node/NodeGetCapabilities").unwrap();
        assert_eq!(caps.identical_path(Dialect::V1), None);
        let legacy = r.route("/csi.Identity/GetPluginInfo").unwrap();
        assert_eq!(legacy.identical_path(Dialect::V1), None);
        // A v0.2 client's NodeGetInfo is refused by the gateway, never relayed.
        let info = "/csi.v0.Node/NodeGetInfo";
        assert!(r.route(info).unwrap().identical_path(Dialect::V1).is_some());
        let v0_2 = Router::new(&[Dialect::V1, Dialect::V0_3])
            .unwrap()
            .serving_v0_2(true);
        assert_eq!(v0_2.route(info).unwrap().identical_path(Dialect::V1), None);
        assert!(v0_2
            .route("/csi.v0.Identity/Probe")
            .unwrap()
            .identical_path(Dialect::V1)
            .is_some());
    }

    #[test]
    fn the_two_csi_dialects_cannot_share_a_listener() {
        assert_eq!(
            Router::new(&[Dialect::V0_1, Dialect::V0_1Oneof]).err(),
            Some(PackageClash(Dialect::V0_1, Dialect::V0_1Oneof))
        );
    }
}

#[cfg(test)]
#[path = "router_translation_tests.rs"]
mod translation_tests;
