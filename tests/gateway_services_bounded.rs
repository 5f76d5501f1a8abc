//! The gateway's own services under load a buggy or hostile local client can make, through the
//! built gateway: health Checks and Watches by the hundred share one Probe per interval at the
//! plugin (counted by a tap in front of it); reflection streams that ask for large descriptors
//! and never read their replies hold about one reply each (the gateway's resident memory);
//! an oversized reflection request ends RESOURCE_EXHAUSTED and an unknown symbol's NOT_FOUND
//! does not echo the whole name. Every test runs on a spliced connection (the default) and a
//! unattached one (no upstream connection of its own; its calls answered on the gateway's shared one), as `spliced::NAME` and `unattached::NAME`.

use csi_gateway_test_support as support;

use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use prost::Message;
use support::gateway::Gateway;
use support::h2raw::{
    frame, message, request_block, Frame, Hostile, Peer, Tap, ACK, DATA, END_HEADERS, HEADERS,
    SETTINGS, WINDOW_UPDATE,
};
use support::{Backend, Options};
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient as ReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::ServerReflectionRequest;

use support::gateway::FrontPath as Path;

/// For each `async fn NAME(path: Path)`, `spliced::NAME` and `unattached::NAME`.
macro_rules! on_every_path {
    ($($body:ident),* $(,)?) => {
        mod spliced {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $body() {
                super::$body(super::Path::Spliced).await
            })*
        }
        mod unattached {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $body() {
                super::$body(super::Path::Unattached).await
            })*
        }
    };
}

on_every_path!(
    health_shares_one_probe_per_interval,
    reflection_replies_wait_for_the_reader,
    reflection_requests_are_bounded,
);

const REFLECTION: &str = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
/// A symbol whose file (the v1 spec, `csi.proto`) is the largest descriptor the gateway holds.
const LARGE: &str = "csi.v1.Controller";
const WAIT: Duration = Duration::from_secs(20);

/// A tonic channel on the gateway's socket with no deadline of its own.
async fn channel(gateway: &Gateway) -> Channel {
    let path = gateway.socket.clone();
    Endpoint::from_static("http://localhost")
        .connect_timeout(support::PROCESS_TIMEOUT)
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
        }))
        .await
        .expect("connect to the gateway")
}

fn serving(status: i32) -> ServingStatus {
    ServingStatus::try_from(status).unwrap()
}

/// 100 Watches held open and rounds of 200 concurrent Checks for 5 s, on 4 connections: the
/// plugin sees about one Probe per 2 s interval (each Check and each Watch used to send its
/// own: hundreds), and every Check and Watch still says SERVING.
async fn health_shares_one_probe_per_interval(path: Path) {
    const WATCHES: usize = 100;
    const CHECKS: usize = 200;
    const RUN: Duration = Duration::from_secs(5);
    let backend = Backend::start(Options::new("v1")).await;
    let tap = Tap::start(&backend.socket, Hostile::Quiet).await;
    let gateway = path.start(&tap.socket, "v0.1", &[]).await;
    let mut channels = Vec::new();
    for _ in 0..4 {
        channels.push(channel(&gateway).await);
    }
    // What the gateway asked the plugin at start-up (detection): not Probes.
    let before = tap.requests();
    let began = Instant::now();

    let mut watches = Vec::new();
    for i in 0..WATCHES {
        let mut health = HealthClient::new(channels[i % channels.len()].clone());
        let mut stream = health
            .watch(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        let first = tokio::time::timeout(WAIT, stream.message()).await;
        let first = first.unwrap().unwrap().expect("a first status");
        assert_eq!(serving(first.status), ServingStatus::Serving, "watch {i}");
        watches.push(stream); // held open to the end
    }
    let (mut checks, mut not_serving) = (0, 0);
    while began.elapsed() < RUN {
        let round: Vec<_> = (0..CHECKS)
            .map(|i| {
                let mut health = HealthClient::new(channels[i % channels.len()].clone());
                tokio::spawn(async move {
                    let request = HealthCheckRequest {
                        service: "csi.v1.Node".into(),
                    };
                    health.check(request).await.map(|r| r.into_inner().status)
                })
            })
            .collect();
        for check in round {
            let status = check.await.unwrap().expect("a Check");
            not_serving += usize::from(serving(status) != ServingStatus::Serving);
            checks += 1;
        }
    }
    let seconds = began.elapsed().as_secs_f64();
    let probes = tap.requests() - before;
    eprintln!(
        "{path:?}: {checks} Checks ({not_serving} not SERVING) and {WATCHES} Watches in \
         {seconds:.1} s: {probes} Probes at the plugin"
    );
    assert!(checks >= CHECKS, "{checks}");
    assert_eq!(not_serving, 0, "Checks answered other than SERVING");
    // One per 2 s interval, and a few more for the intervals' edges.
    let bound = 5 + (seconds / 2.0).ceil() as usize;
    assert!(
        probes <= bound,
        "{probes} Probes reached the plugin in {seconds:.1} s (bound {bound})"
    );
    drop(watches);
}

fn file_containing(symbol: &str) -> ServerReflectionRequest {
    ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::FileContainingSymbol(symbol.into())),
    }
}

