//! HTTP/2 conformance of the gateway's front (the splice), on every path a call can take:
//! spliced (relayed to a v1 plugin), translated on a spliced connection (a v0.3 call answered
//! by the gateway first, so that the splice re-encodes the client's blocks from then on), and
//! unattached (no upstream connection of its own could be had at accept: every call answered
//! by the gateway on its shared upstream connection). Raw frames over the UNIX socket check
//! what RFC 9113 and RFC 7541 ask of a proxy: the preface, frame sizes, stream ids and states,
//! flow control, SETTINGS, PING, GOAWAY, CONTINUATION, HPACK's edge cases, and rapid reset.
//! Each case gets a connection of its own. Every case asserts the one answer RFC 9113 names,
//! on every path.
//!
//! Then the connection-level frames per hop: a plugin that GOAWAYs on PINGs (as grpc-go does)
//! or goes away under a spliced connection never shows its GOAWAY to the client, and no call
//! is executed twice.

use csi_gateway_test_support as support;

use std::time::Duration;

use support::gateway::{FrontPath, Gateway};
use support::h2raw::*;
use support::{Backend, Options};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// The three paths, each with its gateway.
struct Path {
    name: &'static str,
    gw: Gateway,
    translated_first: bool,
}

async fn paths(backend: &Backend) -> Vec<Path> {
    let spliced = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let spliced2 = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let unattached = Gateway::start_unattached(&backend.socket, "v0.1", &[]).await;
    vec![
        Path {
            name: "spliced",
            gw: spliced,
            translated_first: false,
        },
        Path {
            name: "translated on a spliced connection",
            gw: spliced2,
            translated_first: true,
        },
        Path {
            name: "unattached",
            gw: unattached,
            translated_first: false,
        },
    ]
}

const PROBE: &str = "/csi.v1.Identity/Probe";
const PROBE_V03: &str = "/csi.v0.Identity/Probe";

impl Path {
    /// A connection with SETTINGS exchanged; on the translated path, a v0.3 call answered by
    /// the gateway went first (stream 1). The next stream id to use.
    async fn open(&self) -> (Peer, u32) {
        let mut p = Peer::connect(&self.gw.socket).await;
        if !self.translated_first {
            return (p, 1);
        }
        p.call(1, &request_block(&[], PROBE_V03, &[]), &[]).await;
        let r = p.reply(1).await;
        assert_eq!(r.get("grpc-status"), Some("0"), "{}: {r:?}", self.name);
        (p, 3)
    }

    /// A connection that gets `bytes` and must end with GOAWAY `code`.
    async fn expect_goaway(&self, bytes: &[u8], code: u32, what: &str) {
        let (mut p, _) = self.open().await;
        p.send(bytes).await;
        let g = p
            .goaway()
            .await
            .unwrap_or_else(|| panic!("{}: {what}: no GOAWAY; got {:?}", self.name, p.seen));
        assert_eq!(g.code(), code, "{}: {what}: {:?}", self.name, g);
    }

    /// A call that must succeed.
    async fn expect_ok(&self, p: &mut Peer, stream: u32, what: &str) {
        let r = p.reply(stream).await;
        assert_eq!(
            r.get("grpc-status"),
            Some("0"),
            "{}: {what}: {r:?}",
            self.name
        );
    }
}

/// RFC 9113 §3.4: the preface, then SETTINGS first; the gateway's SETTINGS carry its limits.
#[tokio::test]
async fn preface_and_settings() {
    let backend = Backend::start(Options::new("v1")).await;
    for path in paths(&backend).await {
        // Not HTTP/2: the connection ends.
        let mut raw = UnixStream::connect(&path.gw.socket).await.unwrap();
        raw.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut rest = Vec::new();
        let closed =
            tokio::time::timeout(Duration::from_secs(15), raw.read_to_end(&mut rest)).await;
        assert!(
            closed.is_ok(),
            "{}: a connection that is not HTTP/2 is closed",
            path.name
        );

        // SETTINGS acknowledged both ways, and the limits advertised.
        let (p, _) = path.open().await;
        let streams = p
            .server_settings
            .iter()
            .find(|(id, _)| *id == 0x3)
            .map(|(_, v)| *v);
        assert_eq!(
            streams,
            Some(1024),
            "{}: SETTINGS_MAX_CONCURRENT_STREAMS",
            path.name
        );

        // A first frame other than SETTINGS.
        let mut raw = UnixStream::connect(&path.gw.socket).await.unwrap();
        let mut out = PREFACE.to_vec();
        out.extend_from_slice(&frame(PING, 0, 0, &[0; 8]));
        raw.write_all(&out).await.unwrap();
        let mut got = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(15), raw.read_to_end(&mut got)).await;
        let frames = frames_of(&got);
        let goaway = frames.iter().find(|f| f.kind == GOAWAY);
        assert_eq!(
            goaway.map(|g| g.code()),
            Some(PROTOCOL_ERROR),
            "{}: PING before SETTINGS: {frames:?}",
            path.name
        );
        assert!(
            !frames.iter().any(|f| f.kind == PING),
            "{}: a PING before SETTINGS is not answered: {frames:?}",
            path.name
        );

        // Valid SETTINGS mid-connection are acknowledged; the connection goes on.
        let (mut p, next) = path.open().await;
        p.send(&settings(&[(0x4, 100_000), (0x3, 10)])).await;
        p.expect(|f| f.kind == SETTINGS && f.flags & ACK != 0).await;
        p.call(next, &request_block(&[], PROBE, &[]), &[]).await;
        path.expect_ok(&mut p, next, "a call after SETTINGS").await;
    }
}

fn frames_of(mut bytes: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    while bytes.len() >= 9 {
        let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        if bytes.len() < 9 + len {
            break;
        }
        out.push(Frame {
            kind: bytes[3],
            flags: bytes[4],
            stream: u32::from_be_bytes(bytes[5..9].try_into().unwrap()),
            payload: bytes[9..9 + len].to_vec(),
        });
        bytes = &bytes[9 + len..];
    }
    out
}

