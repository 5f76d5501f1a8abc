//! Orchestration of `call_upstream` against an in-test `RawUpstream` that answers from a
//! closure and records every raw call.

use std::sync::Mutex;

use prost::Message;

use super::*;
use crate::dialect::proto::{v0_1 as p01, v0_1_oneof as po, v0_3 as p03};
use crate::errors::{specific_error, DraftRpc};
use crate::fixtures::{self, m};
use crate::version::Version;
use crate::CallError;
use crate::Origin;

type Answer = Box<dyn Fn(&str, &[u8]) -> Result<Vec<u8>, Status> + Send + Sync>;

struct Fake {
    calls: Mutex<Vec<(String, Vec<u8>)>>,
    answer: Answer,
}

impl Fake {
    fn new(
        answer: impl Fn(&str, &[u8]) -> Result<Vec<u8>, Status> + Send + Sync + 'static,
    ) -> Self {
        Fake {
            calls: Mutex::new(Vec::new()),
            answer: Box::new(answer),
        }
    }
    fn paths(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .map(|c| c.0.clone())
            .collect()
    }
    fn body(&self, i: usize) -> Vec<u8> {
        self.calls.lock().unwrap()[i].1.clone()
    }
}

impl RawUpstream for Fake {
    fn unary<'a>(&'a self, path: &'static str, body: Vec<u8>) -> super::super::UnaryFuture<'a> {
        // What the fake plugin answers is its own.
        let out = (self.answer)(path, &body).map_err(CallError::upstream);
        self.calls.lock().unwrap().push((path.to_string(), body));
        Box::pin(async move { out })
    }
}

#[derive(Default)]
struct Store {
    map: Mutex<HashMap<String, HashMap<String, String>>>,
    fail_put: bool,
    /// Reads fail as a damaged stored value does (DATA_LOSS).
    fail_get: bool,
}
impl Store {
    fn entry(&self, id: &str) -> Option<HashMap<String, String>> {
        self.map.lock().unwrap().get(id).cloned()
    }
    fn insert(&self, id: &str, md: HashMap<String, String>) {
        self.map.lock().unwrap().insert(id.into(), md);
    }
}
impl HandleStore for Store {
    fn put<'a>(
        &'a self,
        id: &'a str,
        md: &'a HashMap<String, String>,
    ) -> crate::StoreFuture<'a, ()> {
        Box::pin(async move {
            if self.fail_put {
                return Err(Status::unavailable("store down"));
            }
            self.insert(id, md.clone());
            Ok(())
        })
    }
    fn get<'a>(&'a self, id: &'a str) -> crate::StoreFuture<'a, Option<HashMap<String, String>>> {
        Box::pin(async move {
            if self.fail_get {
                return Err(Status::data_loss("stored value damaged"));
            }
            Ok(self.entry(id))
        })
    }
    fn remove<'a>(&'a self, id: &'a str) -> crate::StoreFuture<'a, ()> {
        Box::pin(async move {
            self.map.lock().unwrap().remove(id);
            Ok(())
        })
    }
}

fn session(d: Dialect) -> UpstreamSession {
    let v = matches!(d, Dialect::V0_1 | Dialect::V0_1Oneof).then_some(Version::new(0, 1, 0));
    UpstreamSession::new(d, v)
}

fn run<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

fn call(
    s: &UpstreamSession,
    up: &Fake,
    store: Option<&dyn HandleStore>,
    req: Req,
) -> Result<Resp, Status> {
    run(call_upstream(s, up, store, req)).map_err(Status::from)
}

#[test]
fn v1_upstream_is_encode_decode() {
    let up = Fake::new(|_, _| Ok(fixtures::response(Method::NodeGetInfo).encode()));
    let got = call(
        &session(Dialect::V1),
        &up,
        None,
        fixtures::request(Method::NodeGetInfo),
    )
    .unwrap();
    assert_eq!(got, fixtures::response(Method::NodeGetInfo));
    assert_eq!(up.paths(), vec!["/csi.v1.Node/NodeGetInfo"]);
    // Transport failures pass through with their message.
    let up = Fake::new(|_, _| Err(Status::unavailable("upstream unix:///x unreachable")));
    let err = call(
        &session(Dialect::V1),
        &up,
        None,
        fixtures::request(Method::Probe),
    )
    .unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (Code::Unavailable, "upstream unix:///x unreachable")
    );
}