/// The size of the reply that `request` gets, asked on a stream of its own.
async fn reply_size(gateway: &Gateway, request: ServerReflectionRequest) -> usize {
    let mut reflection = ReflectionClient::new(channel(gateway).await);
    let mut replies = reflection
        .server_reflection_info(futures_util::stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let reply = replies.message().await.unwrap().expect("a reply");
    assert!(
        matches!(
            reply.message_response,
            Some(MessageResponse::FileDescriptorResponse(_))
        ),
        "{reply:?}"
    );
    reply.encoded_len()
}

/// A connection that announces a stream window of `window` bytes and acknowledges the
/// gateway's SETTINGS, then reads nothing more until told to.
async fn slow_reader(gateway: &Gateway, window: u32) -> Peer {
    let mut peer = Peer::open(&gateway.socket, &[(0x4, window)]).await;
    peer.expect(|f| f.kind == SETTINGS && f.flags & ACK == 0)
        .await;
    peer.send(&frame(SETTINGS, ACK, 0, &[])).await;
    peer
}

/// 10 connections × 40 reflection streams, each asking for the largest descriptor (some
/// 20 KB) 20 times in one go and reading nothing (a 1 KiB stream window): replies are produced
/// only as the client reads, so the gateway holds one reply per stream (400 × 21 KB = 8 MiB),
/// not every reply asked for (400 × 20 × 21 KB = 160 MiB; it used to hold several per
/// stream). Its resident memory grows by less than that and each stream's fixed cost (about
/// 15 KiB on the splice, measured with one request per stream, which costs the same as
/// twenty): 24 MiB. Once a connection reads, its streams get every reply.
async fn reflection_replies_wait_for_the_reader(path: Path) {
    const CONNECTIONS: usize = 10;
    const STREAMS: u32 = 40;
    const ASKS: usize = 20;
    // Spliced or unattached, the streams are the splice's.
    let bound_kib: u64 = 24 * 1024;
    let backend = Backend::start(Options::new("v1")).await;
    let gateway = path.start(&backend.socket, "v0.1", &[]).await;
    let size = reply_size(&gateway, file_containing(LARGE)).await;
    assert!(size > 10_000, "{size}");
    // Warm up: what is allocated once (descriptors, runtime) is, before the baseline.
    for _ in 0..4 {
        reply_size(&gateway, file_containing(LARGE)).await;
    }
    let before = support::rss_kib(gateway.pid());

    let block = request_block(&[], REFLECTION, &[]);
    let asks: Vec<u8> = (0..ASKS)
        .flat_map(|_| message(&file_containing(LARGE).encode_to_vec()))
        .collect();
    let mut peers = Vec::new();
    for _ in 0..CONNECTIONS {
        let mut peer = slow_reader(&gateway, 1024).await;
        let mut out = Vec::new();
        for s in 0..STREAMS {
            let id = 1 + 2 * s;
            out.extend_from_slice(&frame(HEADERS, END_HEADERS, id, &block));
            out.extend_from_slice(&frame(DATA, 0, id, &asks));
        }
        peer.send(&out).await;
        peers.push(peer);
    }
    // The most the gateway holds while the streams wait: sampled until it stops growing.
    let mut peak = support::rss_kib(gateway.pid());
    let mut still = Instant::now();
    let began = Instant::now();
    while still.elapsed() < Duration::from_secs(2) && began.elapsed() < WAIT {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = support::rss_kib(gateway.pid());
        if now > peak + 256 {
            peak = now;
            still = Instant::now();
        }
    }
    let grown = peak.saturating_sub(before);
    let streams = CONNECTIONS * STREAMS as usize;
    eprintln!(
        "{path:?}: VmRSS {before} KiB -> {peak} KiB (+{grown} KiB) with {streams} reflection \
         streams asking {ASKS} times for {size} bytes and not reading"
    );

    // The replies were only waiting: a connection that reads gets all of them.
    let mut reader = peers.pop().unwrap();
    let mut out = frame(WINDOW_UPDATE, 0, 0, &(1u32 << 30).to_be_bytes());
    for s in 0..STREAMS {
        out.extend_from_slice(&frame(
            WINDOW_UPDATE,
            0,
            1 + 2 * s,
            &(1u32 << 30).to_be_bytes(),
        ));
    }
    reader.send(&out).await;
    let want = ASKS * (size + 5);
    let mut got = std::collections::HashMap::<u32, usize>::new();
    while got.len() < STREAMS as usize || got.values().any(|n| *n < want) {
        let f: Frame = reader
            .next()
            .await
            .unwrap_or_else(|| panic!("replies stopped short: {got:?} of {want} bytes each"));
        if f.kind == DATA {
            *got.entry(f.stream).or_default() += f.payload.len();
        }
    }
    assert!(got.values().all(|n| *n == want), "{got:?}: {want} each");

    assert!(
        grown < bound_kib,
        "VmRSS grew by {grown} KiB for {streams} streams (bound {bound_kib} KiB)"
    );
    drop(peers);
}

/// A request over 64 KiB (8 MiB) ends the stream RESOURCE_EXHAUSTED, not OK; an unknown symbol
/// of 60 KB gets NOT_FOUND whose message holds at most 512 bytes of it.
async fn reflection_requests_are_bounded(path: Path) {
    let backend = Backend::start(Options::new("v1")).await;
    let gateway = path.start(&backend.socket, "v0.1", &[]).await;
    let ask = |request: ServerReflectionRequest| {
        let gateway = &gateway;
        async move {
            let mut reflection = ReflectionClient::new(channel(gateway).await);
            let replies = reflection
                .server_reflection_info(futures_util::stream::iter([request]))
                .await;
            match replies {
                Err(status) => Err(status),
                Ok(replies) => {
                    let mut replies = replies.into_inner();
                    tokio::time::timeout(WAIT, replies.message())
                        .await
                        .expect("an answer")
                }
            }
        }
    };

    let huge = "x".repeat(8 << 20);
    let refused = ask(file_containing(&huge)).await;
    let status = refused.expect_err("an 8 MiB request must fail");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("65536"), "{status:?}");

    let unknown = format!("no.such.{}", "y".repeat(60_000));
    let status = ask(file_containing(&unknown))
        .await
        .expect_err("an unknown symbol");
    assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
    // 512 bytes and the `…`.
    assert!(
        status.message().len() <= 515,
        "{} bytes",
        status.message().len()
    );
    assert!(status.message().contains("no.such.yyy"), "{status:?}");
    assert!(status.message().contains('…'), "{status:?}");

    // A small unknown symbol is named whole, and the stream's requests still answer.
    let status = ask(file_containing("no.such.Symbol"))
        .await
        .expect_err("an unknown symbol");
    assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
    assert!(status.message().contains("no.such.Symbol"), "{status:?}");
    assert!(!status.message().contains('…'), "{status:?}");
    assert!(reply_size(&gateway, file_containing(LARGE)).await > 10_000);
}
