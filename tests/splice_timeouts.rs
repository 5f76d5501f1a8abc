//! The spliced path's bounds on the plugin (`src/splice/conn/`), from outside: a call whose
//! `grpc-timeout` passes before the plugin's reply ended gets DEADLINE_EXCEEDED from the gateway
//! and its stream is reset on the plugin, the plugin's late frames never reaching the client;
//! a splice's own connection to the plugin that brings no SETTINGS (a stopped plugin) or
//! something that is not HTTP/2 is given up, and the client gets the gateway's SETTINGS and
//! answers instead of silence. The plugin is the reference backend, behind a tap
//! (`h2raw::Tap`) that plays the broken peer on the splice's connections, or stopped with
//! SIGSTOP; the client writes raw frames (`h2raw::Peer`) and times what it gets.

use csi_gateway_test_support as support;

use std::time::{Duration, Instant};

use prost::Message;
use support::gateway::Gateway;
use support::h2raw::*;
use support::{Backend, Options};

const PROBE: &str = "/csi.v1.Identity/Probe";
const DEADLINE_EXCEEDED: &str = "4";

/// A configuration file setting `upstream.connect_timeout`; the flags give the rest.
fn config(dir: &std::path::Path, connect_timeout: &str) -> String {
    let path = dir.join("gateway.toml");
    let text = format!(
        "[listen]\nendpoint = \"unix:///unused\"\n[upstream]\nendpoint = \"unix:///unused-plugin\"\n\
         connect_timeout = \"{connect_timeout}\"\n[state]\ndir = \"/unused\"\n"
    );
    std::fs::write(&path, text).unwrap();
    format!("--config={}", path.display())
}

/// A v1 Probe with `grpc-timeout` 1S.
fn probe_within_1s() -> Vec<u8> {
    request_block(&[], PROBE, &[("grpc-timeout", "1S")])
}

/// The reply is the gateway's DEADLINE_EXCEEDED for a 1 s deadline, naming the plugin.
fn assert_deadline_exceeded(reply: &Reply, what: &str) {
    assert_eq!(
        reply.get("grpc-status"),
        Some(DEADLINE_EXCEEDED),
        "{what}: {reply:?}"
    );
    let message = percent_decoded(reply.get("grpc-message").unwrap_or_default());
    assert!(
        message.starts_with("deadline of 1s exceeded waiting for upstream unix://"),
        "{what}: {message:?}"
    );
}

/// A `grpc-message` as its sender wrote it (the gRPC spec's percent-encoding undone).
fn percent_decoded(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        let hex = (b == b'%')
            .then(|| bytes.clone().take(2).collect::<Vec<u8>>())
            .and_then(|h| u8::from_str_radix(std::str::from_utf8(&h).ok()?, 16).ok());
        match hex {
            Some(v) => {
                out.push(v);
                bytes.nth(1);
            }
            None => out.push(b),
        }
    }
    String::from_utf8(out).unwrap()
}

/// The gateway reset `stream` on one of its own connections to the plugin (not its first,
/// the supervisor's) with CANCEL, as the tap saw.
async fn reset_on_the_plugin(tap: &Tap, stream: u32) {
    let cancelled = || {
        tap.frames().iter().any(|(conn, f)| {
            *conn > 0 && f.kind == RST_STREAM && f.stream == stream && f.code() == CANCEL
        })
    };
    support::eventually(Duration::from_secs(5), "RST_STREAM CANCEL", cancelled).await;
}

/// The server's first SETTINGS, and how long after `since` it came.
async fn first_settings(peer: &mut Peer, since: Instant) -> Duration {
    peer.expect(|f| f.kind == SETTINGS && f.flags & ACK == 0)
        .await;
    since.elapsed()
}