#[test]
fn v0_1_probe_is_controller_probe_and_node_probe() {
    let up = Fake::new(|_, _| Ok(Vec::new()));
    let got = call(
        &session(Dialect::V0_1),
        &up,
        None,
        Req::Probe(Default::default()),
    )
    .unwrap();
    assert_eq!(got, Resp::Probe(v1::ProbeResponse { ready: None }));
    assert_eq!(
        up.paths(),
        vec!["/csi.Controller/ControllerProbe", "/csi.Node/NodeProbe"]
    );
    for i in 0..2 {
        let v = p01::ControllerProbeRequest::decode(up.body(i).as_slice())
            .unwrap()
            .version;
        assert_eq!(v, Some(Version::new(0, 1, 0).into()));
    }
    // A node-only plugin: ControllerProbe UNIMPLEMENTED is not a failure.
    let up = Fake::new(|p, _| {
        if p.contains("Controller") {
            Err(Status::unimplemented("no"))
        } else {
            Ok(Vec::new())
        }
    });
    assert!(call(
        &session(Dialect::V0_1),
        &up,
        None,
        Req::Probe(Default::default())
    )
    .is_ok());
    // An unhealthy node service fails the probe with its code.
    let up = Fake::new(|p, _| {
        if p.contains("NodeProbe") {
            Err(Status::failed_precondition("bad config"))
        } else {
            Ok(Vec::new())
        }
    });
    let err = call(
        &session(Dialect::V0_1),
        &up,
        None,
        Req::Probe(Default::default()),
    )
    .unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (Code::FailedPrecondition, "bad config")
    );
    // Known not to serve the controller: only NodeProbe.
    let mut s = session(Dialect::V0_1);
    s.controller_service = Some(false);
    let up = Fake::new(|_, _| Ok(Vec::new()));
    call(&s, &up, None, Req::Probe(Default::default())).unwrap();
    assert_eq!(up.paths(), vec!["/csi.Node/NodeProbe"]);
}

#[test]
fn draft_probe_is_probe_node() {
    let ok = po::ProbeNodeResponse {
        reply: Some(po::probe_node_response::Reply::Result(Default::default())),
    }
    .encode_to_vec();
    let up = Fake::new(move |_, _| Ok(ok.clone()));
    let got = call(
        &session(Dialect::V0_1Oneof),
        &up,
        None,
        Req::Probe(Default::default()),
    )
    .unwrap();
    assert_eq!(got, Resp::Probe(v1::ProbeResponse { ready: None }));
    assert_eq!(up.paths(), vec!["/csi.Node/ProbeNode"]);
    let bad = v0_1_oneof::error_reply(&po::Error {
        value: Some(specific_error(DraftRpc::ProbeNode, 2, "no iscsiadm".into())),
    });
    let up = Fake::new(move |_, _| Ok(bad.clone()));
    let err = call(
        &session(Dialect::V0_1Oneof),
        &up,
        None,
        Req::Probe(Default::default()),
    )
    .unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (Code::FailedPrecondition, "no iscsiadm")
    );
}

fn controller_caps(resp: Resp) -> Vec<i32> {
    let Resp::GetPluginCapabilities(r) = resp else {
        panic!()
    };
    capabilities::v1_plugin_values(r.capabilities).collect()
}

#[test]
fn plugin_capabilities_are_synthesized_for_pre_v0_2_plugins() {
    let req = || Req::GetPluginCapabilities(Default::default());
    // v0.1: serves the controller → CONTROLLER_SERVICE only.
    let up =
        Fake::new(|_, _| Ok(p01::ControllerGetCapabilitiesResponse::default().encode_to_vec()));
    assert_eq!(
        controller_caps(call(&session(Dialect::V0_1), &up, None, req()).unwrap()),
        vec![1]
    );
    assert_eq!(
        up.paths(),
        vec!["/csi.Controller/ControllerGetCapabilities"]
    );
    // v0.1 node-only plugin.
    let up = Fake::new(|_, _| Err(Status::unimplemented("unknown service csi.Controller")));
    assert_eq!(
        controller_caps(call(&session(Dialect::V0_1), &up, None, req()).unwrap()),
        Vec::<i32>::new()
    );
    // Any other failure is not guessed at.
    let up = Fake::new(|_, _| Err(Status::unavailable("down")));
    assert_eq!(
        call(&session(Dialect::V0_1), &up, None, req())
            .unwrap_err()
            .code(),
        Code::Unavailable
    );
    // Known from the session: no call.
    let mut s = session(Dialect::V0_1Oneof);
    s.controller_service = Some(true);
    let up = Fake::new(|_, _| panic!("no call expected"));
    assert_eq!(
        controller_caps(call(&s, &up, None, req()).unwrap()),
        vec![1]
    );
    // Draft: a Result → controller; a gRPC UNIMPLEMENTED → none.
    let ok = po::ControllerGetCapabilitiesResponse {
        reply: Some(po::controller_get_capabilities_response::Reply::Result(
            Default::default(),
        )),
    }
    .encode_to_vec();
    let up = Fake::new(move |_, _| Ok(ok.clone()));
    assert_eq!(
        controller_caps(call(&session(Dialect::V0_1Oneof), &up, None, req()).unwrap()),
        vec![1]
    );
    let up = Fake::new(|_, _| Err(Status::unimplemented("no")));
    assert!(
        controller_caps(call(&session(Dialect::V0_1Oneof), &up, None, req()).unwrap()).is_empty()
    );
}