/// RFC 9113 §4.2, §6: frames over SETTINGS_MAX_FRAME_SIZE, and frames of the wrong length.
#[tokio::test]
async fn frame_sizes() {
    let backend = Backend::start(Options::new("v1")).await;
    for path in paths(&backend).await {
        let (_, next) = path.open().await;
        let mut big = frame(HEADERS, END_HEADERS, next, &request_block(&[], PROBE, &[]));
        big.extend_from_slice(&frame(DATA, 0, next, &vec![0u8; 16_385]));
        path.expect_goaway(&big, FRAME_SIZE_ERROR, "DATA over 16384")
            .await;
        path.expect_goaway(&frame(PING, 0, 0, &[0; 7]), FRAME_SIZE_ERROR, "PING of 7")
            .await;
        path.expect_goaway(
            &frame(SETTINGS, 0, 0, &[0; 5]),
            FRAME_SIZE_ERROR,
            "SETTINGS of 5",
        )
        .await;
        path.expect_goaway(
            &frame(WINDOW_UPDATE, 0, 0, &[0; 3]),
            FRAME_SIZE_ERROR,
            "WINDOW_UPDATE of 3",
        )
        .await;
        path.expect_goaway(
            &frame(SETTINGS, ACK, 0, &[0; 6]),
            FRAME_SIZE_ERROR,
            "SETTINGS ACK with a payload",
        )
        .await;
        path.expect_goaway(
            &frame(RST_STREAM, 0, 1, &[0; 3]),
            FRAME_SIZE_ERROR,
            "RST_STREAM of 3",
        )
        .await;
        path.expect_goaway(
            &frame(GOAWAY, 0, 0, &[0; 7]),
            FRAME_SIZE_ERROR,
            "GOAWAY of 7",
        )
        .await;
        // §6.3: a PRIORITY of the wrong length is a stream error; the connection goes on.
        let (mut p, next) = path.open().await;
        p.send(&frame(PRIORITY, 0, next, &[0; 4])).await;
        let reset = p.expect(|f| f.kind == RST_STREAM || f.kind == GOAWAY).await;
        assert_eq!(
            (reset.kind, reset.stream, reset.code()),
            (RST_STREAM, next, FRAME_SIZE_ERROR),
            "{}: PRIORITY of 4",
            path.name
        );
        p.call(next + 2, &request_block(&[], PROBE, &[]), &[]).await;
        path.expect_ok(&mut p, next + 2, "after a PRIORITY of 4")
            .await;
    }
}

/// RFC 9113 §5.1, §5.1.1: stream ids — even, on stream 0, decreasing, reused, idle.
#[tokio::test]
async fn stream_ids_and_states() {
    let backend = Backend::start(Options::new("v1")).await;
    for path in paths(&backend).await {
        let (_, next) = path.open().await;
        let block = request_block(&[], PROBE, &[]);
        path.expect_goaway(
            &frame(HEADERS, END_HEADERS | END_STREAM, next + 1, &block),
            PROTOCOL_ERROR,
            "an even id",
        )
        .await;
        path.expect_goaway(
            &frame(HEADERS, END_HEADERS | END_STREAM, 0, &block),
            PROTOCOL_ERROR,
            "stream 0",
        )
        .await;
        path.expect_goaway(
            &frame(DATA, END_STREAM, next + 6, &message(&[])),
            PROTOCOL_ERROR,
            "DATA on an idle stream",
        )
        .await;
        path.expect_goaway(
            &frame(RST_STREAM, 0, next + 6, &CANCEL.to_be_bytes()),
            PROTOCOL_ERROR,
            "RST_STREAM on an idle stream",
        )
        .await;
        for (what, second) in [("a decreasing id", next + 2), ("a reused id", next + 4)] {
            let (mut p, next) = path.open().await;
            p.call(next + 4, &block, &[]).await;
            path.expect_ok(&mut p, next + 4, what).await;
            let _ = second;
            p.send(&frame(
                HEADERS,
                END_HEADERS | END_STREAM,
                if what == "a reused id" {
                    next + 4
                } else {
                    next + 2
                },
                &block,
            ))
            .await;
            let g = p
                .goaway()
                .await
                .unwrap_or_else(|| panic!("{}: {what}: no GOAWAY", path.name));
            assert!(
                [PROTOCOL_ERROR, 0x5].contains(&g.code()),
                "{}: {what}: PROTOCOL_ERROR or STREAM_CLOSED, got {g:?}",
                path.name
            );
        }
    }
}

/// RFC 9113 §6.9: a window over 2^31-1, and an increment of 0.
#[tokio::test]
async fn flow_control() {
    let backend = Backend::start(Options::new("v1")).await;
    for path in paths(&backend).await {
        path.expect_goaway(
            &frame(WINDOW_UPDATE, 0, 0, &0x7fff_ffffu32.to_be_bytes()),
            FLOW_CONTROL_ERROR,
            "window overflow",
        )
        .await;
        path.expect_goaway(
            &frame(WINDOW_UPDATE, 0, 0, &0u32.to_be_bytes()),
            PROTOCOL_ERROR,
            "increment 0",
        )
        .await;
        // A tiny stream window: the reply still arrives, in pieces, as the client grants it.
        let (mut p, next) = path.open().await;
        p.send(&settings(&[(0x4, 1)])).await;
        p.expect(|f| f.kind == SETTINGS && f.flags & ACK != 0).await;
        p.call(
            next,
            &request_block(&[], "/csi.v1.Identity/GetPluginInfo", &[]),
            &[],
        )
        .await;
        let mut data = 0;
        loop {
            let f = p
                .next()
                .await
                .unwrap_or_else(|| panic!("{}: reply stalled: {:?}", path.name, p.seen));
            if f.stream == next && f.kind == DATA {
                data += f.payload.len();
                assert!(
                    f.payload.len() <= 1,
                    "{}: DATA beyond the window",
                    path.name
                );
                p.send(&frame(WINDOW_UPDATE, 0, next, &1u32.to_be_bytes()))
                    .await;
            }
            if f.stream == next && f.flags & END_STREAM != 0 {
                break;
            }
        }
        assert!(data > 5, "{}: the reply's message arrived", path.name);
    }
}

/// RFC 9113 §6.5.2: values out of range.
#[tokio::test]
async fn settings_values() {
    let backend = Backend::start(Options::new("v1")).await;
    for path in paths(&backend).await {
        path.expect_goaway(&settings(&[(0x2, 2)]), PROTOCOL_ERROR, "ENABLE_PUSH 2")
            .await;
        path.expect_goaway(
            &settings(&[(0x4, 0x8000_0000)]),
            FLOW_CONTROL_ERROR,
            "INITIAL_WINDOW_SIZE 2^31",
        )
        .await;
        path.expect_goaway(
            &settings(&[(0x5, 16_383)]),
            PROTOCOL_ERROR,
            "MAX_FRAME_SIZE 16383",
        )
        .await;
        path.expect_goaway(
            &frame(SETTINGS, 0, 1, &[]),
            PROTOCOL_ERROR,
            "SETTINGS on a stream",
        )
        .await;
    }
}