/// A relayed call whose plugin answers after the call's deadline: the client gets
/// DEADLINE_EXCEEDED at its deadline, trailers-only, and nothing more on that stream; the
/// plugin's stream is reset (CANCEL); and a second call on the same connection gets the
/// plugin's answer, which comes after the late one the gateway dropped — its header block
/// decodable (the dropped block changed the plugin's HPACK table, not the client's).
#[tokio::test]
async fn a_relayed_call_past_its_deadline_is_answered_and_reset_on_the_plugin() {
    let backend = Backend::start(Options::new("v1")).await;
    let tap = Tap::start(&backend.socket, Hostile::LateReplies).await;
    let gw = Gateway::start(&tap.socket, "v0.1", &[]).await;
    let mut peer = Peer::connect(&gw.socket).await;
    let sent = Instant::now();
    peer.call(1, &probe_within_1s(), &[]).await;
    let first = peer.reply(1).await;
    let took = sent.elapsed();
    eprintln!(
        "DEADLINE_EXCEEDED after {took:?} (grpc-timeout 1S, the plugin answering {LATE:?} late)"
    );
    assert_deadline_exceeded(&first, "the late call");
    assert!(
        took >= Duration::from_millis(950) && took < LATE,
        "answered after {took:?}: {first:?}"
    );
    assert_eq!(first.reset, None, "ended by its trailers: {first:?}");
    reset_on_the_plugin(&tap, 1).await;

    peer.call(3, &request_block(&[], PROBE, &[]), &[]).await;
    let second = peer.reply(3).await;
    assert_eq!(second.get("grpc-status"), Some("0"), "{second:?}");
    assert_eq!(
        second.get("content-type"),
        Some("application/grpc"),
        "{second:?}"
    );
    assert!(
        sent.elapsed() >= LATE,
        "the second reply came behind the late one"
    );
    let on_first: Vec<&Frame> = peer.seen.iter().filter(|f| f.stream == 1).collect();
    assert_eq!(
        on_first.len(),
        1,
        "one trailers-only HEADERS, none of the plugin's late frames: {on_first:?}"
    );
    assert!(
        gw.log_text()
            .contains("call past its deadline; answered by the gateway"),
        "{}",
        gw.log_text()
    );
    // Logged as the gateway's failure, as on an unattached connection.
    let logged = |l: &str| l.contains("Probe") && l.contains("origin=\"gateway\"");
    assert!(gw.log_text().lines().any(logged), "{}", gw.log_text());
}

/// A draft (`v0.1-oneof`) client's relayed call past its deadline gets what a draft client
/// gets for every failure of the gateway's, on every path: an OK reply carrying a retryable
/// `GeneralError` that names the plugin, sent by the splice itself; the plugin's late reply,
/// dropped, does not reach it, and the next call gets the plugin's.
#[tokio::test]
async fn a_draft_call_past_its_deadline_is_the_draft_error() {
    use csi_gateway::dialect::proto::v0_1_oneof as draft;
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let tap = Tap::start(&backend.socket, Hostile::LateReplies).await;
    let gw = Gateway::start(&tap.socket, "v0.1-oneof", &[]).await;
    let mut peer = Peer::connect(&gw.socket).await;
    let request = draft::GetPluginInfoRequest {
        version: Some(draft::Version {
            major: 0,
            minor: 1,
            patch: 0,
        }),
    }
    .encode_to_vec();
    let path = "/csi.Identity/GetPluginInfo";
    let sent = Instant::now();
    peer.call(
        1,
        &request_block(&[], path, &[("grpc-timeout", "1S")]),
        &request,
    )
    .await;
    let reply = peer.reply(1).await;
    let took = sent.elapsed();
    assert_eq!(reply.get("grpc-status"), Some("0"), "{reply:?}");
    assert!(
        took >= Duration::from_millis(950) && took < LATE,
        "answered after {took:?}: {reply:?}"
    );
    let message = draft::GetPluginInfoResponse::decode(&reply.data[5..]).unwrap();
    let Some(draft::get_plugin_info_response::Reply::Error(e)) = message.reply else {
        panic!("not the draft error: {message:?}");
    };
    let Some(draft::error::Value::GeneralError(g)) = e.value else {
        panic!("{e:?}");
    };
    assert!(!g.caller_must_not_retry, "{g:?}");
    assert!(
        g.error_description
            .starts_with("deadline of 1s exceeded waiting for upstream unix://"),
        "{g:?}"
    );
    reset_on_the_plugin(&tap, 1).await;
    peer.call(3, &request_block(&[], path, &[]), &request).await;
    let second = peer.reply(3).await;
    assert_eq!(second.get("grpc-status"), Some("0"), "{second:?}");
    let message = draft::GetPluginInfoResponse::decode(&second.data[5..]).unwrap();
    assert!(
        matches!(
            message.reply,
            Some(draft::get_plugin_info_response::Reply::Result(_))
        ),
        "{message:?}"
    );
    let on_first = peer.seen.iter().filter(|f| f.stream == 1).count();
    assert_eq!(on_first, 3, "HEADERS, DATA, trailers: {:?}", peer.seen);
}