#[test]
fn v0_2_plugin_falls_back_to_node_get_id_and_the_session_remembers() {
    let up = Fake::new(|p, _| match p {
        "/csi.v0.Node/NodeGetInfo" => Err(Status::unimplemented("unknown method NodeGetInfo")),
        "/csi.v0.Node/NodeGetId" => Ok(p03::NodeGetIdResponse {
            node_id: "n-02".into(),
        }
        .encode_to_vec()),
        other => panic!("{other}"),
    });
    let s = session(Dialect::V0_3);
    let want = Resp::NodeGetInfo(v1::NodeGetInfoResponse {
        node_id: "n-02".into(),
        ..Default::default()
    });
    assert_eq!(
        call(&s, &up, None, Req::NodeGetInfo(Default::default())).unwrap(),
        want
    );
    assert!(s
        .node_get_id_fallback
        .load(std::sync::atomic::Ordering::Relaxed));
    assert_eq!(
        call(&s, &up, None, Req::NodeGetInfo(Default::default())).unwrap(),
        want
    );
    assert_eq!(
        up.paths(),
        vec![
            "/csi.v0.Node/NodeGetInfo",
            "/csi.v0.Node/NodeGetId",
            "/csi.v0.Node/NodeGetId"
        ]
    );
    // A v0.3 plugin answers NodeGetInfo itself; other errors do not trigger the fallback.
    let up = Fake::new(|_, _| Err(Status::internal("boom")));
    let s = session(Dialect::V0_3);
    assert_eq!(
        call(&s, &up, None, Req::NodeGetInfo(Default::default()))
            .unwrap_err()
            .code(),
        Code::Internal
    );
    assert!(!s
        .node_get_id_fallback
        .load(std::sync::atomic::Ordering::Relaxed));
}

fn created() -> Vec<u8> {
    po::CreateVolumeResponse {
        reply: Some(po::create_volume_response::Reply::Result(
            po::create_volume_response::Result {
                volume_info: Some(po::VolumeInfo {
                    capacity_bytes: 1 << 30,
                    handle: Some(po::VolumeHandle {
                        id: "vol-9".into(),
                        metadata: m("md"),
                    }),
                }),
            },
        )),
    }
    .encode_to_vec()
}
fn create_req() -> Req {
    fixtures::carried(Dialect::V0_1Oneof, fixtures::request(Method::CreateVolume))
}

#[test]
fn draft_create_volume_stores_metadata_before_replying() {
    let store = Store::default();
    let up = Fake::new(|_, _| Ok(created()));
    let got = call(
        &session(Dialect::V0_1Oneof),
        &up,
        Some(&store),
        create_req(),
    )
    .unwrap();
    let Resp::CreateVolume(r) = got else { panic!() };
    assert_eq!(r.volume.unwrap().volume_context, m("md"));
    assert_eq!(store.entry("vol-9"), Some(m("md")));
    // If the metadata cannot be stored, the reply that reveals it never leaves.
    let failing = Store {
        fail_put: true,
        ..Default::default()
    };
    let err = call(
        &session(Dialect::V0_1Oneof),
        &up,
        Some(&failing),
        create_req(),
    )
    .unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (Code::Unavailable, "store down")
    );
}

fn delete_handle(up: &Fake) -> Option<po::VolumeHandle> {
    po::DeleteVolumeRequest::decode(up.body(0).as_slice())
        .unwrap()
        .volume_handle
}