/// RFC 9113 §6.7: PING is answered by the gateway itself, with the same payload, between calls.
#[tokio::test]
async fn ping() {
    let backend = Backend::start(Options::new("v1")).await;
    for path in paths(&backend).await {
        let (mut p, next) = path.open().await;
        for (i, stream) in (next..next + 10).step_by(2).enumerate() {
            let payload = [i as u8, 1, 2, 3, 4, 5, 6, 7];
            p.send(&frame(PING, 0, 0, &payload)).await;
            let ack = p.expect(|f| f.kind == PING).await;
            assert_eq!(ack.flags, ACK, "{}", path.name);
            assert_eq!(ack.payload, payload, "{}", path.name);
            p.call(stream, &request_block(&[], PROBE, &[]), &[]).await;
            path.expect_ok(&mut p, stream, "a call between PINGs").await;
        }
        path.expect_goaway(
            &frame(PING, 0, 1, &[0; 8]),
            PROTOCOL_ERROR,
            "PING on a stream",
        )
        .await;
        assert!(
            !p.seen.iter().any(|f| f.kind == GOAWAY),
            "{}: {:?}",
            path.name,
            p.seen
        );
    }
}

/// RFC 9113 §6.8: on shutdown the client gets GOAWAY NO_ERROR naming the last stream the
/// gateway took — calls it answered itself included.
#[tokio::test]
async fn goaway_names_the_gateways_last_stream() {
    let backend = Backend::start(Options::new("v1")).await;
    for path in paths(&backend).await {
        let (mut p, next) = path.open().await;
        p.call(next, &request_block(&[], PROBE, &[]), &[]).await;
        path.expect_ok(&mut p, next, "before shutdown").await;
        let last = next;
        std::process::Command::new(support::deps::KILL.path())
            .args(["-TERM", &path.gw.pid().to_string()])
            .status()
            .unwrap();
        let g = p.expect(|f| f.kind == GOAWAY).await;
        assert_eq!(g.code(), NO_ERROR, "{}", path.name);
        assert!(
            g.last_stream() >= last,
            "{}: GOAWAY names {} though stream {last} was answered",
            path.name,
            g.last_stream()
        );
    }
}

/// RFC 9113 §6.10: a header block in several frames, and what may not come between them.
#[tokio::test]
async fn continuation() {
    let backend = Backend::start(Options::new("v1")).await;
    for path in paths(&backend).await {
        let block = request_block(&[], PROBE, &[("x-pad", &"p".repeat(300))]);
        let (head, tail) = block.split_at(block.len() / 2);
        let (mut p, next) = path.open().await;
        let mut out = frame(HEADERS, 0, next, head);
        out.extend_from_slice(&frame(CONTINUATION, END_HEADERS, next, tail));
        out.extend_from_slice(&frame(DATA, END_STREAM, next, &message(&[])));
        p.send(&out).await;
        path.expect_ok(&mut p, next, "a block in two frames").await;

        let (_, next) = path.open().await;
        let mut ping_inside = frame(HEADERS, 0, next, head);
        ping_inside.extend_from_slice(&frame(PING, 0, 0, &[0; 8]));
        path.expect_goaway(&ping_inside, PROTOCOL_ERROR, "PING inside a header block")
            .await;
        let mut other_stream = frame(HEADERS, 0, next, head);
        other_stream.extend_from_slice(&frame(CONTINUATION, END_HEADERS, next + 2, tail));
        path.expect_goaway(
            &other_stream,
            PROTOCOL_ERROR,
            "CONTINUATION on another stream",
        )
        .await;
        path.expect_goaway(
            &frame(CONTINUATION, END_HEADERS, next, tail),
            PROTOCOL_ERROR,
            "CONTINUATION alone",
        )
        .await;
    }
}

/// RFC 7541: two size updates, a size over the limit, an update after a field, Huffman, an
/// index out of range; and after the client cuts its table, the next block it gets opens
/// with the size update its decoder waits for (§4.2).
#[tokio::test]
async fn hpack_edge_cases() {
    let backend = Backend::start(Options::new("v1")).await;
    for path in paths(&backend).await {
        let (mut p, next) = path.open().await;
        // Two size updates (0, then 4096) open the block.
        p.call(
            next,
            &request_block(&[0x20, 0x3f, 0xe1, 0x1f], PROBE, &[]),
            &[],
        )
        .await;
        path.expect_ok(&mut p, next, "two size updates").await;
        // Huffman-coded strings.
        let mut block = vec![0x83, 0x86, 0x04]; // :path, literal without indexing, name index 4
        csi_gateway_wire::hpack::put_string(&mut block, PROBE.as_bytes(), true);
        for (n, v) in [
            (":authority", "localhost"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ] {
            block.push(0);
            csi_gateway_wire::hpack::put_string(&mut block, n.as_bytes(), true);
            csi_gateway_wire::hpack::put_string(&mut block, v.as_bytes(), true);
        }
        p.call(next + 2, &block, &[]).await;
        path.expect_ok(&mut p, next + 2, "Huffman").await;

        let (_, next) = path.open().await;
        let over = frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            next,
            &request_block(&[0x3f, 0xe1, 0x7f], PROBE, &[]),
        );
        path.expect_goaway(&over, COMPRESSION_ERROR, "a size update over the limit")
            .await;
        let mut after = vec![0x83, 0x20];
        after.extend_from_slice(&request_block(&[], PROBE, &[])[1..]);
        path.expect_goaway(
            &frame(HEADERS, END_HEADERS | END_STREAM, next, &after),
            COMPRESSION_ERROR,
            "a size update after a field",
        )
        .await;
        path.expect_goaway(
            &frame(HEADERS, END_HEADERS | END_STREAM, next, &[0xff, 0x40]),
            COMPRESSION_ERROR,
            "index out of range",
        )
        .await;
        let mut bad_huffman = vec![0x83, 0x86, 0x04, 0x81, 0x00];
        bad_huffman.extend_from_slice(&request_block(&[], PROBE, &[])[2..]);
        path.expect_goaway(
            &frame(HEADERS, END_HEADERS | END_STREAM, next, &bad_huffman),
            COMPRESSION_ERROR,
            "bad Huffman padding",
        )
        .await;
        // A block that ends inside a field (a 5-byte :path with 2 bytes left).
        path.expect_goaway(
            &frame(
                HEADERS,
                END_HEADERS | END_STREAM,
                next,
                &[0x83, 0x86, 0x04, 0x05, b'/', b'c'],
            ),
            COMPRESSION_ERROR,
            "a block ending inside a field",
        )
        .await;

        // The client cuts its table to 0: the first block it gets after the ACK opens with a
        // size update (to at most 0).
        let (mut p, next) = path.open().await;
        // Fill the client's table first: replies index content-type and friends.
        p.call(next, &request_block(&[], PROBE, &[]), &[]).await;
        path.expect_ok(&mut p, next, "before the cut").await;
        p.send(&settings(&[(0x1, 0)])).await;
        p.expect(|f| f.kind == SETTINGS && f.flags & ACK != 0).await;
        let before = p.seen.len();
        let call_path = if path.translated_first {
            PROBE_V03
        } else {
            PROBE
        };
        p.call(next + 2, &request_block(&[], call_path, &[]), &[])
            .await;
        path.expect_ok(&mut p, next + 2, "after the cut").await;
        let first = p.seen[before..]
            .iter()
            .find(|f| f.kind == HEADERS)
            .expect("a reply block");
        let mut b = &first.payload[..];
        if first.flags & 0x8 != 0 {
            b = &b[1..];
        }
        assert_eq!(
            b[0] & 0xe0,
            0x20,
            "{}: opens with a size update: {first:?}",
            path.name
        );
    }
}

