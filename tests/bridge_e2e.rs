//! The bridge end to end, with real TLS on loopback and the built binary: a gateway on a UNIX
//! socket dials a second gateway over mutual TLS, which forwards to a plugin on its own UNIX
//! socket; a gateway dials an mTLS v1 server directly; and a dead upstream fails over to the
//! next one listed.

use csi_gateway_test_support::bridge as bridge_support;

use std::sync::{Arc, Mutex};

use bridge_support::*;
use bytes::Bytes;
use csi_gateway::dialect::proto::v1::GetPluginInfoResponse;
use csi_gateway::grpc::{frame, status, Code, CONTENT_TYPE};
use csi_gateway::tls::authz::Peer;
use csi_gateway::tls::gencerts::Leaf;
use prost::Message as _;
use rustls_pki_types::pem::PemObject;

const CLIENT_DNS: &str = "node-1.csi-gateway.test";

/// plugin ← B (appliance: Identity and Node only for this client) ← mTLS ← A ← test client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_bridge_a_plugin_over_mutual_tls() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pki = Pki::new(d, "bridge");
    let (scert, skey) = pki.issue("server", &Leaf::server(&["localhost"]));
    let (ccert, ckey) = pki.issue("client", &Leaf::client(&[CLIENT_DNS], &[]));
    let _plugin = fixed_upstream(&d.join("up.sock"));
    let port = free_port();
    let rules = format!(
        "[[appliance.peers]]\ndns = [\"{CLIENT_DNS}\"]\nservices = [\"Identity\", \"Node\"]\n"
    );
    let b = gateway(
        "appliance",
        d,
        &(front_section(
            &d.join("b.sock"),
            &format!("unix://{}", d.join("up.sock").display()),
        ) + &appliance_section(port, &scert, &skey, &pki.ca_path, &rules)),
    );
    b.wait_log("appliance listening");
    let a = gateway(
        "node",
        d,
        &(front_section(&d.join("a.sock"), &format!("tcp://127.0.0.1:{port}"))
            + &upstream_tls_section(&ccert, &ckey, &pki.ca_path, "")),
    );
    a.wait_log("upstream connected");

    let a_sock = d.join("a.sock");
    for path in ["/csi.v1.Identity/Probe", "/csi.v1.Node/NodeGetCapabilities"] {
        call(&a_sock, path)
            .await
            .unwrap_or_else(|s| panic!("{path} over the bridge: {s:?}"));
    }
    let denied = call(&a_sock, "/csi.v1.Controller/CreateVolume")
        .await
        .expect_err("Controller is not allowed for this peer");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    assert!(
        denied.message().contains("Controller") && denied.message().contains(CLIENT_DNS),
        "{denied:?}"
    );
    assert!(b.log().contains(&format!("\"identity\":\"{CLIENT_DNS}\"")));
    b.wait_log("call refused: service not allowed for this peer");
    // The appliance's own UNIX socket is not subject to the peers' allow-list.
    call(&d.join("b.sock"), "/csi.v1.Controller/CreateVolume")
        .await
        .expect("the UNIX-socket front is unaffected");
}

/// A gateway dials an mTLS v1 server (not a gateway) directly, presenting its certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_dials_an_mtls_v1_server_directly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pki = Pki::new(d, "direct");
    let (scert, skey) = pki.issue("server", &Leaf::server(&["localhost"]));
    let (ccert, ckey) = pki.issue(
        "client",
        &Leaf::client(&[CLIENT_DNS], &["spiffe://test/node-1"]),
    );
    let seen = Arc::new(Mutex::new(Vec::<Peer>::new()));
    let port = mtls_v1_server(&scert, &skey, &pki.ca_path, seen.clone()).await;
    let a = gateway(
        "node",
        d,
        &(front_section(&d.join("a.sock"), &format!("tcp://127.0.0.1:{port}"))
            + &upstream_tls_section(&ccert, &ckey, &pki.ca_path, "min_version = \"1.2\"")),
    );
    a.wait_log("upstream connected");
    let reply = call(&d.join("a.sock"), "/csi.v1.Identity/GetPluginInfo")
        .await
        .expect("GetPluginInfo through the gateway");
    let info = GetPluginInfoResponse::decode(reply).unwrap();
    assert_eq!(info.name, "mtls.test.plugin");
    let peers = seen.lock().unwrap().clone();
    assert!(!peers.is_empty());
    assert!(peers
        .iter()
        .all(|p| p.dns == [CLIENT_DNS] && p.uris == ["spiffe://test/node-1"]));
}

