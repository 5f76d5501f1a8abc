//! The connection limits of `[listen.limits]` (src/splice/limits.rs), driven with raw frames
//! (crates/test-support/src/h2raw.rs) against the built gateway's one front in both states a
//! connection can start in: spliced onto an upstream connection of its own, and unattached (no
//! connection of its own could be had at accept, so the gateway answers its calls on its shared
//! upstream connection). Each limit is set small in a configuration file so that each case
//! takes seconds, and each state must give the same answer: idle connections, total connections, slow header blocks, concurrent
//! streams, resets per second, and the memory a connection can make the gateway hold.

use csi_gateway_test_support as support;

use std::time::{Duration, Instant};

use support::gateway::{FrontPath, Gateway};
use support::h2raw::*;
use support::{Backend, Options};

const PROBE: &str = "/csi.v1.Identity/Probe";

/// A configuration file with `[listen.limits]` set to `limits`; the flags give the rest.
fn config(dir: &std::path::Path, limits: &str) -> String {
    let path = dir.join("gateway.toml");
    let text = format!(
        "[listen]\nendpoint = \"unix:///unused\"\n[upstream]\nendpoint = \"unix:///unused-plugin\"\n\
         [state]\ndir = \"/unused\"\n[listen.limits]\n{limits}\n"
    );
    std::fs::write(&path, text).unwrap();
    format!("--config={}", path.display())
}