#[test]
fn draft_id_only_calls_read_the_store() {
    let store = Store::default();
    store.insert("vol-1", m("md"));
    let ok = po::DeleteVolumeResponse {
        reply: Some(po::delete_volume_response::Reply::Result(Default::default())),
    }
    .encode_to_vec();
    let up = Fake::new(move |_, _| Ok(ok.clone()));
    let del = fixtures::request(Method::DeleteVolume);
    call(&session(Dialect::V0_1Oneof), &up, Some(&store), del.clone()).unwrap();
    assert_eq!(
        delete_handle(&up),
        Some(po::VolumeHandle {
            id: "vol-1".into(),
            metadata: m("md")
        })
    );
    assert_eq!(
        store.entry("vol-1"),
        None,
        "removed after a successful delete"
    );
    // A retried delete after removal: unknown to the store → empty metadata, and the draft's
    // VOLUME_DOES_NOT_EXIST is OK (idempotent since v0.1.0).
    let gone = v0_1_oneof::error_reply(&po::Error {
        value: Some(specific_error(DraftRpc::DeleteVolume, 4, "gone".into())),
    });
    let up = Fake::new(move |_, _| Ok(gone.clone()));
    assert_eq!(
        call(&session(Dialect::V0_1Oneof), &up, Some(&store), del.clone()).unwrap(),
        Resp::DeleteVolume(Default::default())
    );
    assert_eq!(
        delete_handle(&up),
        Some(po::VolumeHandle {
            id: "vol-1".into(),
            metadata: HashMap::new()
        })
    );
    // No store: refused, nothing sent.
    for method in [
        Method::DeleteVolume,
        Method::ControllerUnpublishVolume,
        Method::NodeUnpublishVolume,
    ] {
        let up = Fake::new(|_, _| panic!("no call expected"));
        let err = call(
            &session(Dialect::V0_1Oneof),
            &up,
            None,
            fixtures::request(method),
        )
        .unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition, "{method}");
        assert!(err.message().contains(STORE_REQUIRED), "{}", err.message());
    }
}

/// The handle a draft plugin received, for each call that names a volume.
fn sent_handle(method: Method, body: &[u8]) -> po::VolumeHandle {
    match method {
        Method::ControllerPublishVolume => {
            po::ControllerPublishVolumeRequest::decode(body)
                .unwrap()
                .volume_handle
        }
        Method::NodePublishVolume => {
            po::NodePublishVolumeRequest::decode(body)
                .unwrap()
                .volume_handle
        }
        Method::ValidateVolumeCapabilities => {
            po::ValidateVolumeCapabilitiesRequest::decode(body)
                .unwrap()
                .volume_info
                .unwrap()
                .handle
        }
        Method::NodeUnpublishVolume => {
            po::NodeUnpublishVolumeRequest::decode(body)
                .unwrap()
                .volume_handle
        }
        other => panic!("{other}"),
    }
    .unwrap()
}

#[test]
fn draft_calls_carry_the_plugins_metadata_and_never_store_the_clients() {
    for method in [
        Method::ControllerPublishVolume,
        Method::NodePublishVolume,
        Method::ValidateVolumeCapabilities,
    ] {
        // The plugin refuses (as for an id it does not know): nothing may be written anyway.
        let up = Fake::new(|_, _| Err(Status::not_found("no such volume")));
        let store = Store::default();
        let with_context = fixtures::carried(Dialect::V0_1Oneof, fixtures::request(method));
        let first = call(
            &session(Dialect::V0_1Oneof),
            &up,
            Some(&store),
            with_context.clone(),
        );
        assert_eq!(first.unwrap_err().code(), Code::NotFound, "{method}");
        assert!(
            store.map.lock().unwrap().is_empty(),
            "{method}: a client's context was stored"
        );
        // Unknown to the store: the client's context goes as the metadata.
        assert_eq!(
            sent_handle(method, &up.body(0)).metadata,
            m("ctx"),
            "{method}"
        );
        // Known: the plugin's own metadata, whatever the client added (pod info, tokens).
        store.insert("vol-1", m("md"));
        let _ = call(
            &session(Dialect::V0_1Oneof),
            &up,
            Some(&store),
            with_context,
        );
        assert_eq!(
            sent_handle(method, &up.body(1)).metadata,
            m("md"),
            "{method}"
        );
        assert_eq!(
            store.entry("vol-1"),
            Some(m("md")),
            "{method}: left as the plugin gave it"
        );
        // Sent with no context at all: still the plugin's metadata, not an empty map.
        let bare = match fixtures::carried(Dialect::V0_1Oneof, fixtures::request(method)) {
            Req::ControllerPublishVolume(mut r) => {
                r.volume_context.clear();
                Req::ControllerPublishVolume(r)
            }
            Req::NodePublishVolume(mut r) => {
                r.volume_context.clear();
                Req::NodePublishVolume(r)
            }
            Req::ValidateVolumeCapabilities(mut r) => {
                r.volume_context.clear();
                Req::ValidateVolumeCapabilities(r)
            }
            other => other,
        };
        let _ = call(&session(Dialect::V0_1Oneof), &up, Some(&store), bare);
        assert_eq!(
            sent_handle(method, &up.body(2)).metadata,
            m("md"),
            "{method}"
        );
    }
}