/// The first listed upstream is down: the gateway fails over to the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_upstream_fails_over_to_the_next_listed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let appliance = appliance(d, "failover", "b.sock", "");
    let (pki, port) = (&appliance.pki, appliance.port);
    let (ccert, ckey) = pki.issue("client", &Leaf::client(&[CLIENT_DNS], &[]));
    let dead = RefusedPort::new();
    let front = front_section(
        &d.join("a.sock"),
        &format!("tcp://127.0.0.1:{}", dead.port()),
    ) + &format!("failover = [\"tcp://127.0.0.1:{port}\"]\n");
    let a = gateway(
        "node",
        d,
        &(front + &upstream_tls_section(&ccert, &ckey, &pki.ca_path, "")),
    );
    a.wait_log("failing over to the next upstream");
    a.wait_log("upstream connected");
    assert!(a
        .log()
        .contains(&format!("\"upstream\":\"tcp://127.0.0.1:{port}\"")));
    call(&d.join("a.sock"), "/csi.v1.Identity/Probe")
        .await
        .expect("Probe through the failover upstream");
}

/// The appliance stops answering (SIGSTOP: the TCP connection stays open, nothing replies):
/// the node gateway's HTTP/2 keepalive notices, drops the connection and reconnects once the
/// appliance is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_detects_a_silent_peer() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bridge = keepalive_bridge(d, "keepalive", CLIENT_DNS);
    let (a, b) = (&bridge.node, &bridge.appliance.gateway);
    b.signal("STOP");
    a.wait_log("upstream peer unresponsive; dropping the connection");
    b.signal("CONT");
    a.wait_log_n("upstream connected", 2);
    call(&d.join("a.sock"), "/csi.v1.Identity/Probe")
        .await
        .expect("Probe after the reconnect");
}

/// Certificates that cannot be loaded stop the gateway before it binds, naming the file; a
/// plaintext TCP upstream is refused as a configuration error (exit 64).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_tls_settings_stop_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pki = Pki::new(d, "start");
    let missing = d.join("missing.pem");
    let (ccert, ckey) = pki.issue("client", &Leaf::client(&[CLIENT_DNS], &[]));
    let mut a = gateway(
        "node",
        d,
        &(front_section(&d.join("a.sock"), "tcp://127.0.0.1:1")
            + &upstream_tls_section(&missing, &ckey, &pki.ca_path, "")),
    );
    assert_eq!(
        a.wait_exit().code(),
        Some(64),
        "unusable TLS files are a configuration error"
    );
    a.wait_log(&format!("cannot read {}", missing.display()));
    assert!(!d.join("a.sock").exists(), "nothing was bound");

    // A certificate that does not match its key.
    let (_, other_key) = pki.issue("other", &Leaf::client(&[CLIENT_DNS], &[]));
    let mut a = gateway(
        "mismatch",
        d,
        &(front_section(&d.join("a.sock"), "tcp://127.0.0.1:1")
            + &upstream_tls_section(&ccert, &other_key, &pki.ca_path, "")),
    );
    assert_eq!(a.wait_exit().code(), Some(64));
    a.wait_log(&format!(
        "the private key in {} does not match this certificate",
        other_key.display()
    ));

    let mut plain = gateway(
        "plaintext",
        d,
        &front_section(&d.join("a.sock"), "tcp://127.0.0.1:1"),
    );
    assert_eq!(plain.wait_exit().code(), Some(64));
    plain.wait_log("requires [upstream.tls]");
}

/// A v1 server on loopback that requires a client certificate from `ca`, records each peer,
/// and answers every call with a GetPluginInfoResponse. Returns its port.
async fn mtls_v1_server(
    cert: &std::path::Path,
    key: &std::path::Path,
    ca: &std::path::Path,
    seen: Arc<Mutex<Vec<Peer>>>,
) -> u16 {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let chain = rustls_pki_types::CertificateDer::pem_file_iter(cert)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = rustls_pki_types::PrivateKeyDer::from_pem_file(key).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, seen) = (acceptor.clone(), seen.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let cert = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
                seen.lock().unwrap().push(Peer::from_cert(&cert).unwrap());
                let Ok(mut conn) = h2::server::handshake(tls).await else {
                    return;
                };
                while let Some(Ok((request, respond))) = conn.accept().await {
                    tokio::spawn(answer(request, respond));
                }
            });
        }
    });
    port
}

async fn answer(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
) {
    let mut body = request.into_body();
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let reply = GetPluginInfoResponse {
        name: "mtls.test.plugin".into(),
        vendor_version: "1.0.0".into(),
        ..Default::default()
    };
    let mut head = http::Response::new(());
    head.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(CONTENT_TYPE),
    );
    let mut stream = respond.send_response(head, false).unwrap();
    let _ = stream.send_data(frame::encode(&reply.encode_to_vec()), false);
    let _ = stream.send_trailers(status::ok_trailers());
}