/// CVE-2023-44487: streams opened and reset in a burst end the connection with GOAWAY
/// ENHANCE_YOUR_CALM, and the gateway serves the next connection.
#[tokio::test]
async fn rapid_reset() {
    let backend = Backend::start(Options::new("v1")).await;
    for path in paths(&backend).await {
        let (mut p, next) = path.open().await;
        let block = request_block(&[], PROBE, &[]);
        let mut burst = Vec::new();
        for i in 0..2000u32 {
            let id = next + 2 * i;
            burst.extend_from_slice(&frame(HEADERS, END_HEADERS, id, &block));
            burst.extend_from_slice(&frame(RST_STREAM, 0, id, &CANCEL.to_be_bytes()));
        }
        p.send(&burst).await;
        let g = p
            .goaway()
            .await
            .unwrap_or_else(|| panic!("{}: no GOAWAY after 2000 resets", path.name));
        assert_eq!(g.code(), ENHANCE_YOUR_CALM, "{}: {g:?}", path.name);
        let (mut p, next) = path.open().await;
        p.call(next, &block, &[]).await;
        path.expect_ok(&mut p, next, "the next connection").await;
    }
}

/// A request whose header list is over SETTINGS_MAX_HEADER_LIST_SIZE gets RESOURCE_EXHAUSTED
/// naming the limit on every path (not h2's HTTP 431, which a gRPC client reads as UNKNOWN);
/// the connection goes on. Past four times the limit, the connection ends (GOAWAY
/// ENHANCE_YOUR_CALM), as h2 ends it.
#[tokio::test]
async fn header_list_size() {
    let backend = Backend::start(Options::new("v1")).await;
    for path in paths(&backend).await {
        let (mut p, next) = path.open().await;
        let block = request_block(&[], PROBE, &[("x-big", &"b".repeat(20_000))]);
        let (head, tail) = block.split_at(10_000);
        let mut out = frame(HEADERS, 0, next, head);
        out.extend_from_slice(&frame(CONTINUATION, END_HEADERS, next, tail));
        out.extend_from_slice(&frame(DATA, END_STREAM, next, &message(&[])));
        p.send(&out).await;
        let r = p.reply(next).await;
        assert_eq!(r.get(":status"), Some("200"), "{}: {r:?}", path.name);
        assert_eq!(r.get("grpc-status"), Some("8"), "{}: {r:?}", path.name);
        let message = r.get("grpc-message").unwrap_or_default();
        assert!(
            message.contains("16384") && message.contains("SETTINGS_MAX_HEADER_LIST_SIZE"),
            "{}: {r:?}",
            path.name
        );
        p.call(next + 2, &request_block(&[], PROBE, &[]), &[]).await;
        path.expect_ok(&mut p, next + 2, "after a refused header list")
            .await;

        // More than four times the limit: the connection ends, alike on every path.
        let (mut p, next) = path.open().await;
        let block = request_block(&[], PROBE, &[("x-huge", &"h".repeat(70_000))]);
        let mut out = Vec::new();
        let chunks: Vec<&[u8]> = block.chunks(16_000).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let last = if i + 1 == chunks.len() {
                END_HEADERS
            } else {
                0
            };
            let kind = if i == 0 { HEADERS } else { CONTINUATION };
            out.extend_from_slice(&frame(kind, last, next, chunk));
        }
        p.send(&out).await;
        let g = p
            .goaway()
            .await
            .unwrap_or_else(|| panic!("{}: no GOAWAY for a 70 KB header list", path.name));
        assert_eq!(g.code(), ENHANCE_YOUR_CALM, "{}: {g:?}", path.name);
    }
}

/// The issue's own case: a spliced connection carries translated and relayed calls while the
/// client PINGs, in front of a plugin that answers a PING with GOAWAY "too_many_pings" (as a
/// grpc-go plugin does on a connection without calls). The gateway answers the PINGs: the
/// plugin never sees one, the client never sees a GOAWAY, and every call runs exactly once.
#[tokio::test]
async fn client_pings_stay_on_the_clients_hop() {
    let backend = Backend::start(Options::new("v1")).await;
    let tap = Tap::start(&backend.socket, Hostile::GoawayOnPing).await;
    let gw = Gateway::start(&tap.socket, "v0.1", &[]).await;
    let mut p = Peer::connect(&gw.socket).await;
    let before = tap.requests();
    let mut calls = 0;
    for round in 0..20u32 {
        let stream = 1 + 2 * round;
        let path = if round % 2 == 0 { PROBE_V03 } else { PROBE };
        p.send(&frame(PING, 0, 0, &round.to_be_bytes().repeat(2)))
            .await;
        p.call(stream, &request_block(&[], path, &[]), &[]).await;
        let r = p.reply(stream).await;
        assert_eq!(
            r.get("grpc-status"),
            Some("0"),
            "{path}: {r:?}\n{}",
            gw.log_text()
        );
        calls += 1;
    }
    let acks = p
        .seen
        .iter()
        .filter(|f| f.kind == PING && f.flags & ACK != 0)
        .count();
    assert_eq!(acks, 20, "every PING answered");
    assert!(
        !p.seen.iter().any(|f| f.kind == GOAWAY),
        "no GOAWAY: {:?}",
        p.seen
    );
    assert!(
        !tap.frames().iter().any(|(_, f)| f.kind == PING),
        "the plugin saw a PING"
    );
    assert_eq!(
        tap.requests() - before,
        calls,
        "each call reached the plugin once"
    );
}