#[test]
fn pre_staging_front_cannot_publish_while_staging_is_required() {
    let mut s = session(Dialect::V1);
    s.requires_staging = true;
    let up = Fake::new(|_, _| Ok(Vec::new()));
    let mut publish = fixtures::request(Method::NodePublishVolume);
    let Req::NodePublishVolume(r) = &mut publish else {
        panic!()
    };
    r.staging_target_path.clear();
    let err = run(call_upstream(&s, &up, None, publish)).unwrap_err();
    assert_eq!(
        (err.code(), err.origin),
        (Code::FailedPrecondition, Origin::Client),
        "the client skipped the staging its revision has"
    );
    assert!(err.message().contains("staging"), "{}", err.message());
    assert!(up.paths().is_empty());
    // A client that staged goes through.
    call(&s, &up, None, fixtures::request(Method::NodePublishVolume)).unwrap();
    assert_eq!(up.paths(), vec!["/csi.v1.Node/NodePublishVolume"]);
}

#[test]
fn missing_rpcs_are_unimplemented_without_a_call() {
    for (d, method) in [
        (Dialect::V0_1, Method::CreateSnapshot),
        (Dialect::V0_1Oneof, Method::ListSnapshots),
        (Dialect::V0_1, Method::NodeStageVolume),
        (Dialect::V0_3, Method::ControllerExpandVolume),
        (Dialect::V0_3, Method::NodeGetVolumeStats),
        (Dialect::V0_3, Method::CreateVolumeGroupSnapshot),
        (Dialect::V0_1Oneof, Method::ControllerModifyVolume),
    ] {
        let up = Fake::new(|_, _| panic!("no call expected"));
        let err = call(
            &session(d),
            &up,
            Some(&Store::default()),
            fixtures::request(method),
        )
        .unwrap_err();
        assert_eq!(err.code(), Code::Unimplemented, "{d} {method}");
    }
}

/// `single_call` is what `call_upstream` does for every method `single_call_path` names: the
/// same one raw call, and `single_reply` the same reply, for an answer and for an error.
#[test]
fn single_calls_are_what_call_upstream_does() {
    for (dialect, front) in [(Dialect::V1, Dialect::V0_3), (Dialect::V0_3, Dialect::V1)] {
        let s = session(dialect);
        let mut single = 0;
        for &method in Method::ALL {
            let Some(path) = single_call_path(front, dialect, method) else {
                continue;
            };
            single += 1;
            assert!(fixtures::served(dialect, method), "{dialect} {method}");
            let req = fixtures::request(method);
            let up = Fake::new(|_, _| Ok(Vec::new()));
            let whole = call(&s, &up, None, req.clone());
            let Some((sent_path, body)) = single_call(front, &s, &req) else {
                // A request the plugin's revision cannot carry: refused before any call.
                assert!(
                    whole.is_err() && up.paths().is_empty(),
                    "{dialect} {method}"
                );
                continue;
            };
            assert_eq!(sent_path, path, "{dialect} {method}");
            assert_eq!(up.paths(), vec![path.to_string()], "{dialect} {method}");
            assert_eq!(up.body(0), body, "{dialect} {method}");
            assert_eq!(
                single_reply(&s, front, &req, Ok(&[])).ok(),
                whole.ok(),
                "{dialect} {method}"
            );
            for code in [Code::NotFound, Code::Unavailable, Code::AlreadyExists] {
                let s_err = Status::new(code, "plugin says no");
                let whole = super::super::errors::recode(method, dialect, front, s_err.clone());
                let got = single_reply(&s, front, &req, Err(CallError::upstream(s_err)));
                assert_eq!(
                    got.map_err(|e| (e.code(), e.message().to_string())),
                    whole.map_err(|e| (e.code(), e.message().to_string())),
                    "{dialect} {method} {code:?}"
                );
            }
        }
        assert!(single > 10, "{dialect}: only {single} single calls");
        // Never for what needs more than one call, the store, staging or target paths: a v1
        // client's node publish and unpublish of a v0.3 plugin (the gateway owns the target),
        // its NodeGetInfo (NodeGetId for a v0.2 plugin). A v0.3 client's node publish and
        // unpublish of a v1 plugin are one call each, as is its NodeGetInfo (or NodeGetId).
        for m in [Method::NodePublishVolume, Method::NodeUnpublishVolume] {
            let single = single_call_path(front, dialect, m);
            assert_eq!(
                single.is_some(),
                dialect == Dialect::V1,
                "{front} -> {dialect} {m}"
            );
        }
        assert_eq!(
            single_call_path(front, dialect, Method::NodeGetInfo).is_some(),
            dialect == Dialect::V1,
            "{front} -> {dialect} NodeGetInfo"
        );
    }
    // Clients that predate staging: the gateway may emulate it around node publish.
    for front in [Dialect::V0_1, Dialect::V0_1Oneof] {
        for m in [Method::NodePublishVolume, Method::NodeUnpublishVolume] {
            assert_eq!(single_call_path(front, Dialect::V1, m), None, "{front} {m}");
        }
    }
    for d in [Dialect::V0_1, Dialect::V0_1Oneof] {
        assert_eq!(single_call_path(Dialect::V1, d, Method::CreateVolume), None);
        // Their node id calls stay the gateway's.
        assert_eq!(single_call_path(d, Dialect::V1, Method::NodeGetInfo), None);
    }
}

