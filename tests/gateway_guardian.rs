//! The driver's guardian through the built gateway, in front of the reference plugin made slow
//! per RPC (`--delay`, which logs `rpc begin` with how many calls of the RPC run at once, so
//! the calls reaching the plugin are counted there): single flight (a retry of a running call
//! joins it; a different request on its key is ABORTED), calls that outlive their caller,
//! `GET /calls`, the queues of `max_in_flight` and `qps`, and a gateway SIGKILLed and started
//! again while a kept call runs (the store's handles survive, the retries end with one volume);
//! and the same guard on a node gateway that reaches the plugin over the bridge (mutual TLS).

use csi_gateway_test_support as support;

use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};

use csi_gateway::dialect::proto::{v0_3, v1};
use csi_gateway::dialect::Dialect;
use support::front::{cap_v03, cap_v1, Front, Volume};
use support::gateway::Gateway;
use support::{scrape, value, Backend, Options};
use tonic::transport::Channel;
use tonic::Code;

const CREATE: &str = "/csi.v1.Controller/CreateVolume";
const STAGE: &str = "/csi.v1.Node/NodeStageVolume";

const SINGLE_FLIGHT: &str = "[calls.methods.CreateVolume]\nsingle_flight = true\n\
     [calls.methods.NodeStageVolume]\nsingle_flight = true\n";

struct Setup {
    backend: Backend,
    gateway: Gateway,
    metrics: u16,
    _dir: tempfile::TempDir,
}

