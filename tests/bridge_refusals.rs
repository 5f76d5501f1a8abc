//! The appliance listener refuses, with a log line that says why: no client certificate, a
//! certificate from another CA, an expired certificate, a SAN not on the allow-list, and a
//! plaintext HTTP/2 client on the TLS port. A good certificate on the same listener works.
//! The clients here are hand-built rustls configurations, so each presents exactly one fault.

use csi_gateway_test_support::bridge as bridge_support;

use bridge_support::*;
use csi_gateway::tls::gencerts::{DevCa, Leaf};

const ALLOWED: &str = "node-1.csi-gateway.test";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_appliance_refuses_every_peer_it_should_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rules = format!("[[appliance.peers]]\ndns = [\"{ALLOWED}\"]\n");
    // The control below needs the plugin: `appliance` waits until the appliance reached it.
    let appliance = appliance(d, "trusted", "b.sock", &rules);
    let (b, pki, port) = (&appliance.gateway, &appliance.pki, appliance.port);
    let roots = &pki.ca.cert_pem;

    // The control: an allowed certificate from the trusted CA gets through.
    let good = pki.ca.issue(&Leaf::client(&[ALLOWED], &[])).unwrap();
    tls_probe(port, client_config(roots, Some(&good)))
        .await
        .expect("a good client certificate");

    let other_ca = DevCa::new("some other CA").unwrap();
    let foreign = other_ca.issue(&Leaf::client(&[ALLOWED], &[])).unwrap();
    let mut expired = Leaf::client(&[ALLOWED], &[]);
    expired.not_before = time::Duration::days(-30);
    expired.not_after = time::Duration::days(-1);
    let expired = pki.ca.issue(&expired).unwrap();
    let stranger = pki
        .ca
        .issue(&Leaf::client(&["intruder.example"], &[]))
        .unwrap();

    let cases = [
        (
            "no client certificate",
            client_config(roots, None),
            "the client presented no certificate",
        ),
        (
            "another CA",
            client_config(roots, Some(&foreign)),
            "not signed by a trusted CA",
        ),
        (
            "expired",
            client_config(roots, Some(&expired)),
            "the client certificate has expired",
        ),
        (
            "SAN not allowed",
            client_config(roots, Some(&stranger)),
            "matches no [[appliance.peers]] rule",
        ),
    ];
    for (what, config, reason) in cases {
        let before = b.count(reason);
        let outcome = tls_probe(port, config).await;
        assert!(outcome.is_err(), "{what}: the call went through");
        b.wait_log_n(reason, before + 1);
        assert!(b.log().contains("refused bridge connection"), "{what}");
    }

    // Plaintext HTTP/2 (gRPC without TLS) on the TLS port.
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    assert!(h2_probe(tcp).await.is_err(), "plaintext went through");
    b.wait_log("not a TLS client (plaintext on the TLS port?)");

    // No refused connection reached the plugin: only the good one's probe was relayed.
    assert_eq!(b.count("bridge peer connected"), 1, "{}", b.log());
}
