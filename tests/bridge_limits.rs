//! The appliance listener's connection slots (`appliance.max_connections`), with real mutual
//! TLS against the built binary, on spliced and on unattached connections: peers that connect and stay silent —
//! on TCP, or after their TLS handshake — cannot lock a well-behaved peer out (the oldest of
//! them gives way to a newcomer), a peer that completed a call keeps its slot, and only with
//! every slot held by such a peer is a newcomer refused with GOAWAY ENHANCE_YOUR_CALM.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use csi_gateway::grpc::frame;
use csi_gateway::tls::gencerts::{Issued, Leaf};
use csi_gateway_test_support::bridge::*;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::TcpStream;

const SLOTS: usize = 8;
/// Silent connections of each kind (TCP, TLS): together twice the slots.
const SILENT: usize = SLOTS;

/// The fixed-reply plugin behind an appliance listening with `max_connections = SLOTS` (and a
/// handshake timeout far longer than the test, so that only the slots close anything). With
/// `spliced = false` the appliance reaches the plugin through a link removed once its shared
/// connection is up, so every accepted connection is unattached.
fn appliance_with_slots(dir: &Path, spliced: bool) -> Appliance {
    let pki = Pki::new(dir, "slots");
    let (cert, key) = pki.issue("server", &Leaf::server(&["localhost"]));
    let plugin = fixed_upstream(&dir.join("up.sock"));
    let port = free_port();
    let link = dir.join("up-link.sock");
    std::os::unix::fs::symlink(dir.join("up.sock"), &link).unwrap();
    let front = front_section(
        &dir.join("front.sock"),
        &format!("unix://{}", link.display()),
    );
    let appliance = format!(
        "[appliance]\nlisten = \"tcp://127.0.0.1:{port}\"\ncert = {cert:?}\nkey = {key:?}\nclient_ca = {:?}\nhandshake_timeout = \"60s\"\nmax_connections = {SLOTS}\n",
        pki.ca_path
    );
    let gateway = gateway("appliance", dir, &(front + &appliance));
    gateway.wait_log("appliance listening");
    gateway.wait_log("upstream connected");
    if !spliced {
        std::fs::remove_file(&link).unwrap();
    }
    Appliance {
        gateway,
        plugin,
        pki,
        port,
    }
}

/// An HTTP/2 connection over mutual TLS to the appliance, kept open between calls.
struct Peer {
    send: h2::client::SendRequest<Bytes>,
    _driver: tokio::task::JoinHandle<()>,
}

impl Peer {
    async fn connect(port: u16, config: rustls::ClientConfig) -> Result<Peer, h2::Error> {
        let tls = tls(port, config).await.expect("TLS handshake");
        let (send, conn) = h2::client::handshake(tls).await?;
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Peer {
            send,
            _driver: driver,
        })
    }

    /// One v1 Probe: its grpc-status, or the HTTP/2 error that ended it.
    async fn probe(&mut self) -> Result<String, h2::Error> {
        let mut request =
            csi_gateway::upstream::conn::grpc_request("/csi.v1.Identity/Probe").unwrap();
        *request.uri_mut() = "http://localhost/csi.v1.Identity/Probe".parse().unwrap();
        let mut send = self.send.clone().ready().await?;
        let (response, mut stream) = send.send_request(request, false)?;
        stream.send_data(frame::encode(&[]), true)?;
        let mut body = response.await?.into_body();
        while let Some(chunk) = body.data().await {
            let chunk = chunk?;
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        let trailers = body.trailers().await?;
        Ok(trailers
            .and_then(|t| Some(t.get("grpc-status")?.to_str().ok()?.to_owned()))
            .unwrap_or_default())
    }
}

