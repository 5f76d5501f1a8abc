//! The bridge on the fast path: the node gateway splices each client connection onto an mTLS connection of its own to the appliance, and the
//! appliance splices each accepted mTLS connection onto a UNIX connection of its own to the
//! plugin — shown by `csi_gateway_connections_total{path, client, upstream}` on both. The TLS
//! rules stay: the node gateway splices onto the address it failed over to, a service the
//! peer may not call is refused on the spliced appliance with the very reply an unattached
//! connection (one the appliance could not give a plugin connection of its own) gets, and a silent appliance is dropped by the splice's own keepalive PINGs.

use csi_gateway_test_support as support;
use csi_gateway_test_support::bridge as bridge_support;

use std::path::Path;
use std::time::{Duration, Instant};

use bridge_support::*;
use csi_gateway::endpoint::Endpoint;
use csi_gateway::grpc::{Code, Status};
use csi_gateway::tls::gencerts::Leaf;
use csi_gateway::upstream::Connection;

const CLIENT_DNS: &str = "node-1.csi-gateway.test";

/// The value of the connection counter with these labels (0 when absent).
fn connections(metrics: &str, path: &str, client: &str, upstream: &str) -> f64 {
    let labels = [
        format!("path=\"{path}\""),
        format!("client=\"{client}\""),
        format!("upstream=\"{upstream}\""),
    ];
    metrics
        .lines()
        .filter(|l| l.starts_with("csi_gateway_connections_total{"))
        .filter(|l| labels.iter().all(|want| l.contains(want.as_str())))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// One client connection to a gateway's UNIX socket.
async fn connect(sock: &Path) -> Connection {
    Connection::connect(&Endpoint::Unix(sock.into()), Duration::from_secs(5))
        .await
        .expect("connect to the gateway")
}

async fn unary(conn: &Connection, path: &str) -> Result<bytes::Bytes, Status> {
    tokio::time::timeout(Duration::from_secs(10), conn.unary(path, &[]))
        .await
        .map(|r| r.map_err(Status::from))
        .unwrap_or_else(|_| Err(Status::deadline_exceeded("test call timed out")))
}

/// plugin ← appliance (spliced; Identity and Node only for this peer) ← mTLS ← node gateway
/// (spliced, after failing over from a dead address) ← one client connection. An appliance
/// beside it whose connections start unattached (its plugin's path is gone once its shared
/// connection is up) gives the reference refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridged_calls_are_spliced_on_both_gateways_and_refusals_stay() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pki = Pki::new(d, "splice");
    let (scert, skey) = pki.issue("server", &Leaf::server(&["localhost"]));
    let (ccert, ckey) = pki.issue("client", &Leaf::client(&[CLIENT_DNS], &[]));
    let _plugin = fixed_upstream(&d.join("up.sock"));
    let rules = format!(
        "[[appliance.peers]]\ndns = [\"{CLIENT_DNS}\"]\nservices = [\"Identity\", \"Node\"]\n"
    );
    let plugin = format!("unix://{}", d.join("up.sock").display());
    let dead = RefusedPort::new();
    let (port, term_port) = (free_port(), free_port());
    let (b_metrics, a_metrics) = (free_port(), free_port());
    let b = gateway_with_metrics(
        "appliance",
        d,
        &(front_section(&d.join("b.sock"), &plugin)
            + &appliance_section(port, &scert, &skey, &pki.ca_path, &rules)),
        &format!("127.0.0.1:{b_metrics}"),
    );
    // The unattached appliance reaches the plugin through a link that is removed once its
    // shared connection is up: no accepted connection gets a plugin connection of its own.
    let link = d.join("up-link.sock");
    std::os::unix::fs::symlink(d.join("up.sock"), &link).unwrap();
    let unattached = gateway(
        "unattached",
        d,
        &(front_section(&d.join("t.sock"), &format!("unix://{}", link.display()))
            + &appliance_section(term_port, &scert, &skey, &pki.ca_path, &rules)),
    );
    b.wait_log("upstream connected");
    unattached.wait_log("upstream connected");
    std::fs::remove_file(&link).unwrap();
    let node = |name: &str, sock: &str, primary: u16, failover: u16, metrics: &str| {
        let front = front_section(&d.join(sock), &format!("tcp://127.0.0.1:{primary}"))
            + &format!("failover = [\"tcp://127.0.0.1:{failover}\"]\n");
        gateway_with_metrics(
            name,
            d,
            &(front + &upstream_tls_section(&ccert, &ckey, &pki.ca_path, "")),
            metrics,
        )
    };
    let a = node(
        "node",
        "a.sock",
        dead.port(),
        port,
        &format!("127.0.0.1:{a_metrics}"),
    );
    let a_term = node("node-t", "at.sock", term_port, term_port, "");
    a.wait_log("failing over to the next upstream");
    a.wait_log("upstream connected");
    a_term.wait_log("upstream connected");

    // One client connection: allowed calls, a refused one, and allowed ones after it.
    let conn = connect(&d.join("a.sock")).await;
    for path in ["/csi.v1.Identity/Probe", "/csi.v1.Node/NodeGetCapabilities"] {
        unary(&conn, path)
            .await
            .unwrap_or_else(|s| panic!("{path} over the spliced bridge: {s:?}"));
    }
    let denied = unary(&conn, "/csi.v1.Controller/CreateVolume")
        .await
        .expect_err("Controller is not allowed for this peer");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    assert!(
        denied.message().contains("Controller") && denied.message().contains(CLIENT_DNS),
        "{denied:?}"
    );
    b.wait_log("call refused: service not allowed for this peer");
    unary(&conn, "/csi.v1.Identity/GetPluginInfo")
        .await
        .expect("the connection serves on after a refusal");

    // The unattached appliance refuses the same call with the same reply.
    let reference = unary(
        &connect(&d.join("at.sock")).await,
        "/csi.v1.Controller/CreateVolume",
    )
    .await
    .expect_err("refused by the unattached appliance too");
    assert_eq!(
        (reference.code(), reference.message()),
        (denied.code(), denied.message())
    );

    // Both gateways spliced this client's connection, and left none unattached.
    let a_seen = support::scrape(a_metrics);
    assert!(
        connections(&a_seen, "spliced", "unix", "tls") >= 1.0,
        "{a_seen}"
    );
    assert_eq!(connections(&a_seen, "unattached", "unix", "tls"), 0.0);
    let b_seen = support::scrape(b_metrics);
    assert!(
        connections(&b_seen, "spliced", "tls", "unix") >= 1.0,
        "{b_seen}"
    );
    assert_eq!(connections(&b_seen, "unattached", "tls", "unix"), 0.0);
    // The refusal was answered on the appliance's spliced connection: its one accepted TLS
    // connection for this client is the spliced one, and the node gateway's supervisor.
    assert!(b.log().contains(&format!("\"identity\":\"{CLIENT_DNS}\"")));
}