/// Whose failure a call is comes from where it was made, never from its code: the plugin's
/// statuses (even UNAVAILABLE), its draft `Error` and its undecodable reply are the upstream's;
/// a refusal of what the plugin's revision cannot honour and a failing store (even NOT_FOUND
/// or DATA_LOSS) are the gateway's, and the plugin is not called for them.
#[test]
fn each_failure_says_whose_it_is() {
    let origin = |r: Result<Resp, CallError>| {
        let e = r.unwrap_err();
        (e.code(), e.origin)
    };
    let v1 = session(Dialect::V1);
    let info = || Req::NodeGetInfo(Default::default());
    for code in [Code::NotFound, Code::Unavailable, Code::DeadlineExceeded] {
        let up = Fake::new(move |_, _| Err(Status::new(code, "plugin says no")));
        let got = run(call_upstream(&v1, &up, None, info()));
        assert_eq!(origin(got), (code, Origin::Upstream));
    }
    let up = Fake::new(|_, _| Ok(vec![0xff]));
    let got = run(call_upstream(&v1, &up, None, info()));
    assert_eq!(origin(got), (Code::Internal, Origin::Upstream));

    let draft = session(Dialect::V0_1Oneof);
    let bad = v0_1_oneof::error_reply(&po::Error {
        value: Some(specific_error(DraftRpc::ProbeNode, 2, "no iscsiadm".into())),
    });
    let up = Fake::new(move |_, _| Ok(bad.clone()));
    let got = run(call_upstream(
        &draft,
        &up,
        None,
        Req::Probe(Default::default()),
    ));
    assert_eq!(origin(got), (Code::FailedPrecondition, Origin::Upstream));

    // SINGLE_NODE_MULTI_WRITER (v1.5) to a v0.3 plugin: refused by the gateway.
    let up = Fake::new(|_, _| Ok(Vec::new()));
    let create = Req::CreateVolume(v1::CreateVolumeRequest {
        name: "v".into(),
        volume_capabilities: vec![v1::VolumeCapability {
            access_type: None,
            access_mode: Some(v1::volume_capability::AccessMode { mode: 7 }),
        }],
        ..Default::default()
    });
    let got = run(call_upstream(&session(Dialect::V0_3), &up, None, create));
    assert_eq!(origin(got), (Code::InvalidArgument, Origin::Gateway));
    assert!(up.paths().is_empty(), "{:?}", up.paths());

    let damaged = Store {
        fail_get: true,
        ..Default::default()
    };
    let del = fixtures::request(Method::DeleteVolume);
    let got = run(call_upstream(&draft, &up, Some(&damaged), del));
    assert_eq!(origin(got), (Code::DataLoss, Origin::Gateway));
    assert!(up.paths().is_empty(), "{:?}", up.paths());
    let up = Fake::new(|_, _| Ok(created()));
    let failing = Store {
        fail_put: true,
        ..Default::default()
    };
    let got = run(call_upstream(&draft, &up, Some(&failing), create_req()));
    assert_eq!(origin(got), (Code::Unavailable, Origin::Gateway));
}
