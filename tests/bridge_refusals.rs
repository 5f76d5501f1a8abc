//! The appliance listener refuses, with a log line that says why: no client certificate, a
//! certificate from another CA, an expired certificate, a SAN not on the allow-list, and a
//! plaintext HTTP/2 client on the TLS port. A good certificate on the same listener works.
//! The clients here are hand-built rustls configurations, so each presents exactly one fault.

mod bridge_support;

use std::sync::Arc;
use std::time::Duration;

use bridge_support::*;
use bytes::Bytes;
use csi_gateway::grpc::frame;
use csi_gateway::tls::gencerts::{DevCa, Leaf};
use rustls::ClientConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite};

const ALLOWED: &str = "node-1.csi-gateway.test";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_appliance_refuses_every_peer_it_should_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pki = Pki::new(d, "trusted");
    let (scert, skey) = pki.issue("server", &Leaf::server(&["localhost"]));
    let _plugin = fixed_upstream(&d.join("up.sock"));
    let port = free_port();
    let rules = format!("[[appliance.peers]]\ndns = [\"{ALLOWED}\"]\n");
    let b = gateway(
        "appliance",
        d,
        &(front_section(
            &d.join("b.sock"),
            &format!("unix://{}", d.join("up.sock").display()),
        ) + &appliance_section(port, &scert, &skey, &pki.ca_path, &rules)),
    );
    b.wait_log("appliance listening");
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

/// A client configuration trusting `roots`, presenting `identity` if any.
fn client_config(
    roots: &str,
    identity: Option<&csi_gateway::tls::gencerts::Issued>,
) -> ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut store = rustls::RootCertStore::empty();
    store
        .add(CertificateDer::from_pem_slice(roots.as_bytes()).unwrap())
        .unwrap();
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store);
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some(i) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(i.cert_pem.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(i.key_pem.as_bytes()).unwrap(),
            )
            .unwrap(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    config
}

/// TLS to the appliance, then one v1 Probe; any failure on the way is the error.
async fn tls_probe(port: u16, config: ClientConfig) -> Result<(), String> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    h2_probe(tls).await
}

/// `/csi.v1.Identity/Probe` over HTTP/2 on `io`, bounded in time; Ok only on grpc-status 0.
async fn h2_probe<T>(io: T) -> Result<(), String>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let probe = async {
        let (send, conn) = h2::client::handshake(io).await.map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let mut request = csi_gateway::upstream::conn::grpc_request("/csi.v1.Identity/Probe")
            .map_err(|s| s.to_string())?;
        *request.uri_mut() = "http://localhost/csi.v1.Identity/Probe".parse().unwrap();
        let mut send = send.ready().await.map_err(|e| e.to_string())?;
        let (response, mut stream) = send
            .send_request(request, false)
            .map_err(|e| e.to_string())?;
        stream
            .send_data(frame::encode(&[]), true)
            .map_err(|e| e.to_string())?;
        let mut body = response.await.map_err(|e| e.to_string())?.into_body();
        while let Some(chunk) = body.data().await {
            let chunk: Bytes = chunk.map_err(|e| e.to_string())?;
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        let trailers = body.trailers().await.map_err(|e| e.to_string())?;
        match trailers.as_ref().and_then(|t| t.get("grpc-status")) {
            Some(v) if v == "0" => Ok(()),
            other => Err(format!("grpc-status {other:?}")),
        }
    };
    tokio::time::timeout(Duration::from_secs(10), probe)
        .await
        .unwrap_or_else(|_| Err("timed out".into()))
}