/// A plugin that goes away under a spliced connection: its GOAWAY stays on its hop. The
/// client gets the gateway's GOAWAY, never naming a stream below one the gateway answered,
/// and its calls go on (answered through the gateway's own upstream connection).
#[tokio::test]
async fn upstream_goaway_stays_on_its_hop() {
    let backend = Backend::start(Options::new("v1")).await;
    let tap = Tap::start(&backend.socket, Hostile::GoawayAfterTrigger).await;
    let gw = Gateway::start(&tap.socket, "v0.1", &[]).await;
    let mut p = Peer::connect(&gw.socket).await;
    p.call(1, &request_block(&[], PROBE_V03, &[]), &[]).await; // answered by the gateway
    assert_eq!(p.reply(1).await.get("grpc-status"), Some("0"));
    p.call(
        3,
        &request_block(&[], "/csi.v1.Identity/GetPluginCapabilities", &[]),
        &[],
    )
    .await;
    assert_eq!(
        p.reply(3).await.get("grpc-status"),
        Some("0"),
        "{}",
        gw.log_text()
    );
    tokio::time::sleep(Duration::from_millis(600)).await; // the plugin's connection closed
    for stream in [5, 7, 9] {
        let path = if stream == 7 { PROBE_V03 } else { PROBE };
        p.call(stream, &request_block(&[], path, &[]), &[]).await;
        let r = p.reply(stream).await;
        assert_eq!(
            r.get("grpc-status"),
            Some("0"),
            "stream {stream}: {r:?}\n{}",
            gw.log_text()
        );
    }
    for g in p.seen.iter().filter(|f| f.kind == GOAWAY) {
        assert_eq!(g.code(), NO_ERROR, "{g:?}");
        assert!(
            g.last_stream() >= 9,
            "the GOAWAY names a stream below those answered: {g:?}"
        );
        assert!(
            g.payload.len() == 8,
            "not the plugin's GOAWAY (it said \"bye\"): {g:?}"
        );
    }
}