/// The appliance stops answering under a spliced connection (SIGSTOP: the TCP connection
/// stays open): the splice's keepalive PINGs go unanswered, and the call waiting on the
/// appliance gets UNAVAILABLE saying so, instead of hanging until TCP gives up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_appliance_fails_the_calls_of_a_spliced_connection() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bridge = keepalive_bridge(d, "silent", CLIENT_DNS);
    let (a, b, port) = (
        &bridge.node,
        &bridge.appliance.gateway,
        bridge.appliance.port,
    );
    // A client that connects and waits before its preface: the splice's PINGs wait for the
    // HTTP/2 preface and SETTINGS they may only follow.
    let quiet = tokio::net::UnixStream::connect(d.join("a.sock"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    h2_probe(quiet).await.expect("a Probe after a quiet start");

    let conn = connect(&d.join("a.sock")).await;
    unary(&conn, "/csi.v1.Identity/Probe")
        .await
        .expect("Probe before the appliance stops");
    // Calls on the spliced connection keep the keepalive answered while all is well.
    tokio::time::sleep(Duration::from_millis(700)).await;
    unary(&conn, "/csi.v1.Identity/Probe")
        .await
        .expect("Probe after several keepalive rounds");

    b.signal("STOP");
    let began = Instant::now();
    let lost = unary(&conn, "/csi.v1.Identity/Probe")
        .await
        .expect_err("the appliance is stopped");
    a.wait_log("upstream connection lost under a spliced client connection");
    // The supervisor's own connection notices too (its PINGs, the same log line), and
    // reconnects once the appliance is back.
    a.wait_log_n("upstream peer unresponsive; dropping the connection", 2);
    b.signal("CONT");
    assert_eq!(lost.code(), Code::Unavailable, "{lost:?}");
    assert!(
        lost.message()
            .contains("no keepalive ping reply within 300ms")
            && lost.message().contains(&format!("tcp://127.0.0.1:{port}")),
        "{lost:?}"
    );
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "took {:?}",
        began.elapsed()
    );
    // A new connection is served again once the appliance is back.
    a.wait_log_n("upstream connected", 2);
    unary(&connect(&d.join("a.sock")).await, "/csi.v1.Identity/Probe")
        .await
        .expect("Probe on a new connection after the appliance is back");
}