async fn tls(
    port: u16,
    config: rustls::ClientConfig,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

/// Whether the appliance closed `io`: read (and dropped) until its end, or nothing came for
/// `wait`.
async fn closed_within<T: AsyncRead + AsyncWrite + Unpin>(io: &mut T, wait: Duration) -> bool {
    let mut sink = [0u8; 4096];
    loop {
        match tokio::time::timeout(wait, io.read(&mut sink)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}

fn identity(appliance: &Appliance) -> Issued {
    appliance
        .pki
        .ca
        .issue(&Leaf::client(&["node-1.csi-gateway.test"], &[]))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_peers_give_way_to_a_well_behaved_one() {
    for spliced in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let appliance = appliance_with_slots(dir.path(), spliced);
        let good = identity(&appliance);
        let config = || client_config(&appliance.pki.ca.cert_pem, Some(&good));
        let port = appliance.port;

        // A peer that completed a call holds a slot through the flood.
        let mut kept = Peer::connect(port, config()).await.unwrap();
        assert_eq!(
            kept.probe().await.unwrap(),
            "0",
            "spliced={spliced}: first call"
        );

        // Silent on TCP, then silent after TLS: 2 × SLOTS for SLOTS - 1 slots.
        let mut silent_tcp = Vec::new();
        for _ in 0..SILENT {
            silent_tcp.push(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
        }
        let mut silent_tls = Vec::new();
        for _ in 0..SILENT {
            // A connection closed for a later one may be closed during its handshake.
            if let Ok(tls) = tls(port, config()).await {
                silent_tls.push(tls);
            }
        }

        // A newcomer is served, and so is the peer that kept its slot.
        let mut newcomer = Peer::connect(port, config()).await.unwrap();
        let status = newcomer.probe().await;
        assert_eq!(
            status.as_deref().ok(),
            Some("0"),
            "spliced={spliced}: the newcomer: {status:?}\n{}",
            appliance.gateway.log()
        );
        let status = kept.probe().await;
        assert_eq!(
            status.as_deref().ok(),
            Some("0"),
            "spliced={spliced}: the peer with a finished call: {status:?}"
        );

        let wait = Duration::from_millis(500);
        let mut closed_tcp = 0;
        for io in &mut silent_tcp {
            closed_tcp += closed_within(io, wait).await as usize;
        }
        let mut closed_tls = SILENT - silent_tls.len();
        for io in &mut silent_tls {
            closed_tls += closed_within(io, wait).await as usize;
        }
        println!(
            "spliced={spliced}: {SLOTS} slots, 1 peer with a call, {SILENT} silent TCP + {SILENT} silent TLS peers, then a newcomer: {closed_tcp} TCP and {closed_tls} TLS silent connections closed; newcomer and kept peer served"
        );
        // Every silent connection but those that fit beside the two served peers.
        assert_eq!(
            closed_tcp + closed_tls,
            2 * SILENT - (SLOTS - 2),
            "spliced={spliced}: {closed_tcp} TCP + {closed_tls} TLS closed"
        );
        assert_eq!(closed_tcp, SILENT, "the oldest (TCP) went first");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_slot_held_by_a_peer_with_a_call_refuses_the_newcomer() {
    for spliced in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let appliance = appliance_with_slots(dir.path(), spliced);
        let good = identity(&appliance);
        let config = || client_config(&appliance.pki.ca.cert_pem, Some(&good));
        let mut peers = Vec::new();
        for _ in 0..SLOTS {
            let mut peer = Peer::connect(appliance.port, config()).await.unwrap();
            assert_eq!(peer.probe().await.unwrap(), "0");
            peers.push(peer);
        }
        let refused = match Peer::connect(appliance.port, config()).await {
            Ok(mut newcomer) => newcomer.probe().await,
            Err(e) => Err(e),
        };
        let reason = refused.as_ref().err().and_then(h2::Error::reason);
        println!("spliced={spliced}: {SLOTS} peers with a call each, then a newcomer: {refused:?}");
        assert_eq!(
            reason,
            Some(h2::Reason::ENHANCE_YOUR_CALM),
            "spliced={spliced}: {refused:?}"
        );
        appliance
            .gateway
            .wait_log("too many appliance connections, each with a request finished");
        for peer in &mut peers {
            assert_eq!(peer.probe().await.unwrap(), "0", "served on");
        }
    }
}