/// A v1 plugin slowed down by `delay` (`--delay`) behind a gateway with `calls`.
async fn setup(delay: &str, calls: &str) -> Setup {
    let mut options = Options::new("v1");
    if !delay.is_empty() {
        options = options.arg(format!("--delay={delay}"));
    }
    let backend = Backend::start(options).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.toml");
    let text = format!(
        "[listen]\nendpoint = \"unix:///unused\"\n[upstream]\nendpoint = \"unix:///unused-plugin\"\n\
         [state]\ndir = \"/unused\"\n{calls}"
    );
    std::fs::write(&config, text).unwrap();
    let metrics = support::free_port();
    let flags = [
        format!("--config={}", config.display()),
        format!("--metrics-listen=127.0.0.1:{metrics}"),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let gateway = Gateway::start(&backend.socket, "v0.1", &flags).await;
    Setup {
        backend,
        gateway,
        metrics,
        _dir: dir,
    }
}

/// The calls of `path` that reached the plugin, and the most of them running at once.
fn at_plugin(backend: &Backend, path: &str) -> (usize, usize) {
    let needle = format!("rpc begin method={path} in_flight=");
    let log = backend.log_text();
    let at_once: Vec<usize> = log
        .lines()
        .filter_map(|l| l.split_once(&needle))
        .map(|(_, n)| n.trim().parse().unwrap())
        .collect();
    (at_once.len(), at_once.iter().copied().max().unwrap_or(0))
}

/// A CO's retry loop: `attempt` with a deadline of `deadline`, again after a failure with a
/// backoff from 100 ms doubling to 1 s, `attempts` times at most (the external-provisioner's
/// and kubelet's way, shortened). Returns the last outcome and the attempts made.
async fn retried<T, F, Fut>(
    attempts: usize,
    deadline: Duration,
    attempt: F,
) -> (Result<T, tonic::Status>, usize)
where
    F: Fn(Duration) -> Fut,
    Fut: Future<Output = Result<T, tonic::Status>>,
{
    let mut backoff = Duration::from_millis(100);
    let mut last = Err(tonic::Status::unknown("never called"));
    for n in 1..=attempts {
        last = attempt(deadline).await;
        if last.is_ok() {
            return (last, n);
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
    (last, attempts)
}

fn create_v1(name: &str, size: i64, deadline: Duration) -> tonic::Request<v1::CreateVolumeRequest> {
    let mut r = tonic::Request::new(v1::CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(v1::CapacityRange {
            required_bytes: size,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![cap_v1()],
        parameters: HashMap::from([("tier".into(), "fast".into())]),
        ..Default::default()
    });
    r.set_timeout(deadline);
    r
}

/// A provisioner-like client: CreateVolume with a 1 s deadline, retried 8 times, against a
/// plugin taking 5 s. Returns the volume id it ended with, if any.
async fn provision_v1(ch: Channel, name: &str) -> Option<String> {
    let client = v1::controller_client::ControllerClient::new(ch);
    let attempt = |deadline| {
        let mut c = client.clone();
        async move { c.create_volume(create_v1(name, 1 << 20, deadline)).await }
    };
    let (outcome, _) = retried(8, Duration::from_secs(1), attempt).await;
    outcome
        .ok()
        .map(|r| r.into_inner().volume.unwrap().volume_id)
}

/// Without the guardian every retry reaches the slow plugin, is cut off at its deadline, and
/// the provisioner never gets its volume; with it, the plugin sees one CreateVolume and the
/// provisioner ends with the volume.
#[tokio::test]
async fn provisioner_retries_reach_the_plugin_once() {
    let (without, with) = tokio::join!(
        setup("CreateVolume=5s", ""),
        setup("CreateVolume=5s", SINGLE_FLIGHT)
    );
    let (lost, got) = tokio::join!(
        provision_v1(without.gateway.channel().await, "pvc-1"),
        provision_v1(with.gateway.channel().await, "pvc-1"),
    );
    let before = at_plugin(&without.backend, CREATE);
    let after = at_plugin(&with.backend, CREATE);
    eprintln!("CreateVolume calls at the plugin: without the guardian {before:?}, with {after:?}");
    assert_eq!((lost, before.0), (None, 8), "without the guardian");
    assert!(got.is_some(), "the provisioner ends with its volume");
    assert_eq!(after, (1, 1), "with the guardian");
    let joined = format!("csi_gateway_single_flight_joined_total{{method_name=\"{CREATE}\"}}");
    assert!(value(&scrape(with.metrics), &joined) >= Some(1.0));
}

/// The same through a translated pair: a v0.3 provisioner in front of the v1 plugin.
#[tokio::test]
async fn a_v0_3_provisioner_in_front_of_a_v1_plugin_reaches_it_once() {
    let s = setup("CreateVolume=5s", SINGLE_FLIGHT).await;
    let client = v0_3::controller_client::ControllerClient::new(s.gateway.channel().await);
    let attempt = |deadline| {
        let mut c = client.clone();
        let mut r = tonic::Request::new(v0_3::CreateVolumeRequest {
            name: "pvc-03".into(),
            capacity_range: Some(v0_3::CapacityRange {
                required_bytes: 1 << 20,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![cap_v03()],
            ..Default::default()
        });
        r.set_timeout(deadline);
        async move { c.create_volume(r).await }
    };
    let (outcome, attempts) = retried(8, Duration::from_secs(1), attempt).await;
    let volume = outcome.expect("the v0.3 provisioner ends with its volume");
    assert!(volume.into_inner().volume.is_some());
    assert!(attempts > 1, "the first attempt timed out");
    assert_eq!(at_plugin(&s.backend, CREATE), (1, 1));
}

/// A kubelet-like client: NodeStageVolume with a short deadline, retried, against a plugin
/// whose staging takes 5 s: the plugin stages once.
#[tokio::test]
async fn kubelet_stage_retries_reach_the_plugin_once() {
    let s = setup("NodeStageVolume=5s", SINGLE_FLIGHT).await;
    let ch = s.gateway.channel().await;
    let f = Front::new(Dialect::V1, ch.clone());
    let volume = f
        .create("pvc-stage", 1 << 20, &HashMap::new())
        .await
        .unwrap();
    let node = f.node_id().await.unwrap();
    let publish = f.controller_publish(&volume, &node).await.unwrap();
    let staging = s.backend.path("staging");
    std::fs::create_dir_all(&staging).unwrap();
    let client = v1::node_client::NodeClient::new(ch);
    let attempt = |deadline| {
        let mut c = client.clone();
        let mut r = tonic::Request::new(v1::NodeStageVolumeRequest {
            volume_id: volume.id.clone(),
            publish_context: publish.clone(),
            staging_target_path: staging.display().to_string(),
            volume_capability: Some(cap_v1()),
            volume_context: volume.context.clone(),
            ..Default::default()
        });
        r.set_timeout(deadline);
        async move { c.node_stage_volume(r).await }
    };
    let (outcome, attempts) = retried(8, Duration::from_secs(1), attempt).await;
    outcome.expect("the volume ends staged");
    eprintln!(
        "NodeStageVolume: {attempts} attempts, at the plugin {:?}",
        at_plugin(&s.backend, STAGE)
    );
    assert_eq!(at_plugin(&s.backend, STAGE), (1, 1));
}

/// A retry with a different capacity while the first runs is ABORTED naming the running call;
/// the first, its caller gone and never retried, runs on to the end at the plugin and is
/// logged; `GET /calls` lists it meanwhile, with no secret.
#[tokio::test]
async fn a_different_request_is_aborted_and_a_call_left_alone_finishes() {
    let s = setup("CreateVolume=3s", SINGLE_FLIGHT).await;
    let mut client = v1::controller_client::ControllerClient::new(s.gateway.channel().await);
    let mut first = create_v1("pvc-x", 1 << 20, Duration::from_millis(500));
    first.get_mut().secrets = HashMap::from([("password".into(), "hunter2-secret".into())]);
    // The client gives up at its deadline (tonic's own timer: CANCELLED, or the gateway's
    // DEADLINE_EXCEEDED, whichever comes first).
    let left = client.clone().create_volume(first).await.unwrap_err();
    assert!(
        matches!(left.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{left:?}"
    );
    let listed = ureq::get(&format!("http://127.0.0.1:{}/calls", s.metrics))
        .call()
        .unwrap()
        .into_body()
        .read_to_string()
        .unwrap();
    assert!(listed.contains("\"method\":\"CreateVolume\""), "{listed}");
    assert!(listed.contains("\"volume\":\"pvc-x\""), "{listed}");
    assert!(!listed.contains("hunter2"), "{listed}");
    let other = client
        .create_volume(create_v1("pvc-x", 2 << 20, Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert_eq!(other.code(), Code::Aborted, "{other:?}");
    assert!(
        other
            .message()
            .contains("CreateVolume request on volume pvc-x has been running"),
        "{other:?}"
    );
    let began = Instant::now();
    while !s
        .gateway
        .log_text()
        .contains("call finished after its callers left")
    {
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "{}",
            s.gateway.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!s.gateway.log_text().contains("hunter2"));
    assert_eq!(at_plugin(&s.backend, CREATE), (1, 1));
    let kept = format!(
        "csi_gateway_single_flight_kept_total{{method_name=\"{CREATE}\",grpc_status_code=\"Ok\"}}"
    );
    assert_eq!(value(&scrape(s.metrics), &kept), Some(1.0));
}

/// A draft (v0.1-oneof) client, translated to the v1 plugin: the different request gets its
/// dialect's OPERATION_PENDING_FOR_VOLUME, the identical one joins.
#[tokio::test]
async fn a_draft_client_gets_operation_pending_for_volume() {
    let backend = Backend::start(Options::new("v1").arg("--delay=CreateVolume=2s")).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.toml");
    let text = format!(
        "[listen]\nendpoint = \"unix:///unused\"\n[upstream]\nendpoint = \"unix:///unused-plugin\"\n\
         [state]\ndir = \"/unused\"\n{SINGLE_FLIGHT}"
    );
    std::fs::write(&config, text).unwrap();
    let flag = format!("--config={}", config.display());
    let gateway = Gateway::start(&backend.socket, "v0.1-oneof", &[&flag]).await;
    let f = Front::new(Dialect::V0_1Oneof, gateway.channel().await);
    let none = HashMap::new();
    let later = |size: u64| {
        let f = &f;
        let none = &none;
        async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            f.create("pvc-draft", size, none).await
        }
    };
    let (first, same, other) = tokio::join!(
        f.create("pvc-draft", 1 << 20, &none),
        later(1 << 20),
        later(2 << 20)
    );
    let (first, same) = (first.unwrap(), same.unwrap());
    assert_eq!(first.id, same.id, "the retry gets the same volume");
    let other = other.unwrap_err();
    assert!(
        other.is(Code::Aborted, "OPERATION_PENDING_FOR_VOLUME"),
        "{other:?}"
    );
    assert_eq!(at_plugin(&backend, CREATE), (1, 1));
}

/// 100 CreateVolumes at once, `max_in_flight = 4` with `queue`: never more than 4 at the
/// plugin, all 100 succeed, and `GET /calls` lists them meanwhile.
#[tokio::test]
async fn a_hundred_creates_queue_behind_max_in_flight() {
    let calls = "[calls.methods.CreateVolume]\nmax_in_flight = 4\nqueue = true\n";
    let s = setup("CreateVolume=100ms", calls).await;
    let client = v1::controller_client::ControllerClient::new(s.gateway.channel().await);
    let all = (0..100).map(|n| {
        let mut c = client.clone();
        async move {
            c.create_volume(create_v1(
                &format!("pvc-{n}"),
                1 << 20,
                Duration::from_secs(60),
            ))
            .await
        }
    });
    let all = tokio::spawn(futures_util::future::join_all(all));
    // Meanwhile `GET /calls` lists them (guarded, not single flight: never joined), queued or
    // at the plugin, with the age of the oldest in its gauge.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let listed = get_calls(s.metrics);
    let n = listed.matches("\"method\":\"CreateVolume\"").count();
    assert!((5..=100).contains(&n), "{n} listed: {listed}");
    assert!(!listed.contains("\"joined_retries\":1"), "{listed}");
    let oldest = format!("csi_gateway_protection_oldest_seconds{{method_name=\"{CREATE}\"}}");
    assert!(value(&scrape(s.metrics), &oldest) > Some(0.0), "{oldest}");
    let outcomes = all.await.unwrap();
    assert_eq!(get_calls(s.metrics), "{\"calls\":[]}", "none left");
    assert_eq!(value(&scrape(s.metrics), &oldest), Some(0.0), "{oldest}");
    let failed: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert!(
        failed.is_empty(),
        "{} failed, first {:?}",
        failed.len(),
        failed.first()
    );
    let (calls, most) = at_plugin(&s.backend, CREATE);
    eprintln!("100 queued CreateVolumes: {calls} at the plugin, at most {most} at once");
    assert_eq!(calls, 100);
    assert!((1..=4).contains(&most), "{most} at once");
}

/// `GET /calls` on the metrics endpoint `port`, as it came.
fn get_calls(port: u16) -> String {
    ureq::get(&format!("http://127.0.0.1:{port}/calls"))
        .call()
        .unwrap()
        .into_body()
        .read_to_string()
        .unwrap()
}

/// `qps` with `queue` spaces calls out; without `queue`, the calls over it are refused.
#[tokio::test]
async fn qps_spaces_calls_out_or_refuses_them() {
    let calls = "[calls.methods.CreateVolume]\nqps = 4\nburst = 1\nqueue = true\n\
                 [calls.methods.DeleteVolume]\nqps = 1\n";
    let s = setup("", calls).await;
    let client = v1::controller_client::ControllerClient::new(s.gateway.channel().await);
    let began = Instant::now();
    let creates = (0..9).map(|n| {
        let mut c = client.clone();
        async move {
            let r = c
                .create_volume(create_v1(
                    &format!("pvc-q{n}"),
                    1 << 20,
                    Duration::from_secs(20),
                ))
                .await;
            (r, began.elapsed())
        }
    });
    let done = futures_util::future::join_all(creates).await;
    let last = done.iter().map(|(_, t)| *t).max().unwrap();
    let failed = done.iter().find(|(r, _)| r.is_err());
    assert!(failed.is_none(), "{failed:?}");
    let rate = 8.0 / last.as_secs_f64();
    eprintln!("9 CreateVolumes at qps 4, burst 1: the last after {last:?} ({rate:.1}/s)");
    assert!(
        (Duration::from_millis(1900)..Duration::from_secs(4)).contains(&last),
        "{last:?}"
    );
    let deletes = (0..3).map(|n| {
        let mut c = client.clone();
        async move {
            c.delete_volume(v1::DeleteVolumeRequest {
                volume_id: format!("gone-{n}"),
                ..Default::default()
            })
            .await
        }
    });
    let refused = futures_util::future::join_all(deletes)
        .await
        .into_iter()
        .filter(|r| matches!(r, Err(s) if s.code() == Code::ResourceExhausted && s.message().contains("qps")))
        .count();
    assert_eq!(refused, 2);
}

/// Settings that cannot apply are refused at start, named.
#[tokio::test]
async fn single_flight_on_a_read_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    std::fs::write(
        &path,
        "[calls.methods.ListVolumes]\nsingle_flight = true\n[calls.methods.Probe]\nqueue = true\n",
    )
    .unwrap();
    let out = std::process::Command::new(support::gateway::binary())
        .args(["run", &format!("--config={}", path.display())])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("calls.methods.ListVolumes.single_flight"),
        "{err}"
    );
    assert!(err.contains("calls.methods.Probe.queue"), "{err}");
}

/// A gateway restart while a kept call runs loses no state the store guarantees. The store
/// (embedded, the default) holds the VolumeHandle metadata of the volumes a draft plugin
/// created, written before the reply that reveals them (src/store/mod.rs): a DeleteVolume by
/// id alone reaches the draft plugin only with it. A CreateVolume whose caller left at its
/// 1 s deadline is kept running at the 2 s plugin when the gateway is SIGKILLed and started
/// again on the same socket and store; the client's retries end with the volume, the plugin
/// holds one volume of that name, and the volume created before the restart still resolves.
#[tokio::test]
async fn a_restart_while_a_kept_call_runs_loses_no_stored_state() {
    let backend = Backend::start(Options::new("v0.1-oneof").arg("--delay=CreateVolume=2s")).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gateway.toml");
    std::fs::write(&config, SINGLE_FLIGHT).unwrap();
    let metrics = support::free_port();
    let flags = [
        format!("--config={}", config.display()),
        format!("--metrics-listen=127.0.0.1:{metrics}"),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut gateway = Gateway::start(&backend.socket, "v0.1", &flags).await;
    // The draft plugin's path for it.
    const DRAFT_CREATE: &str = "/csi.Controller/CreateVolume";
    let none = HashMap::new();
    // Stored before the restart: a volume of the draft plugin, its handle in the store.
    let before = Front::new(Dialect::V1, gateway.channel().await)
        .create("pvc-before", 1 << 20, &none)
        .await
        .unwrap();

    // The provisioner's first attempt leaves at its deadline; the call is kept at the plugin.
    let client = v1::controller_client::ControllerClient::new(gateway.channel().await);
    let left = client
        .clone()
        .create_volume(create_v1("pvc-restart", 1 << 20, Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert!(
        matches!(left.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{left:?}"
    );
    let listed = ureq::get(&format!("http://127.0.0.1:{metrics}/calls"))
        .call()
        .unwrap()
        .into_body()
        .read_to_string()
        .unwrap();
    assert!(listed.contains("\"volume\":\"pvc-restart\""), "{listed}");
    assert_eq!(
        at_plugin(&backend, DRAFT_CREATE).0,
        2,
        "pvc-before, then the kept call"
    );

    // Its retries go on, on the same channel (which dials again after a failure), while the
    // gateway is killed and started again on the same socket and state directory.
    let retries = tokio::spawn(async move {
        let attempt = |deadline| {
            let mut c = client.clone();
            async move {
                c.create_volume(create_v1("pvc-restart", 1 << 20, deadline))
                    .await
            }
        };
        retried(12, Duration::from_secs(1), attempt).await
    });
    gateway.kill_and_restart().await;
    let (outcome, attempts) = retries.await.unwrap();
    let volume = outcome
        .expect("the retries end with the volume")
        .into_inner()
        .volume
        .unwrap()
        .volume_id;
    eprintln!("after the restart: the volume after {attempts} retries");
    // One more CreateVolume reached the plugin after the restart, its retries joined to it.
    assert_eq!(at_plugin(&backend, DRAFT_CREATE).0, 3);

    // The plugin holds that volume once, beside the one created before the restart: listed
    // on its own socket (a ListVolumes through the gateway would store the handles it lists
    // again, and the check below would prove nothing).
    let at_the_plugin = Front::new(Dialect::V0_1Oneof, backend.channel().await);
    let (mut ids, mut token) = (Vec::new(), String::new());
    loop {
        let (page, next) = at_the_plugin.list_volumes(&token).await.unwrap();
        ids.extend(page);
        if next.is_empty() {
            break;
        }
        token = next;
    }
    ids.sort();
    let mut expected = vec![before.id.clone(), volume.clone()];
    expected.sort();
    assert_eq!(ids, expected);

    // The handles survived: both volumes delete by id alone (the draft plugin needs the
    // metadata its CreateVolume returned, which only the store has).
    let f = Front::new(Dialect::V1, gateway.channel().await);
    for id in [&before.id, &volume] {
        let id_only = Volume {
            id: id.clone(),
            context: HashMap::new(),
            capacity: 0,
        };
        f.delete(&id_only, &none)
            .await
            .unwrap_or_else(|e| panic!("DeleteVolume {id} by id alone after the restart: {e:?}"));
    }
}

/// Over the bridge: the orchestrator's node gateway guards CreateVolume and reaches the slow
/// v1 plugin through an appliance gateway over mutual TLS. The provisioner's retries reach the
/// plugin once, and it ends with its volume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_bridge_provisioner_retries_reach_the_plugin_once() {
    use csi_gateway::tls::gencerts::Leaf;
    use support::bridge::{
        appliance_section, free_port, front_section, gateway, upstream_tls_section, Pki,
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pki = Pki::new(d, "guardian");
    let (scert, skey) = pki.issue("server", &Leaf::server(&["localhost"]));
    let (ccert, ckey) = pki.issue("client", &Leaf::client(&["node-1.test"], &[]));
    let backend = Backend::start(Options::new("v1").arg("--delay=CreateVolume=5s")).await;
    let port = free_port();
    let appliance_config = front_section(
        &d.join("appliance.sock"),
        &format!("unix://{}", backend.socket.display()),
    ) + &appliance_section(port, &scert, &skey, &pki.ca_path, "");
    let appliance = gateway("appliance", d, &appliance_config);
    appliance.wait_log("appliance listening");
    appliance.wait_log("upstream connected");
    let node_config = front_section(&d.join("node.sock"), &format!("tcp://127.0.0.1:{port}"))
        + &upstream_tls_section(&ccert, &ckey, &pki.ca_path, "")
        + "[calls.methods.CreateVolume]\nsingle_flight = true\n";
    let node = gateway("node", d, &node_config);
    node.wait_log("upstream connected");

    let ch = support::connect(&d.join("node.sock")).await;
    let volume = provision_v1(ch, "pvc-bridged").await;
    assert!(volume.is_some(), "the provisioner ends with its volume");
    assert_eq!(
        at_plugin(&backend, CREATE),
        (1, 1),
        "CreateVolume calls at the plugin"
    );
    drop((node, appliance));
}