/// A gateway per path, each with `limits`.
struct Paths {
    gateways: Vec<(&'static str, Gateway)>,
    _dir: tempfile::TempDir,
}

async fn paths(backend: &Backend, limits: &str) -> Paths {
    let dir = tempfile::tempdir().unwrap();
    let flag = config(dir.path(), limits);
    let spliced = Gateway::start(&backend.socket, "v0.1", &[&flag]).await;
    let unattached = Gateway::start_unattached(&backend.socket, "v0.1", &[&flag]).await;
    Paths {
        gateways: vec![("spliced", spliced), ("unattached", unattached)],
        _dir: dir,
    }
}

async fn expect_ok(p: &mut Peer, stream: u32, what: &str) {
    let r = p.reply(stream).await;
    assert_eq!(r.get("grpc-status"), Some("0"), "{what}: {r:?}");
}

/// A connection with no stream for `idle_timeout` gets GOAWAY NO_ERROR and is closed; one
/// with a call in between is not, until it has been idle that long since the call ended.
#[tokio::test]
async fn an_idle_connection_is_asked_to_go_away() {
    let backend = Backend::start(Options::new("v1")).await;
    let paths = paths(&backend, "idle_timeout = \"1s\"").await;
    for (name, gw) in &paths.gateways {
        let mut p = Peer::connect(&gw.socket).await;
        tokio::time::sleep(Duration::from_millis(700)).await;
        p.call(1, &request_block(&[], PROBE, &[]), &[]).await;
        expect_ok(&mut p, 1, name).await;
        let call_ended = Instant::now();
        assert!(
            !p.seen.iter().any(|f| f.kind == GOAWAY),
            "{name}: GOAWAY before the idle time: {:?}",
            p.seen
        );
        let g = p.expect(|f| f.kind == GOAWAY).await;
        let idle = call_ended.elapsed();
        assert_eq!(g.code(), NO_ERROR, "{name}: {g:?}");
        assert!(
            idle >= Duration::from_millis(900) && idle < Duration::from_secs(5),
            "{name}: GOAWAY after {idle:?} idle, the limit being 1 s"
        );
        assert!(
            g.last_stream() >= 1,
            "{name}: {g:?} names the answered call"
        );
        assert!(
            p.until_closed(Duration::from_secs(5)).await,
            "{name}: the idle connection was not closed: {:?}",
            p.seen
        );
    }
}

/// A raw connection: the preface and SETTINGS sent, then read until the gateway either
/// acknowledges them (admitted) or sends GOAWAY (refused).
async fn admitted(socket: &std::path::Path) -> Result<Peer, Frame> {
    admitted_after(socket, Duration::ZERO).await
}

/// [`admitted`] for a client that sends its preface `delay` after connecting.
async fn admitted_after(socket: &std::path::Path, delay: Duration) -> Result<Peer, Frame> {
    let mut p = Peer::open_after(socket, &[], delay).await;
    loop {
        match p.next().await {
            Some(f) if f.kind == GOAWAY => {
                assert!(
                    p.until_closed(Duration::from_secs(5)).await,
                    "refused but not closed: {:?}",
                    p.seen
                );
                return Err(f);
            }
            Some(f) if f.kind == SETTINGS && f.flags & ACK != 0 => return Ok(p),
            Some(f) if f.kind == SETTINGS => p.send(&frame(SETTINGS, ACK, 0, &[])).await,
            Some(_) => {}
            None => panic!("neither admitted nor refused: {:?}", p.seen),
        }
    }
}

/// A stream opened and never finished kept a connection from ever being idle. A client that
/// sends no part of a request for `idle_timeout` with one unfinished has stalled — silent, or
/// sending only PINGs: that stream is reset (CANCEL) and the connection asked to go away, so it
/// closes. A call whose request is whole and whose plugin is slow is not cut. Spliced front.
#[tokio::test]
async fn a_request_never_finished_does_not_hold_the_connection() {
    let backend = Backend::start(Options::new("v1")).await;
    let dir = tempfile::tempdir().unwrap();
    let flag = config(dir.path(), "idle_timeout = \"1s\"");
    let gw = Gateway::start(&backend.socket, "v0.1", &[&flag]).await;

    let mut p = Peer::connect(&gw.socket).await;
    let mut out = frame(HEADERS, END_HEADERS, 1, &request_block(&[], PROBE, &[]));
    out.extend_from_slice(&frame(DATA, 0, 1, &[0, 0, 0, 0, 9])); // 9 bytes promised, none sent
    p.send(&out).await;
    let sent = Instant::now();
    assert!(
        p.until_closed(Duration::from_secs(10)).await,
        "{:?}",
        p.seen
    );
    let after = sent.elapsed();
    assert!(
        after >= Duration::from_millis(900) && after < Duration::from_secs(5),
        "closed after {after:?}, the limit being 1 s"
    );
    let reset = p
        .seen
        .iter()
        .find(|f| f.kind == RST_STREAM && f.stream == 1);
    assert_eq!(reset.map(Frame::code), Some(CANCEL), "{:?}", p.seen);
    assert!(p.seen.iter().any(|f| f.kind == GOAWAY), "{:?}", p.seen);

    // Nor does a client that keeps the connection busy with PINGs while its request makes no
    // progress: PINGs are not part of a request.
    let mut p = Peer::connect(&gw.socket).await;
    p.send(&out).await;
    let sent = Instant::now();
    let mut pings = 0;
    while !p.closed && sent.elapsed() < Duration::from_secs(10) {
        p.send(&frame(PING, 0, 0, &[7; 8])).await;
        pings += 1;
        let next = Instant::now() + Duration::from_millis(200);
        while !p.closed && Instant::now() < next {
            p.next_within(next.saturating_duration_since(Instant::now()))
                .await;
        }
    }
    let after = sent.elapsed();
    assert!(
        p.closed && after >= Duration::from_millis(900) && after < Duration::from_secs(5),
        "pinging: closed {} after {after:?} and {pings} PINGs, the limit being 1 s",
        p.closed,
    );
    let reset = p
        .seen
        .iter()
        .find(|f| f.kind == RST_STREAM && f.stream == 1);
    assert_eq!(reset.map(Frame::code), Some(CANCEL), "{:?}", p.seen);

    // A whole request waiting on a slow plugin is not a stalled one.
    let mut p = Peer::connect(&gw.socket).await;
    p.call(1, &request_block(&[], PROBE, &[]), &[]).await;
    expect_ok(&mut p, 1, "before").await;
    backend.pause();
    p.call(3, &request_block(&[], PROBE, &[]), &[]).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    backend.resume();
    expect_ok(&mut p, 3, "a slow plugin").await;
    assert!(!p.seen.iter().any(|f| f.kind == RST_STREAM), "{:?}", p.seen);
}

/// A connection admitted, on which a call is completed (a connection that never completed one
/// gives way to a new client when every slot is taken).
async fn admitted_and_served(socket: &std::path::Path, name: &str) -> Peer {
    let mut p = admitted(socket)
        .await
        .unwrap_or_else(|g| panic!("{name}: refused under the limit: {g:?}"));
    p.call(1, &request_block(&[], PROBE, &[]), &[]).await;
    expect_ok(&mut p, 1, name).await;
    p
}

/// Past `max_connections`, every connection having finished a request, a connection gets
/// SETTINGS and GOAWAY ENHANCE_YOUR_CALM naming stream 0, and is closed; once a connection
/// closes, a new one is served.
#[tokio::test]
async fn connections_past_the_limit_are_refused_with_goaway() {
    let backend = Backend::start(Options::new("v1")).await;
    let paths = paths(&backend, "max_connections = 3").await;
    for (name, gw) in &paths.gateways {
        let mut open = Vec::new();
        for _ in 0..3 {
            open.push(admitted_and_served(&gw.socket, name).await);
        }
        // Told why, whether the client's preface comes before the refusal or after it (it
        // may not meet a closed socket).
        for delay in [Duration::ZERO, Duration::from_millis(300)] {
            match admitted_after(&gw.socket, delay).await {
                Ok(_) => panic!("{name}: a fourth connection was served"),
                Err(g) => assert_eq!(
                    (g.code(), g.last_stream()),
                    (ENHANCE_YOUR_CALM, 0),
                    "{name}, preface after {delay:?}: {g:?}"
                ),
            }
        }
        // The ones admitted still work.
        let mut first = open.remove(0);
        first.call(3, &request_block(&[], PROBE, &[]), &[]).await;
        expect_ok(&mut first, 3, name).await;
        drop(first);
        // One closed: a new connection is served (once the gateway noticed the close).
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut p = loop {
            match admitted(&gw.socket).await {
                Ok(p) => break p,
                Err(g) => assert!(
                    Instant::now() < deadline,
                    "{name}: still refused after one closed: {g:?}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        p.call(1, &request_block(&[], PROBE, &[]), &[]).await;
        expect_ok(&mut p, 1, name).await;
    }
}

/// A HEADERS without END_HEADERS whose CONTINUATION never comes: after
/// `header_block_timeout`, GOAWAY PROTOCOL_ERROR and the connection is closed.
#[tokio::test]
async fn an_unfinished_header_block_ends_the_connection() {
    let backend = Backend::start(Options::new("v1")).await;
    let paths = paths(&backend, "header_block_timeout = \"1s\"").await;
    for (name, gw) in &paths.gateways {
        let mut p = Peer::connect(&gw.socket).await;
        let block = request_block(&[], PROBE, &[]);
        p.send(&frame(HEADERS, 0, 1, &block[..block.len() / 2]))
            .await;
        let sent = Instant::now();
        header_block_timed_out(&mut p, sent, name).await;

        // A block finished in time is served.
        let mut p = Peer::connect(&gw.socket).await;
        let (head, tail) = block.split_at(block.len() / 2);
        p.send(&frame(HEADERS, 0, 1, head)).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut rest = frame(CONTINUATION, END_HEADERS, 1, tail);
        rest.extend_from_slice(&frame(DATA, END_STREAM, 1, &message(&[])));
        p.send(&rest).await;
        expect_ok(&mut p, 1, name).await;
    }
}

/// The connection ended with GOAWAY PROTOCOL_ERROR about a second after `sent` (the
/// `header_block_timeout` of these tests), and was closed.
async fn header_block_timed_out(p: &mut Peer, sent: Instant, name: &str) {
    let g = p
        .goaway()
        .await
        .unwrap_or_else(|| panic!("{name}: no GOAWAY: {:?}", p.seen));
    let after = sent.elapsed();
    assert_eq!(g.code(), PROTOCOL_ERROR, "{name}: {g:?}");
    assert!(
        after >= Duration::from_millis(900) && after < Duration::from_secs(5),
        "{name}: GOAWAY after {after:?}, the limit being 1 s"
    );
    assert!(p.closed, "{name}: the connection was not closed");
}

/// A single HEADERS frame, END_HEADERS and all, trickled a few bytes at a time: its block is
/// begun at the frame's first byte, so it too ends the connection after
/// `header_block_timeout` (GOAWAY PROTOCOL_ERROR), on every path; one trickled within the
/// limit is served.
#[tokio::test]
async fn a_trickled_header_frame_ends_the_connection() {
    let backend = Backend::start(Options::new("v1")).await;
    let paths = paths(&backend, "header_block_timeout = \"1s\"").await;
    // ~200 bytes of headers at 20 bytes every 250 ms: 2.5 s for the frame.
    let padding = "p".repeat(120);
    let block = request_block(&[], PROBE, &[("x-padding", padding.as_str())]);
    let bytes = frame(HEADERS, END_HEADERS, 1, &block);
    for (name, gw) in &paths.gateways {
        let mut p = Peer::connect(&gw.socket).await;
        let sent = Instant::now();
        for piece in bytes.chunks(20) {
            p.send(piece).await;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        header_block_timed_out(&mut p, sent, name).await;

        // The same frame in pieces over 0.5 s is served, and so is the next call.
        let mut p = Peer::connect(&gw.socket).await;
        for piece in bytes.chunks(bytes.len() / 4 + 1) {
            p.send(piece).await;
            tokio::time::sleep(Duration::from_millis(125)).await;
        }
        p.send(&frame(DATA, END_STREAM, 1, &message(&[]))).await;
        expect_ok(&mut p, 1, name).await;
        tokio::time::sleep(Duration::from_millis(1200)).await;
        p.call(3, &request_block(&[], PROBE, &[]), &[]).await;
        expect_ok(&mut p, 3, name).await;
    }
}

/// A DATA frame trickled a few bytes at a time, on a stream whose head came whole: a frame of
/// any kind is timed from its first byte, so the connection ends after
/// `header_block_timeout` (GOAWAY PROTOCOL_ERROR) however steadily the bytes come, on every
/// path; one trickled within the limit is served.
#[tokio::test]
async fn a_trickled_data_frame_ends_the_connection() {
    let backend = Backend::start(Options::new("v1")).await;
    let paths = paths(&backend, "header_block_timeout = \"1s\"").await;
    // Probe's request with an unknown field (number 99, 31 bytes), which a plugin skips: a
    // 48-byte frame at 8 bytes every 250 ms takes 1.5 s.
    let mut unknown = vec![0x9a, 0x06, 31];
    unknown.extend([b'x'; 31]);
    let data = frame(DATA, END_STREAM, 1, &message(&unknown));
    let head = frame(HEADERS, END_HEADERS, 1, &request_block(&[], PROBE, &[]));
    for (name, gw) in &paths.gateways {
        let mut p = Peer::connect(&gw.socket).await;
        p.send(&head).await;
        let sent = Instant::now();
        for piece in data.chunks(8) {
            p.send(piece).await;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        header_block_timed_out(&mut p, sent, name).await;

        // The same frame in pieces over 0.5 s is served.
        let mut p = Peer::connect(&gw.socket).await;
        p.send(&head).await;
        for piece in data.chunks(data.len() / 4 + 1) {
            p.send(piece).await;
            tokio::time::sleep(Duration::from_millis(125)).await;
        }
        expect_ok(&mut p, 1, name).await;
    }
}

/// `max_concurrent_streams` is advertised, and a stream past it gets RST_STREAM
/// REFUSED_STREAM; once a stream ends, a new one is served.
#[tokio::test]
async fn streams_past_the_limit_are_refused() {
    let backend = Backend::start(Options::new("v1")).await;
    let paths = paths(&backend, "max_concurrent_streams = 2").await;
    for (name, gw) in &paths.gateways {
        let mut p = Peer::connect(&gw.socket).await;
        let advertised = p.server_settings.iter().find(|(id, _)| *id == 0x3);
        assert_eq!(
            advertised,
            Some(&(0x3, 2)),
            "{name}: {:?}",
            p.server_settings
        );
        let block = request_block(&[], PROBE, &[]);
        // Two calls open (their requests not finished), then a third.
        for stream in [1, 3, 5] {
            p.send(&frame(HEADERS, END_HEADERS, stream, &block)).await;
        }
        let r = p.reply(5).await;
        assert_eq!(r.reset, Some(REFUSED_STREAM), "{name}: {r:?}");
        for stream in [1, 3] {
            p.send(&frame(DATA, END_STREAM, stream, &message(&[])))
                .await;
            expect_ok(&mut p, stream, name).await;
        }
        p.call(7, &block, &[]).await;
        expect_ok(&mut p, 7, name).await;
    }
}

/// More than `max_resets_per_second` resets in a second get GOAWAY ENHANCE_YOUR_CALM — calls
/// the gateway had already started counted too — and fewer do not.
#[tokio::test]
async fn resets_past_the_rate_get_enhance_your_calm() {
    let backend = Backend::start(Options::new("v1")).await;
    let paths = paths(&backend, "max_resets_per_second = 10").await;
    for (name, gw) in &paths.gateways {
        let block = request_block(&[], PROBE, &[]);
        // Each call started (its request read by the gateway) before it is reset.
        async fn reset_calls(p: &mut Peer, block: &[u8], count: u32) {
            for i in 0..count {
                let id = 1 + 2 * i;
                p.send(&frame(HEADERS, END_HEADERS, id, block)).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
                p.send(&frame(RST_STREAM, 0, id, &CANCEL.to_be_bytes()))
                    .await;
            }
        }
        let mut p = Peer::connect(&gw.socket).await;
        reset_calls(&mut p, &block, 8).await;
        p.call(17, &block, &[]).await;
        expect_ok(&mut p, 17, &format!("{name}: after 8 resets")).await;
        assert!(
            !p.seen.iter().any(|f| f.kind == GOAWAY),
            "{name}: {:?}",
            p.seen
        );

        let mut p = Peer::connect(&gw.socket).await;
        reset_calls(&mut p, &block, 14).await;
        let g = p
            .goaway()
            .await
            .unwrap_or_else(|| panic!("{name}: no GOAWAY after 14 resets: {:?}", p.seen));
        assert_eq!(g.code(), ENHANCE_YOUR_CALM, "{name}: {g:?}");
    }
}

/// The reset budget is the gateway's, not one connection's: a client that spreads its resets
/// over four connections, each under `max_resets_per_second`, is told to calm down all the
/// same.
#[tokio::test]
async fn resets_spread_over_connections_share_one_budget() {
    let backend = Backend::start(Options::new("v1")).await;
    let dir = tempfile::tempdir().unwrap();
    let flag = config(dir.path(), "max_resets_per_second = 10");
    let gw = Gateway::start(&backend.socket, "v0.1", &[&flag]).await;
    let block = request_block(&[], PROBE, &[]);
    let mut peers = Vec::new();
    for _ in 0..4 {
        peers.push(Peer::connect(&gw.socket).await);
    }
    // 4 × 6 = 24 resets within a second, 6 on each connection.
    for i in 0..6u32 {
        let id = 1 + 2 * i;
        for p in &mut peers {
            p.send(&frame(HEADERS, END_HEADERS, id, &block)).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        for p in &mut peers {
            p.send(&frame(RST_STREAM, 0, id, &CANCEL.to_be_bytes()))
                .await;
        }
    }
    let mut calmed = 0;
    for p in &mut peers {
        while let Some(f) = p.next_within(Duration::from_millis(500)).await {
            if f.kind == GOAWAY {
                assert_eq!(f.code(), ENHANCE_YOUR_CALM, "{f:?}");
                calmed += 1;
                break;
            }
        }
    }
    assert!(
        calmed >= 1,
        "24 resets over 4 connections, none told to calm down\n{}",
        gw.log_text()
    );
}

/// A gRPC client resets the calls it gave up on at their deadline: 15 calls to a plugin that
/// does not answer, expiring together, are no rapid reset, though more than the budget of 10.
/// The connection is not told to calm down, and serves on. (15: the reference plugin's own h2
/// closes its connection past 20 resets of streams it has not yet accepted.)
#[tokio::test]
async fn resets_at_a_calls_deadline_are_not_counted() {
    let backend = Backend::start(Options::new("v1")).await;
    let dir = tempfile::tempdir().unwrap();
    let flag = config(dir.path(), "max_resets_per_second = 10");
    let gw = Gateway::start(&backend.socket, "v0.1", &[&flag]).await;
    let mut p = Peer::connect(&gw.socket).await;
    // The connection's own to the plugin is up before the plugin stops answering.
    p.call(1, &request_block(&[], PROBE, &[]), &[]).await;
    expect_ok(&mut p, 1, "before").await;
    let block = request_block(&[], PROBE, &[("grpc-timeout", "300m")]);
    backend.pause();
    let ids: Vec<u32> = (1..16u32).map(|i| 1 + 2 * i).collect();
    for &id in &ids {
        p.call(id, &block, &[]).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for &id in &ids {
        p.send(&frame(RST_STREAM, 0, id, &CANCEL.to_be_bytes()))
            .await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    backend.resume();
    p.call(33, &request_block(&[], PROBE, &[]), &[]).await;
    expect_ok(
        &mut p,
        33,
        &format!("after 15 calls expired\n{}", gw.log_text()),
    )
    .await;
    assert!(
        !p.seen.iter().any(|f| f.kind == GOAWAY),
        "deadline expiries counted as resets: {:?}\n{}",
        p.seen
            .iter()
            .filter(|f| f.kind == GOAWAY)
            .collect::<Vec<_>>(),
        gw.log_text()
    );
}

/// Connections, half holding an unfinished 15 KB header block and half a translated call
/// with 60 KB of its message sent (within the 64 KiB default window, never acknowledged
/// by the message's end): the gateway's resident memory grows by less than
/// `PER_CONNECTION` for each.
#[tokio::test]
async fn memory_per_connection_is_bounded() {
    const CONNECTIONS: u32 = 200;
    /// 60 KB of body or 15 KB of block, plus what a connection costs: the client's and the
    /// upstream connection's buffers and HPACK tables.
    const PER_CONNECTION_KIB: u64 = 256;
    let backend = Backend::start(Options::new("v1")).await;
    let paths = paths(&backend, "header_block_timeout = \"60s\"").await;
    for (name, gw) in &paths.gateways {
        // Warm up: a few connections and calls, so that what is allocated once is.
        for _ in 0..4 {
            let mut p = Peer::connect(&gw.socket).await;
            p.call(1, &request_block(&[], PROBE, &[]), &[]).await;
            expect_ok(&mut p, 1, name).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = support::rss_kib(gw.pid());
        let mut held = Vec::new();
        for i in 0..CONNECTIONS {
            let mut p = Peer::connect(&gw.socket).await;
            if i % 2 == 0 {
                let block = request_block(&[], PROBE, &[("x-pad", &"p".repeat(15_000))]);
                p.send(&frame(HEADERS, 0, 1, &block)).await;
            } else {
                // A v0.3 call, which the gateway reads itself; its message declares 1 MB.
                let block = request_block(&[], "/csi.v0.Controller/CreateVolume", &[]);
                let mut body = vec![0];
                body.extend_from_slice(&(1u32 << 20).to_be_bytes());
                body.extend(std::iter::repeat_n(0x0a, 60_000 - 5));
                let mut out = frame(HEADERS, END_HEADERS, 1, &block);
                for chunk in body.chunks(16_384) {
                    out.extend_from_slice(&frame(DATA, 0, 1, chunk));
                }
                p.send(&out).await;
            }
            held.push(p);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let after = support::rss_kib(gw.pid());
        let per = after.saturating_sub(before) / CONNECTIONS as u64;
        println!(
            "{name}: VmRSS {before} KiB -> {after} KiB with {CONNECTIONS} connections: {per} KiB each"
        );
        assert!(
            per < PER_CONNECTION_KIB,
            "{name}: {per} KiB per connection (VmRSS {before} -> {after} KiB)"
        );
        // Still serving.
        let mut p = Peer::connect(&gw.socket).await;
        p.call(1, &request_block(&[], PROBE, &[]), &[]).await;
        expect_ok(&mut p, 1, name).await;
    }
}

/// The open-files limit bounds connections too: each holds two descriptors (the client's and
/// its own to the plugin). The gateway raises its soft limit to the hard one at start, and
/// lowers `max_connections` to what the hard one holds, so that past it a client is refused
/// politely (GOAWAY) rather than every accept failing with EMFILE; and once connections close,
/// new ones are served.
#[tokio::test]
async fn max_connections_fits_the_open_files_limit() {
    let backend = Backend::start(Options::new("v1")).await;
    // A soft limit below the hard one is raised: 1024 connections need ~2,112 descriptors.
    let raised = Gateway::start_through(
        &["prlimit", "--nofile=256:4096"],
        &backend.socket,
        "v0.1",
        &[],
    )
    .await;
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", raised.pid())).unwrap();
    let nofile = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let values: Vec<&str> = nofile.split_whitespace().skip(3).take(2).collect();
    assert_eq!(values, ["4096", "4096"], "{nofile}");
    assert!(
        !raised.log_text().contains("max_connections lowered"),
        "{}",
        raised.log_text()
    );
    drop(raised);

    // A hard limit of 200 holds (200 - 64) / 2 = 68 connections.
    let gw = Gateway::start_through(
        &["prlimit", "--nofile=200:200"],
        &backend.socket,
        "v0.1",
        &[],
    )
    .await;
    let log = gw.log_text();
    assert!(
        log.contains("max_connections lowered") && log.contains("effective=68"),
        "{log}"
    );
    let mut held = Vec::new();
    for i in 0..68 {
        held.push(admitted_and_served(&gw.socket, &format!("connection {i}")).await);
    }
    let Err(refused) = admitted(&gw.socket).await else {
        panic!("the 69th connection was admitted");
    };
    assert_eq!(refused.code(), ENHANCE_YOUR_CALM);
    held.truncate(60);
    // The gateway notices closed connections as it reads them.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut p = loop {
        match admitted(&gw.socket).await {
            Ok(p) => break p,
            Err(g) => assert!(Instant::now() < deadline, "still refused: {g:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    p.call(1, &request_block(&[], PROBE, &[]), &[]).await;
    let reply = p.reply(1).await;
    assert_eq!(
        reply.get("grpc-status"),
        Some("0"),
        "{reply:?}\n{}",
        gw.log_text()
    );
    assert!(
        !gw.log_text().contains("Too many open files"),
        "{}",
        gw.log_text()
    );
}

/// Resident memory once it has stopped growing: sampled every 500 ms until two samples in a
/// row differ by less than 1 MiB (or 60 s passed).
async fn settled_rss_kib(pid: u32) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = support::rss_kib(pid);
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = support::rss_kib(pid);
        if now.abs_diff(last) < 1024 || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

/// Clients that send most of a large message and never finish it — 100 connections, 20 calls
/// each that the gateway reads itself (a v0.3 CreateVolume to a v1 plugin), each with 1 MiB
/// sent of a message that declares 4 MiB — hold no more of the gateway's memory than
/// `max_buffered_bytes` and what each connection was granted before it ran out: past the
/// budget the gateway grants no more window, and a client that obeys flow control (h2's) sends
/// no more. With a budget of 32 MiB instead of the default 256 MiB the gateway holds about
/// that much less. Once they close, the memory is given back. Spliced front.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfinished_requests_are_held_within_the_buffer_budget() {
    /// Past the budget, each connection: the connection window the plugin grants (1 MiB,
    /// tonic's), its streams' bodies rounded up as they grow, and its own buffers.
    const PER_CONNECTION_MIB: u64 = 2;
    /// What the gateway may keep once they closed.
    const KEPT_MIB: u64 = 64;
    let backend = Backend::start(Options::new("v1")).await;
    let dir = tempfile::tempdir().unwrap();
    let small = config(dir.path(), "max_buffered_bytes = 33554432");
    let mut grown = Vec::new();
    for (budget_mib, flags) in [(256, vec![]), (32, vec![small.as_str()])] {
        let gw = Gateway::start(&backend.socket, "v0.1", &flags).await;
        let (held, kept) = flood_of_unfinished_requests(&gw).await;
        println!(
            "max_buffered_bytes {budget_mib} MiB: +{held} MiB held, +{kept} MiB kept once closed"
        );
        assert!(
            held < budget_mib + FLOOD_CONNECTIONS as u64 * PER_CONNECTION_MIB,
            "budget {budget_mib} MiB: {FLOOD_CONNECTIONS} connections grew the gateway by {held} MiB"
        );
        assert!(
            kept < KEPT_MIB,
            "budget {budget_mib} MiB: {kept} MiB kept after the connections closed"
        );
        grown.push(held);
    }
    assert!(
        grown[0] > grown[1] + 150,
        "a budget 224 MiB smaller held {} MiB instead of {} MiB",
        grown[1],
        grown[0]
    );
}

/// The same flood on unattached connections, whose calls the gateway reads whole itself: their
/// requests count against the same budget, and the client is given back window for them only
/// while there is room, so the gateway holds the budget plus, per connection, the window it
/// granted (the RFC's 64 KiB).
#[tokio::test]
async fn unfinished_requests_on_unattached_connections_are_held_within_the_buffer_budget() {
    /// Past the budget, each connection: the window granted, its streams' bodies rounded up as
    /// they grow, and its own buffers.
    const PER_CONNECTION_MIB: u64 = 3;
    const KEPT_MIB: u64 = 64;
    let backend = Backend::start(Options::new("v1")).await;
    let dir = tempfile::tempdir().unwrap();
    let small = config(dir.path(), "max_buffered_bytes = 33554432");
    let mut grown = Vec::new();
    for (budget_mib, flags) in [(256, vec![]), (32, vec![small.as_str()])] {
        let gw = Gateway::start_unattached(&backend.socket, "v0.1", &flags).await;
        let (held, kept) = flood_of_unfinished_requests(&gw).await;
        println!(
            "unattached, max_buffered_bytes {budget_mib} MiB: +{held} MiB held, +{kept} MiB kept once closed"
        );
        assert!(
            held < budget_mib + FLOOD_CONNECTIONS as u64 * PER_CONNECTION_MIB,
            "budget {budget_mib} MiB: {FLOOD_CONNECTIONS} connections grew the gateway by {held} MiB"
        );
        assert!(
            kept < KEPT_MIB,
            "budget {budget_mib} MiB: {kept} MiB kept after the connections closed"
        );
        grown.push(held);
    }
    assert!(
        grown[0] > grown[1] + 150,
        "a budget 224 MiB smaller held {} MiB instead of {} MiB",
        grown[1],
        grown[0]
    );
}

const FLOOD_CONNECTIONS: usize = 100;

/// The flood of [`unfinished_requests_are_held_within_the_buffer_budget`] on `gw`: how much its
/// resident memory grew (MiB) while the connections held their requests, and how much of that
/// it kept once they closed. A call is served meanwhile.
async fn flood_of_unfinished_requests(gw: &Gateway) -> (u64, u64) {
    const STREAMS: usize = 20;
    const SENT: usize = 1 << 20;
    let mut p = Peer::connect(&gw.socket).await;
    p.call(1, &request_block(&[], PROBE, &[]), &[]).await;
    expect_ok(&mut p, 1, "warm-up").await;
    let before = settled_rss_kib(gw.pid()).await;

    let mut body = vec![0];
    body.extend_from_slice(&(4u32 << 20).to_be_bytes());
    body.resize(SENT, 0x0a);
    let body = bytes::Bytes::from(body);
    let mut held = Vec::new();
    for _ in 0..FLOOD_CONNECTIONS {
        let io = tokio::net::UnixStream::connect(&gw.socket).await.unwrap();
        let (client, connection) = h2::client::handshake(io).await.unwrap();
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut client = client.ready().await.unwrap();
        let mut streams = Vec::new();
        for _ in 0..STREAMS {
            let request = http::Request::post("http://gateway/csi.v0.Controller/CreateVolume")
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(())
                .unwrap();
            let (reply, mut send) = client.send_request(request, false).unwrap();
            // Buffered by h2, sent as the gateway's windows allow.
            send.send_data(body.clone(), false).unwrap();
            streams.push((reply, send));
            client = client.ready().await.unwrap();
        }
        held.push((client, streams, driver));
    }
    let during = settled_rss_kib(gw.pid()).await;
    println!(
        "VmRSS {before} KiB -> {during} KiB with {FLOOD_CONNECTIONS} connections x {STREAMS} unfinished 1 MiB requests"
    );
    // Served all the same: a call that needs no buffer.
    let mut q = Peer::connect(&gw.socket).await;
    q.call(1, &request_block(&[], PROBE, &[]), &[]).await;
    expect_ok(&mut q, 1, "while the budget is used").await;

    for (_, _, driver) in &held {
        driver.abort();
    }
    drop(held);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = settled_rss_kib(gw.pid()).await;
    println!("VmRSS {after} KiB once they closed");
    (
        during.saturating_sub(before) / 1024,
        after.saturating_sub(before) / 1024,
    )
}

/// Whether the gateway closed `io`: read (and dropped) until its end, or nothing came for
/// `wait`.
async fn closed_within(io: &mut tokio::net::UnixStream, wait: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut sink = [0u8; 4096];
    loop {
        match tokio::time::timeout(wait, io.read(&mut sink)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}

/// Every slot taken by connections on which no call was ever completed — silent after their
/// preface, or silent altogether, 40 of them for 20 slots —, a new client is still served: the
/// oldest such connection gives way (it is closed). A connection that completed a call keeps
/// its slot through the flood. Both paths.
#[tokio::test]
async fn silent_connections_give_way_to_a_new_client() {
    const SLOTS: usize = 20;
    const FLOOD: usize = 40;
    let backend = Backend::start(Options::new("v1")).await;
    let paths = paths(&backend, &format!("max_connections = {SLOTS}")).await;
    for (name, gw) in &paths.gateways {
        let mut served = admitted_and_served(&gw.socket, name).await;
        let mut flood = Vec::new();
        for i in 0..FLOOD {
            let mut io = tokio::net::UnixStream::connect(&gw.socket).await.unwrap();
            if i % 2 == 0 {
                let mut preface = PREFACE.to_vec();
                preface.extend_from_slice(&settings(&[]));
                tokio::io::AsyncWriteExt::write_all(&mut io, &preface)
                    .await
                    .unwrap();
            }
            flood.push(io);
        }
        let mut p = admitted(&gw.socket).await.unwrap_or_else(|g| {
            panic!("{name}: a new client refused after a flood of silent connections: {g:?}")
        });
        p.call(1, &request_block(&[], PROBE, &[]), &[]).await;
        expect_ok(&mut p, 1, &format!("{name}: the new client")).await;
        served.call(3, &request_block(&[], PROBE, &[]), &[]).await;
        expect_ok(
            &mut served,
            3,
            &format!("{name}: the one that had completed a call"),
        )
        .await;
        // The slots left are the two served clients' and the newest of the flood's.
        let mut closed = 0;
        for io in &mut flood {
            closed += closed_within(io, Duration::from_millis(200)).await as usize;
        }
        assert_eq!(
            closed,
            FLOOD + 1 - (SLOTS - 1),
            "{name}: flood connections closed"
        );
    }
}

/// The grpc-status of a reply h2 received: in its trailers, or its headers (trailers-only).
async fn grpc_status(reply: h2::client::ResponseFuture) -> Option<String> {
    let reply = reply.await.ok()?;
    let status = |h: &http::HeaderMap| {
        h.get("grpc-status")
            .map(|v| v.to_str().unwrap_or_default().to_string())
    };
    if let Some(s) = status(reply.headers()) {
        return Some(s);
    }
    let mut body = reply.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.ok()?;
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    status(&body.trailers().await.ok()??)
}

/// Requests that wait for each other's room — three whole messages of almost 4 MiB at once on
/// one connection, which may buffer 8 MiB, sent a frame of each in turn within the windows —
/// are not left waiting until the idle timeout: after 10 s without room the largest is
/// answered RESOURCE_EXHAUSTED and its bytes let go, and the others are finished and go on.
/// Both states a connection starts in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_waiting_for_room_are_answered() {
    let backend = Backend::start(Options::new("v1")).await;
    for path in FrontPath::BOTH {
        let gw = path.start(&backend.socket, "v0.1", &[]).await;
        let statuses = three_requests_waiting_for_room(&gw).await;
        println!("{path:?}: grpc-status of the three requests: {statuses:?}");
        let refused = statuses.iter().filter(|s| *s == "8").count();
        assert_eq!(
            refused, 1,
            "{path:?}: one of three refused for room, the others answered by the plugin: {statuses:?}"
        );
    }
}

/// The three requests of [`requests_waiting_for_room_are_answered`] on `gw`: their grpc-status.
async fn three_requests_waiting_for_room(gw: &Gateway) -> Vec<String> {
    const PIECE: usize = 16 * 1024;
    let io = tokio::net::UnixStream::connect(&gw.socket).await.unwrap();
    let (client, connection) = h2::client::handshake(io).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let len = (4 << 20) - 1024;
    let mut body = vec![0];
    body.extend_from_slice(&(len as u32).to_be_bytes());
    body.resize(5 + len, 0x0a);
    let body = bytes::Bytes::from(body);
    let mut client = client.ready().await.unwrap();
    let (mut replies, mut sends) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let request = http::Request::post("http://gateway/csi.v0.Controller/CreateVolume")
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let (reply, send) = client.send_request(request, false).unwrap();
        replies.push(tokio::spawn(grpc_status(reply)));
        sends.push(Some(send));
        client = client.ready().await.unwrap();
    }
    // A piece of each in turn, each once the windows allow it: the three grow together.
    let sending = async {
        for at in (0..body.len()).step_by(PIECE) {
            let piece = body.slice(at..(at + PIECE).min(body.len()));
            let last = at + PIECE >= body.len();
            for slot in &mut sends {
                let Some(send) = slot else { continue };
                send.reserve_capacity(piece.len());
                let granted = loop {
                    match std::future::poll_fn(|cx| send.poll_capacity(cx)).await {
                        Some(Ok(n)) if n >= piece.len() => break true,
                        Some(Ok(_)) => {}
                        _ => break false, // reset: answered already
                    }
                };
                if !granted || send.send_data(piece.clone(), last).is_err() {
                    *slot = None;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), sending)
        .await
        .unwrap_or_else(|_| panic!("the requests still not sent after 60 s\n{}", gw.log_text()));
    let mut statuses = Vec::new();
    for reply in replies {
        let status = tokio::time::timeout(Duration::from_secs(30), reply)
            .await
            .unwrap_or_else(|_| panic!("a request still unanswered after 30 s\n{}", gw.log_text()))
            .unwrap();
        statuses.push(status.expect("a reply with a grpc-status"));
    }
    statuses
}

/// An h2 client connection to `gw` with `calls` calls (v0.3 CreateVolume, which the gateway
/// reads whole), each sending `sent` bytes of a message of `declared` bytes, ended if they are
/// equal; with the grpc-status of each, and the connection's task.
async fn h2_calls(
    gw: &Gateway,
    calls: usize,
    declared: usize,
    sent: usize,
) -> (
    h2::client::SendRequest<bytes::Bytes>,
    Vec<h2::SendStream<bytes::Bytes>>,
    Vec<tokio::task::JoinHandle<Option<String>>>,
    tokio::task::JoinHandle<()>,
) {
    let io = tokio::net::UnixStream::connect(&gw.socket).await.unwrap();
    let (client, connection) = h2::client::handshake(io).await.unwrap();
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut client = client.ready().await.unwrap();
    let mut body = vec![0];
    body.extend_from_slice(&(declared as u32).to_be_bytes());
    body.resize(5 + sent, 0x0a);
    let body = bytes::Bytes::from(body);
    let (mut sends, mut replies) = (Vec::new(), Vec::new());
    for _ in 0..calls {
        let request = http::Request::post("http://gateway/csi.v0.Controller/CreateVolume")
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let (reply, mut send) = client.send_request(request, false).unwrap();
        send.send_data(body.clone(), sent == declared).unwrap();
        sends.push(send);
        replies.push(tokio::spawn(grpc_status(reply)));
        client = client.ready().await.unwrap();
    }
    (client, sends, replies, driver)
}

/// A connection closed for a new client (every slot taken, it never finished a request) gives
/// back the request bytes it held: with a budget of 9 MiB, 7 MiB held by a connection then
/// closed that way do not keep the next 3 MiB request waiting for room. Spliced front.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_closed_for_another_gives_back_what_it_held() {
    let backend = Backend::start(Options::new("v1")).await;
    let dir = tempfile::tempdir().unwrap();
    let flag = config(
        dir.path(),
        "max_connections = 4\nmax_buffered_bytes = 9437184",
    );
    let gw = Gateway::start(&backend.socket, "v0.1", &[&flag]).await;
    // Two calls, 3.5 MiB of 4 MiB each.
    let (_c, _s, _replies, holder) = h2_calls(&gw, 2, 4 << 20, 7 << 19).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Four silent connections: the holder, the oldest, gives way.
    let mut silent = Vec::new();
    for _ in 0..4 {
        silent.push(tokio::net::UnixStream::connect(&gw.socket).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(holder.is_finished(), "the holder's connection still open");
    drop(silent);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let (_c, _s, mut replies, _d) = h2_calls(&gw, 1, 3 << 20, 3 << 20).await;
    let status = tokio::time::timeout(Duration::from_secs(30), replies.remove(0))
        .await
        .expect("answered")
        .unwrap();
    let took = started.elapsed();
    assert!(
        status.as_deref() != Some("8") && took < Duration::from_secs(8),
        "grpc-status {status:?} after {took:?}: the closed connection's bytes still counted\n{}",
        gw.log_text()
    );
}

/// A connection whose first call is in flight — its request whole, its plugin not answering
/// yet — keeps its slot through a flood of silent connections, and gets its answer once the
/// plugin does.
#[tokio::test]
async fn a_first_call_in_flight_keeps_its_slot() {
    let backend = Backend::start(Options::new("v1")).await;
    let dir = tempfile::tempdir().unwrap();
    let flag = config(dir.path(), "max_connections = 4");
    let gw = Gateway::start(&backend.socket, "v0.1", &[&flag]).await;
    // The connection's own to the plugin is up before the plugin stops answering.
    let mut waiting = admitted(&gw.socket).await.unwrap();
    backend.pause();
    waiting.call(1, &request_block(&[], PROBE, &[]), &[]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut flood = Vec::new();
    for _ in 0..8 {
        flood.push(tokio::net::UnixStream::connect(&gw.socket).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    backend.resume();
    expect_ok(&mut waiting, 1, "the call in flight through the flood").await;
}