/// A v1 client's ControllerUnpublishVolume to a v0.3 plugin is translated on the splice's
/// own upstream connection; past its deadline it gets the same DEADLINE_EXCEEDED as a relayed
/// call, and its stream on the plugin is reset. (Answered on the gateway's shared connection
/// instead, whose replies are not late, it would have succeeded.)
#[tokio::test]
async fn a_translated_call_past_its_deadline_is_answered_and_reset_on_the_plugin() {
    let backend = Backend::start(Options::new("v0.3")).await;
    let tap = Tap::start(&backend.socket, Hostile::LateReplies).await;
    let gw = Gateway::start(&tap.socket, "v0.1", &[]).await;
    let mut peer = Peer::connect(&gw.socket).await;
    let unpublish = csi_gateway::dialect::proto::v1::ControllerUnpublishVolumeRequest {
        volume_id: "no-such-volume".into(),
        node_id: "node-1".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let path = "/csi.v1.Controller/ControllerUnpublishVolume";
    let sent = Instant::now();
    peer.call(
        1,
        &request_block(&[], path, &[("grpc-timeout", "1S")]),
        &unpublish,
    )
    .await;
    let reply = peer.reply(1).await;
    let took = sent.elapsed();
    assert_deadline_exceeded(&reply, "the translated call");
    assert!(
        took >= Duration::from_millis(950) && took < LATE,
        "answered after {took:?}: {reply:?}"
    );
    reset_on_the_plugin(&tap, 1).await;
    peer.call(3, &request_block(&[], path, &[]), &unpublish)
        .await;
    let second = peer.reply(3).await;
    assert_eq!(second.get("grpc-status"), Some("0"), "{second:?}");
}

/// The plugin stops (SIGSTOP) under a spliced connection: a call with a 1 s deadline gets
/// DEADLINE_EXCEEDED after 1 s (not whenever the plugin wakes), its stream reset on the
/// plugin, and once the plugin runs again the same connection serves the next call.
#[tokio::test]
async fn a_stopped_plugin_under_a_spliced_connection() {
    let backend = Backend::start(Options::new("v1")).await;
    let tap = Tap::start(&backend.socket, Hostile::Quiet).await;
    let gw = Gateway::start(&tap.socket, "v0.1", &[]).await;
    let mut peer = Peer::connect(&gw.socket).await;
    peer.call(1, &request_block(&[], PROBE, &[]), &[]).await;
    assert_eq!(peer.reply(1).await.get("grpc-status"), Some("0"));

    backend.pause();
    let sent = Instant::now();
    peer.call(3, &probe_within_1s(), &[]).await;
    let reply = peer.reply(3).await;
    let took = sent.elapsed();
    eprintln!("DEADLINE_EXCEEDED after {took:?} (grpc-timeout 1S, the plugin stopped)");
    assert_deadline_exceeded(&reply, "the call to the stopped plugin");
    assert!(
        took >= Duration::from_millis(950) && took < Duration::from_secs(5),
        "answered after {took:?}"
    );
    reset_on_the_plugin(&tap, 3).await;

    backend.resume();
    peer.call(5, &request_block(&[], PROBE, &[]), &[]).await;
    let after = peer.reply(5).await;
    assert_eq!(after.get("grpc-status"), Some("0"), "{after:?}");
    let on_3 = peer.seen.iter().filter(|f| f.stream == 3).count();
    assert_eq!(on_3, 1, "nothing after the trailers: {:?}", peer.seen);
}

/// A plugin that takes the splice's connection and never answers it (a stopped plugin, as the
/// splice sees one): a client that makes no call gets the gateway's SETTINGS once
/// `upstream.connect_timeout` (3 s here) has passed, and its calls are answered by the gateway
/// on its own connection to the plugin; a client whose call has a 1 s deadline gets the
/// gateway's SETTINGS and DEADLINE_EXCEEDED at that deadline, and its next call an answer.
/// Either is asked (GOAWAY) to take its next calls to a new connection.
#[tokio::test]
async fn a_plugin_connection_without_settings_is_given_up() {
    let backend = Backend::start(Options::new("v1")).await;
    let tap = Tap::start(&backend.socket, Hostile::Silent).await;
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::start(&tap.socket, "v0.1", &[&config(dir.path(), "3s")]).await;

    let opened = Instant::now();
    let mut idle = Peer::open(&gw.socket, &[]).await;
    let took = first_settings(&mut idle, opened).await;
    eprintln!("first SETTINGS after {took:?} (connect_timeout 3s, the plugin silent)");
    assert!(
        took >= Duration::from_millis(2900) && took < Duration::from_secs(6),
        "SETTINGS after {took:?}, the bound being 3 s"
    );
    idle.send(&frame(SETTINGS, ACK, 0, &[])).await;
    idle.call(1, &request_block(&[], PROBE, &[]), &[]).await;
    let answered = idle.reply(1).await;
    assert_eq!(answered.get("grpc-status"), Some("0"), "{answered:?}");
    assert_go_away_hint(&idle.seen);

    let opened = Instant::now();
    let mut calling = Peer::open(&gw.socket, &[]).await;
    calling.call(1, &probe_within_1s(), &[]).await;
    let reply = calling.reply(1).await;
    let took = opened.elapsed();
    eprintln!("DEADLINE_EXCEEDED after {took:?} (grpc-timeout 1S, the plugin silent)");
    assert_deadline_exceeded(&reply, "the call before the plugin's SETTINGS");
    assert!(
        took >= Duration::from_millis(950) && took < Duration::from_millis(2500),
        "answered after {took:?}: its deadline, not the connect timeout"
    );
    let settings = calling.seen.iter().position(|f| f.kind == SETTINGS);
    assert_eq!(
        settings,
        Some(0),
        "the gateway's SETTINGS first: {:?}",
        calling.seen
    );
    calling.send(&frame(SETTINGS, ACK, 0, &[])).await;
    calling.call(3, &request_block(&[], PROBE, &[]), &[]).await;
    let next = calling.reply(3).await;
    assert_eq!(next.get("grpc-status"), Some("0"), "{next:?}");
    assert_go_away_hint(&calling.seen);
    assert!(
        gw.log_text().contains("no HTTP/2 SETTINGS"),
        "{}",
        gw.log_text()
    );
}

/// A plugin socket that answers the splice's connection with HTTP/1.1: given up at once (its
/// first bytes are no SETTINGS frame), not after `upstream.connect_timeout` (20 s here), nor
/// waited on for the megabytes its status line announces when read as a frame head. The
/// client gets the gateway's SETTINGS and its call an answer.
#[tokio::test]
async fn a_plugin_connection_that_is_not_http2_is_given_up_at_once() {
    let backend = Backend::start(Options::new("v1")).await;
    let tap = Tap::start(&backend.socket, Hostile::NotHttp2).await;
    let dir = tempfile::tempdir().unwrap();
    let gw = Gateway::start(&tap.socket, "v0.1", &[&config(dir.path(), "20s")]).await;
    let opened = Instant::now();
    let mut peer = Peer::open(&gw.socket, &[]).await;
    let took = first_settings(&mut peer, opened).await;
    eprintln!("first SETTINGS after {took:?} (the plugin answering HTTP/1.1)");
    assert!(took < Duration::from_secs(5), "SETTINGS after {took:?}");
    peer.send(&frame(SETTINGS, ACK, 0, &[])).await;
    peer.call(1, &probe_within_1s(), &[]).await;
    let reply = peer.reply(1).await;
    assert_eq!(reply.get("grpc-status"), Some("0"), "{reply:?}");
    assert_go_away_hint(&peer.seen);
    assert!(
        gw.log_text()
            .contains("the upstream did not start with SETTINGS"),
        "{}",
        gw.log_text()
    );
}

/// The client was asked to reconnect while the connection serves on: GOAWAY NO_ERROR naming
/// the highest stream id.
fn assert_go_away_hint(seen: &[Frame]) {
    let goaway = seen.iter().find(|f| f.kind == GOAWAY);
    assert!(
        goaway.is_some_and(|g| g.code() == NO_ERROR && g.last_stream() == 0x7fff_ffff),
        "{seen:?}"
    );
}