/// A client that resets a translated call cancels the gateway's upstream call: the plugin's
/// stream is reset too (RST_STREAM seen between gateway and plugin) long before it answers.
#[tokio::test]
async fn a_client_reset_cancels_the_upstream_call() {
    let backend = Backend::start(Options::new("v1").arg("--fault-delay=20s")).await;
    let tap = Tap::start(&backend.socket, Hostile::GoawayAfterTrigger).await;
    for front in FrontPath::BOTH {
        let gw = front.start(&tap.socket, "v0.1", &[]).await;
        let mut p = Peer::connect(&gw.socket).await;
        let before = tap.frames().len();
        let request = csi_gateway::dialect::proto::v0_3::CreateVolumeRequest {
            name: format!("slow-{front:?}"),
            volume_capabilities: vec![support::front::cap_v03()],
            ..Default::default()
        };
        let body = prost::Message::encode_to_vec(&request);
        p.call(
            1,
            &request_block(&[], "/csi.v0.Controller/CreateVolume", &[]),
            &body,
        )
        .await;
        // Wait until the plugin got the call.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !tap.frames()[before..]
            .iter()
            .any(|(_, f)| f.kind == HEADERS)
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the call never reached the plugin"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // It may have asked the plugin something else first; CreateVolume then holds for 20 s.
        tokio::time::sleep(Duration::from_secs(1)).await;
        p.send(&frame(RST_STREAM, 0, 1, &CANCEL.to_be_bytes()))
            .await;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let frames = tap.frames();
            let opened: Vec<_> = frames[before..]
                .iter()
                .filter(|(_, f)| f.kind == HEADERS)
                .map(|(c, f)| (*c, f.stream))
                .collect();
            if frames[before..]
                .iter()
                .any(|(c, f)| f.kind == RST_STREAM && opened.contains(&(*c, f.stream)))
            {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{front:?}: the upstream call was not reset\n{}",
                gw.log_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The gateway's own replies reach a client only after the ACK of its SETTINGS (which, on the
/// spliced path, follows the plugin's ACK): a client applies its SETTINGS once acknowledged, so
/// h2 counts DATA received before against its old INITIAL_WINDOW_SIZE and, shrinking the window
/// on the ACK, never gives that credit back — the stream stalled. The tap holds the plugin's
/// ACK 300 ms; a translated call (answered by the gateway itself) goes with the SETTINGS.
#[tokio::test]
async fn own_replies_follow_the_ack_of_the_clients_settings() {
    let backend = Backend::start(Options::new("v1")).await;
    let tap = Tap::start(&backend.socket, Hostile::DelaySettingsAck).await;
    let gw = Gateway::start(&tap.socket, "v0.1", &["--upstream-dialect=v1"]).await;
    const INITIAL_WINDOW_SIZE: u16 = 0x4;
    let mut p = Peer::open(&gw.socket, &[(INITIAL_WINDOW_SIZE, 1024)]).await;
    p.call(
        1,
        &request_block(&[], "/csi.v0.Node/NodeGetCapabilities", &[]),
        &[],
    )
    .await;
    let reply = p.reply(1).await;
    assert_eq!(reply.get("grpc-status"), Some("0"), "{:?}", p.seen);
    let ack = p
        .seen
        .iter()
        .position(|f| f.kind == SETTINGS && f.flags & ACK != 0);
    let first = p.seen.iter().position(|f| f.stream == 1).unwrap();
    assert!(
        ack.is_some_and(|a| a < first),
        "stream 1's reply came before the ACK of the client's SETTINGS: {:?}",
        p.seen
    );
}

/// RFC 9113 §6.10: while a reply header block of the plugin's is cut between HEADERS and its
/// CONTINUATION, the gateway writes nothing of its own on the connection — not the PING ACK,
/// not the WINDOW_UPDATEs for a translated call's request, not that call's reply.
#[tokio::test]
async fn nothing_comes_between_a_header_block_and_its_continuation() {
    let backend = Backend::start(Options::new("v1")).await;
    let tap = Tap::start(&backend.socket, Hostile::SplitReplyBlocks).await;
    let gw = Gateway::start(&tap.socket, "v0.1", &[]).await;
    let mut p = Peer::connect(&gw.socket).await;
    p.call(1, &request_block(&[], PROBE, &[]), &[]).await;
    p.expect(|f| f.kind == HEADERS && f.stream == 1).await;
    // Inside the plugin's cut block now: a PING, and a translated call with a body.
    p.send(&frame(PING, 0, 0, &[7; 8])).await;
    let request = csi_gateway::dialect::proto::v0_3::GetPluginInfoRequest {};
    p.call(
        3,
        &request_block(&[], "/csi.v0.Identity/GetPluginInfo", &[]),
        &prost::Message::encode_to_vec(&request),
    )
    .await;
    // Both calls end: a block that ends a stream ends it once its last frame came.
    let mut ended = 0;
    let mut ending = std::collections::HashSet::new();
    while ended < 2 {
        let f = p
            .next()
            .await
            .unwrap_or_else(|| panic!("the calls never ended: {:?}", p.seen));
        match f.kind {
            DATA if f.flags & END_STREAM != 0 => ended += 1,
            HEADERS if f.flags & END_STREAM != 0 => {
                ending.insert(f.stream);
            }
            _ => {}
        }
        if (f.kind == HEADERS || f.kind == CONTINUATION)
            && f.flags & END_HEADERS != 0
            && ending.remove(&f.stream)
        {
            ended += 1;
        }
    }
    let frames = &p.seen;
    for (i, f) in frames.iter().enumerate() {
        if (f.kind == HEADERS || f.kind == CONTINUATION) && f.flags & END_HEADERS == 0 {
            let next = &frames[i + 1];
            assert!(
                next.kind == CONTINUATION && next.stream == f.stream,
                "frame {i}: a header block interrupted by {next:?}: {frames:?}"
            );
        }
    }
    assert!(frames.iter().any(|f| f.kind == PING && f.flags & ACK != 0));
    assert!(
        frames
            .iter()
            .any(|f| f.kind == HEADERS && f.flags & END_HEADERS == 0),
        "the tap cut a block"
    );
}

/// A request block of these fields in this order, every one a literal without indexing.
fn block_of(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (n, v) in fields {
        literal(&mut block, n.as_bytes(), v.as_bytes());
    }
    block
}

/// RFC 9113 §8.1.1–8.3 (h2spec's 8.1 and 8.1.2.x cases): a malformed request is a stream error
/// (RST_STREAM PROTOCOL_ERROR; a GOAWAY PROTOCOL_ERROR would do too), whether the call would
/// be relayed, translated by the gateway or answered by it, and the connection serves on.
/// Malformed trailers end their stream the same way.
#[tokio::test]
async fn malformed_requests_are_stream_errors() {
    let backend = Backend::start(Options::new("v1")).await;
    let good = |path: &'static str| -> Vec<(&'static str, &'static str)> {
        vec![
            (":method", "POST"),
            (":scheme", "http"),
            (":path", path),
            (":authority", "localhost"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ]
    };
    let with = |path, extra: (&'static str, &'static str)| {
        let mut f = good(path);
        f.push(extra);
        f
    };
    let without = |path, name: &str| {
        let mut f = good(path);
        f.retain(|(n, _)| *n != name);
        f
    };
    let twice = |path, name: &str| {
        let mut f = good(path);
        let field = *f.iter().find(|(n, _)| *n == name).unwrap();
        f.insert(1, field);
        f
    };
    for path in [PROBE, PROBE_V03, "/"] {
        let after_regular = {
            let mut f = without(path, ":authority");
            f.push((":authority", "localhost"));
            f
        };
        let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
            (
                "8.1.2/1 an uppercase field name",
                with(path, ("X-Upper", "a")),
            ),
            (
                "8.1.2.1/1 an unknown pseudo-header",
                with(path, (":foo", "a")),
            ),
            (
                "8.1.2.1/2 a response pseudo-header",
                with(path, (":status", "200")),
            ),
            (
                "8.1.2.1/4 a pseudo-header after a regular one",
                after_regular,
            ),
            (
                "8.1.2.2/1 a connection-specific field",
                with(path, ("connection", "keep-alive")),
            ),
            (
                "8.1.2.2/2 te other than trailers",
                with(path, ("te", "gzip")),
            ),
            ("8.1.2.3/2 no :method", without(path, ":method")),
            ("8.1.2.3/3 no :scheme", without(path, ":scheme")),
            ("8.1.2.3/4 no :path", without(path, ":path")),
            ("8.1.2.3/5 :method twice", twice(path, ":method")),
            ("8.1.2.3/6 :scheme twice", twice(path, ":scheme")),
            ("8.1.2.3/7 :path twice", twice(path, ":path")),
        ];
        let mut empty_path = good(path);
        empty_path[2] = (":path", "");
        let cases = cases
            .into_iter()
            .chain([("8.1.2.3/1 an empty :path", empty_path)]);
        for p in &paths(&backend).await {
            let (mut peer, mut id) = p.open().await;
            for (case, fields) in cases.clone() {
                let what = format!("{}: {path}: {case}", p.name);
                peer.call(id, &block_of(&fields), &[]).await;
                if !protocol_error(&mut peer, id, &what).await {
                    (peer, id) = p.open().await; // a connection error: on a new one
                    continue;
                }
                id += 2;
            }
            // Trailers: a pseudo-header in them (8.1.2.1/3), or without END_STREAM (8.1/1).
            for (case, trailers, flags) in [
                (
                    "8.1.2.1/3 a pseudo-header in trailers",
                    block_of(&[(":method", "POST")]),
                    END_HEADERS | END_STREAM,
                ),
                (
                    "8.1/1 trailers without END_STREAM",
                    block_of(&[("x-trailer", "a")]),
                    END_HEADERS,
                ),
            ] {
                let mut out = frame(HEADERS, END_HEADERS, id, &block_of(&good(path)));
                out.extend_from_slice(&frame(DATA, 0, id, &message(&[])));
                out.extend_from_slice(&frame(HEADERS, flags, id, &trailers));
                peer.send(&out).await;
                if !protocol_error(&mut peer, id, &format!("{}: {path}: {case}", p.name)).await {
                    (peer, id) = p.open().await;
                    continue;
                }
                id += 2;
            }
            peer.call(id, &request_block(&[], PROBE, &[]), &[]).await;
            p.expect_ok(
                &mut peer,
                id,
                &format!("{path}: after the malformed requests"),
            )
            .await;
        }
    }
}

/// Reads until stream `id` is reset (true) or the connection goes away (false), each with
/// PROTOCOL_ERROR; a reply on the stream, or nothing, fails `what`.
async fn protocol_error(peer: &mut Peer, id: u32, what: &str) -> bool {
    stream_error(peer, id, PROTOCOL_ERROR, what).await
}

/// Reads until stream `id` is reset with `code` (true), or the connection goes away with
/// `code` or PROTOCOL_ERROR (false: a HEADERS on a stream that has ended reads as a reused
/// id, RFC 9113 §5.1.1); a reply on the stream, or nothing, fails `what`.
async fn stream_error(peer: &mut Peer, id: u32, code: u32, what: &str) -> bool {
    loop {
        let f = peer
            .next()
            .await
            .unwrap_or_else(|| panic!("{what}: neither reset nor GOAWAY: {:?}", peer.seen));
        match f.kind {
            RST_STREAM if f.stream == id => {
                assert_eq!(f.code(), code, "{what}: {f:?}");
                return true;
            }
            GOAWAY => {
                assert!([code, PROTOCOL_ERROR].contains(&f.code()), "{what}: {f:?}");
                return false;
            }
            HEADERS | DATA if f.stream == id => panic!("{what}: answered: {f:?}"),
            _ => {}
        }
    }
}

/// RFC 9113 §5.1, §5.3.1, §6.1 and §6.9 (h2spec's 5.1/5, /6, /8, /11, 5.3.1/1–2, 6.1/2 and
/// 6.9/2): frames on a stream the client closed are STREAM_CLOSED, a stream depending on
/// itself and a stream's WINDOW_UPDATE of 0 are PROTOCOL_ERROR — stream errors (or connection
/// errors) on calls relayed to the plugin and on calls the gateway answers, and the
/// connection serves on.
#[tokio::test]
async fn frames_on_closed_streams_and_self_dependencies_are_errors() {
    let backend = Backend::start(Options::new("v1")).await;
    for path in [PROBE, "/"] {
        for p in &paths(&backend).await {
            let (mut peer, mut id) = p.open().await;
            let block = request_block(&[], path, &[]);
            let name = |case: &str| format!("{}: {path}: {case}", p.name);
            // 5.1/5, 6.1/2: DATA on a stream half closed (remote): HEADERS with END_STREAM.
            let mut out = frame(HEADERS, END_HEADERS | END_STREAM, id, &block);
            out.extend_from_slice(&frame(DATA, 0, id, &message(&[])));
            peer.send(&out).await;
            if !stream_error(&mut peer, id, STREAM_CLOSED, &name("DATA after END_STREAM")).await {
                (peer, id) = p.open().await;
            } else {
                id += 2;
            }
            // 5.1/6: HEADERS again on it.
            let mut out = frame(HEADERS, END_HEADERS | END_STREAM, id, &block);
            out.extend_from_slice(&frame(HEADERS, END_HEADERS | END_STREAM, id, &block));
            peer.send(&out).await;
            if !stream_error(
                &mut peer,
                id,
                STREAM_CLOSED,
                &name("HEADERS after END_STREAM"),
            )
            .await
            {
                (peer, id) = p.open().await;
            } else {
                id += 2;
            }
            // 5.1/8: DATA after the client's RST_STREAM.
            let mut out = frame(HEADERS, END_HEADERS, id, &block);
            out.extend_from_slice(&frame(RST_STREAM, 0, id, &CANCEL.to_be_bytes()));
            out.extend_from_slice(&frame(DATA, 0, id, &message(&[])));
            peer.send(&out).await;
            if !stream_error(&mut peer, id, STREAM_CLOSED, &name("DATA after RST_STREAM")).await {
                (peer, id) = p.open().await;
            } else {
                id += 2;
            }
            // 5.1/11: DATA once the stream is closed, its reply read.
            peer.send(&frame(HEADERS, END_HEADERS, id, &block)).await;
            peer.send(&frame(DATA, END_STREAM, id, &message(&[]))).await;
            let r = peer.reply(id).await;
            assert!(r.get("grpc-status").is_some(), "{}: {r:?}", name("a call"));
            peer.send(&frame(DATA, 0, id, &message(&[]))).await;
            if !stream_error(
                &mut peer,
                id,
                STREAM_CLOSED,
                &name("DATA on a closed stream"),
            )
            .await
            {
                (peer, id) = p.open().await;
            } else {
                // 6.9/2: a WINDOW_UPDATE of 0 on it.
                peer.send(&frame(WINDOW_UPDATE, 0, id, &0u32.to_be_bytes()))
                    .await;
                if !protocol_error(&mut peer, id, &name("WINDOW_UPDATE of 0 on a stream")).await {
                    (peer, id) = p.open().await;
                } else {
                    id += 2;
                }
            }
            // 5.3.1/1: HEADERS that depends on itself (PRIORITY flag).
            let mut prioritized = id.to_be_bytes().to_vec();
            prioritized.push(16);
            prioritized.extend_from_slice(&block);
            let mut out = frame(HEADERS, END_HEADERS | 0x20, id, &prioritized);
            out.extend_from_slice(&frame(DATA, END_STREAM, id, &message(&[])));
            peer.send(&out).await;
            if !protocol_error(&mut peer, id, &name("HEADERS depending on itself")).await {
                (peer, id) = p.open().await;
            } else {
                id += 2;
            }
            // 5.3.1/2: PRIORITY that depends on itself.
            let mut priority = id.to_be_bytes().to_vec();
            priority.push(16);
            peer.send(&frame(HEADERS, END_HEADERS, id, &block)).await;
            peer.send(&frame(PRIORITY, 0, id, &priority)).await;
            if !protocol_error(&mut peer, id, &name("PRIORITY depending on itself")).await {
                (peer, id) = p.open().await;
            } else {
                id += 2;
            }
            peer.call(id, &request_block(&[], PROBE, &[]), &[]).await;
            p.expect_ok(&mut peer, id, &name("after the stream errors"))
                .await;
        }
    }
}

/// A relayed call, a call translated by the gateway, one it answers itself (no route) and one
/// to its own services: the kinds of stream a request may open.
const EVERY_KIND: [&str; 4] = [PROBE, PROBE_V03, "/", "/grpc.health.v1.Health/Check"];

/// RFC 9113 §5.1.2 (h2spec's 5.1.2/1): a stream past the SETTINGS_MAX_CONCURRENT_STREAMS the
/// gateway advertised is refused — RST_STREAM REFUSED_STREAM or PROTOCOL_ERROR (or GOAWAY
/// PROTOCOL_ERROR) — whatever kind of call it is, on every path, with the shipped limit.
#[tokio::test]
async fn streams_past_the_advertised_limit_are_refused() {
    let backend = Backend::start(Options::new("v1")).await;
    for p in &paths(&backend).await {
        for path in EVERY_KIND {
            let name = format!("{}: {path}", p.name);
            let (mut peer, first) = p.open().await;
            let max = peer
                .server_settings
                .iter()
                .find(|(id, _)| *id == 0x3)
                .map(|&(_, v)| v)
                .unwrap_or_else(|| panic!("{name}: no SETTINGS_MAX_CONCURRENT_STREAMS"));
            let block = request_block(&[], path, &[]);
            // `max` streams open (HEADERS, no END_STREAM; the translated path's first call has
            // ended), then one more.
            let mut out = Vec::new();
            let ids: Vec<u32> = (0..=max).map(|i| first + 2 * i).collect();
            for &id in &ids {
                out.extend_from_slice(&frame(HEADERS, END_HEADERS, id, &block));
            }
            peer.send(&out).await;
            let last = *ids.last().unwrap();
            loop {
                let f = peer
                    .next()
                    .await
                    .unwrap_or_else(|| panic!("{name}: stream {last} past {max} neither refused nor the connection ended: {:?}", peer.seen.iter().rev().take(5).collect::<Vec<_>>()));
                match f.kind {
                    RST_STREAM if f.stream == last => {
                        assert!(
                            [REFUSED_STREAM, PROTOCOL_ERROR].contains(&f.code()),
                            "{name}: {f:?}"
                        );
                        break;
                    }
                    GOAWAY => {
                        assert_eq!(f.code(), PROTOCOL_ERROR, "{name}: {f:?}");
                        break;
                    }
                    HEADERS if f.stream == last => panic!("{name}: stream {last} answered: {f:?}"),
                    _ => {}
                }
            }
        }
    }
}

/// RFC 9113 §8.1.1 (h2spec's 8.1.2.6/1–2): a request whose DATA does not add up to its
/// `content-length` — one frame longer, two frames longer, or ended short — is malformed: a
/// stream error PROTOCOL_ERROR (or GOAWAY PROTOCOL_ERROR), whatever kind of call, on every
/// path; nothing of it is answered, and the connection serves on.
#[tokio::test]
async fn data_other_than_the_content_length_is_a_stream_error() {
    let backend = Backend::start(Options::new("v1")).await;
    let body = message(b"\x0a\x02ab");
    for p in &paths(&backend).await {
        for path in EVERY_KIND {
            let (mut peer, mut id) = p.open().await;
            let cases: [(&str, String, Vec<&[u8]>); 4] = [
                ("one DATA over it", "1".into(), vec![&body]),
                ("two DATA over it", "1".into(), vec![&body[..3], &body[3..]]),
                (
                    "ended short of it",
                    (body.len() + 4).to_string(),
                    vec![&body],
                ),
                ("HEADERS ending the stream", "5".into(), vec![]),
            ];
            for (case, length, frames) in cases {
                let what = format!("{}: {path}: content-length {length}, {case}", p.name);
                let block = request_block(&[], path, &[("content-length", &length)]);
                let mut out = match frames.is_empty() {
                    true => frame(HEADERS, END_HEADERS | END_STREAM, id, &block),
                    false => frame(HEADERS, END_HEADERS, id, &block),
                };
                for (i, data) in frames.iter().enumerate() {
                    let end = if i + 1 == frames.len() { END_STREAM } else { 0 };
                    out.extend_from_slice(&frame(DATA, end, id, data));
                }
                peer.send(&out).await;
                if !protocol_error(&mut peer, id, &what).await {
                    (peer, id) = p.open().await;
                    continue;
                }
                id += 2;
            }
            // The right length is served.
            let block = request_block(&[], PROBE, &[("content-length", "5")]);
            peer.call(id, &block, &[]).await;
            p.expect_ok(&mut peer, id, &format!("{path}: after the bad lengths"))
                .await;
        }
    }
}

/// A request the gateway reads itself (a translated v0.3 CreateVolume) that goes past the
/// message limit (4 MiB) is answered RESOURCE_EXHAUSTED as soon as it does, and its stream
/// reset (NO_ERROR: the client may stop sending), not read to its end: the client here never
/// ends it. Spliced front.
#[tokio::test]
async fn a_request_past_the_message_limit_is_refused_before_its_end() {
    let backend = Backend::start(Options::new("v1")).await;
    let p = &paths(&backend).await[0];
    let (mut peer, id) = p.open().await;
    let block = request_block(&[], "/csi.v0.Controller/CreateVolume", &[]);
    // A message declaring 100 MiB; 5 MiB of it sent, in frames of 16 KiB.
    let mut out = frame(HEADERS, END_HEADERS, id, &block);
    let mut body = vec![0];
    body.extend_from_slice(&(100u32 << 20).to_be_bytes());
    body.resize(5 << 20, 0x0a);
    for chunk in body.chunks(16 * 1024) {
        out.extend_from_slice(&frame(DATA, 0, id, chunk));
    }
    peer.send(&out).await;
    let r = peer.reply(id).await;
    assert_eq!(r.get("grpc-status"), Some("8"), "{r:?}");
    let reset = peer
        .expect(|f| f.kind == RST_STREAM && f.stream == id)
        .await;
    assert_eq!(reset.code(), NO_ERROR, "{reset:?}");
    peer.call(id + 2, &request_block(&[], PROBE, &[]), &[])
        .await;
    p.expect_ok(&mut peer, id + 2, "after the refused request")
        .await;
}
