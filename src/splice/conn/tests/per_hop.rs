//! The connection-level frames per hop (RFC 9113 §5.4, §6.5, §6.7, §6.8): each side's PINGs
//! answered by the gateway, SETTINGS the gateway's own on each side with the values that
//! govern what passes taken across, the upstream's GOAWAY kept on its hop.

use super::*;

/// What the client and the plugin write from now on, up to the next frame of `kind` on
/// `wire`, read whole.
async fn until(wire: &mut Wire, kind: Kind) -> Vec<(Head, Vec<u8>)> {
    let mut seen = Vec::new();
    loop {
        let (head, payload) = wire.next().await.expect("a frame");
        let done = head.kind == kind;
        seen.push((head, payload));
        if done {
            return seen;
        }
    }
}

#[tokio::test]
async fn the_clients_ping_is_answered_by_the_gateway_and_not_forwarded() {
    let mut s = Spliced::open().await;
    s.client.send(Kind::Ping, 0, 0, b"client!!").await;
    let (h, payload) = s.client.next_of(Kind::Ping).await.unwrap();
    assert!(h.has(frame::ACK));
    assert_eq!(payload, b"client!!");
    // A frame that is forwarded, sent after the PING: the plugin gets it and nothing before.
    s.client
        .send(Kind::WindowUpdate, 0, 0, &10u32.to_be_bytes())
        .await;
    let seen = until(&mut s.plugin, Kind::WindowUpdate).await;
    assert!(
        seen.iter().all(|(h, _)| h.kind != Kind::Ping),
        "the client's PING stays on its hop: {seen:?}"
    );
}

#[tokio::test]
async fn the_plugins_ping_is_answered_by_the_gateway_and_not_passed_on() {
    let mut s = Spliced::open().await;
    s.plugin.send(Kind::Ping, 0, 0, b"plugin!!").await;
    let (h, payload) = s.plugin.next_of(Kind::Ping).await.unwrap();
    assert!(h.has(frame::ACK));
    assert_eq!(payload, b"plugin!!");
    s.plugin
        .send(Kind::WindowUpdate, 0, 0, &10u32.to_be_bytes())
        .await;
    let seen = until(&mut s.client, Kind::WindowUpdate).await;
    assert!(
        seen.iter().all(|(h, _)| h.kind != Kind::Ping),
        "the plugin's PING stays on its hop: {seen:?}"
    );
}

/// The plugin's SETTINGS become the client's server preface: the initial window and frame
/// size taken across, the stream limit the lower of the plugin's and the gateway's, and the
/// gateway's header list limit.
#[tokio::test]
async fn the_plugins_settings_are_taken_across_with_the_gateways_limits() {
    let limits = Limits {
        max_concurrent_streams: 50,
        ..Limits::default()
    };
    let mut s = Spliced::started(Setup {
        limits: limits.clone(),
        ..Setup::default()
    })
    .await;
    s.plugin_answers_settings(&[
        (frame::SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20),
        (frame::SETTINGS_MAX_FRAME_SIZE, 32 * 1024),
        (frame::SETTINGS_MAX_CONCURRENT_STREAMS, 100),
    ])
    .await;
    let (h, payload) = s.client.next().await.unwrap();
    assert_eq!((h.kind, h.flags), (Kind::Settings, 0), "the server preface");
    let values: HashMap<u16, u32> = frame::settings(&payload).collect();
    assert_eq!(
        values.get(&frame::SETTINGS_INITIAL_WINDOW_SIZE),
        Some(&(1 << 20))
    );
    assert_eq!(
        values.get(&frame::SETTINGS_MAX_FRAME_SIZE),
        Some(&(32 * 1024))
    );
    assert_eq!(
        values.get(&frame::SETTINGS_MAX_CONCURRENT_STREAMS),
        Some(&50)
    );
    assert_eq!(
        values.get(&frame::SETTINGS_MAX_HEADER_LIST_SIZE),
        Some(&limits.max_header_list_size)
    );
}

/// The client's SETTINGS go on to the plugin in a SETTINGS of the gateway's: the values that
/// govern what passes (the initial window), push disabled, and not the client's stream limit,
/// which is the gateway's business. The client's ACK waits for the plugin's.
#[tokio::test]
async fn the_clients_settings_go_on_and_are_acknowledged_after_the_plugin_did() {
    let mut s = Spliced::open().await;
    let mut values = BytesMut::new();
    frame::put_settings(
        &mut values,
        &[
            (frame::SETTINGS_INITIAL_WINDOW_SIZE, 12345),
            (frame::SETTINGS_MAX_CONCURRENT_STREAMS, 7),
        ],
    );
    s.client.send_raw(&values).await;
    let (h, payload) = s.plugin.next_of(Kind::Settings).await.unwrap();
    assert_eq!(h.flags, 0);
    let got: HashMap<u16, u32> = frame::settings(&payload).collect();
    assert_eq!(got.get(&frame::SETTINGS_INITIAL_WINDOW_SIZE), Some(&12345));
    assert_eq!(got.get(&frame::SETTINGS_ENABLE_PUSH), Some(&0));
    assert_eq!(got.get(&frame::SETTINGS_MAX_CONCURRENT_STREAMS), None);
    // No ACK before the plugin's: a PING's ACK comes, and no SETTINGS before it.
    s.client.send(Kind::Ping, 0, 0, b"12345678").await;
    let seen = until(&mut s.client, Kind::Ping).await;
    assert!(
        seen.iter().all(|(h, _)| h.kind != Kind::Settings),
        "{seen:?}"
    );
    s.plugin.send(Kind::Settings, frame::ACK, 0, &[]).await;
    let (h, _) = s.client.next_of(Kind::Settings).await.unwrap();
    assert!(h.has(frame::ACK));
}

/// The plugin's later SETTINGS reach the client as the gateway's, and the plugin gets its ACK
/// once the client acknowledged it.
#[tokio::test]
async fn the_plugins_later_settings_are_acknowledged_once_the_client_did() {
    let mut s = Spliced::open().await;
    let mut values = BytesMut::new();
    frame::put_settings(&mut values, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 4000)]);
    s.plugin.send_raw(&values).await;
    let (h, payload) = s.client.next_of(Kind::Settings).await.unwrap();
    assert_eq!(h.flags, 0);
    let got: HashMap<u16, u32> = frame::settings(&payload).collect();
    assert_eq!(got.get(&frame::SETTINGS_INITIAL_WINDOW_SIZE), Some(&4000));
    s.plugin.send(Kind::Ping, 0, 0, b"12345678").await;
    let seen = until(&mut s.plugin, Kind::Ping).await;
    assert!(
        seen.iter().all(|(h, _)| h.kind != Kind::Settings),
        "{seen:?}"
    );
    s.client.send(Kind::Settings, frame::ACK, 0, &[]).await;
    let (h, _) = s.plugin.next_of(Kind::Settings).await.unwrap();
    assert!(h.has(frame::ACK));
}

/// The plugin's GOAWAY stays on its hop: the client gets the gateway's own (NO_ERROR, the
/// highest id: take the next calls elsewhere), the relayed stream the plugin did not take is
/// refused (REFUSED_STREAM), the one it took still gets its reply.
#[tokio::test]
async fn the_plugins_goaway_is_not_passed_on() {
    let mut s = Spliced::open().await;
    s.probe(1).await;
    s.probe(3).await;
    let mut goaway = BytesMut::new();
    frame::put_goaway(&mut goaway, StreamId::new(1), reason::ENHANCE_YOUR_CALM);
    s.plugin.send_raw(&goaway).await;
    assert_eq!(s.client.reset_of(3).await, reason::REFUSED_STREAM);
    let (h, payload) = s.client.next_of(Kind::GoAway).await.unwrap();
    let (last, why) = frame::goaway(&payload).unwrap();
    assert_eq!(why, reason::NO_ERROR, "not the plugin's code");
    assert_eq!(last, StreamId::MAX, "not the plugin's last stream");
    assert!(h.stream.is_connection());
    s.plugin_replies(1, b"ok").await;
    assert_eq!(field(&s.client.trailers(1).await, "grpc-status"), Some("0"));
}

/// After the plugin's GOAWAY, a new call is not relayed to it: the gateway answers it itself,
/// on its own upstream connection (here the reference backend's Probe).
#[tokio::test]
async fn after_the_plugins_goaway_new_calls_are_answered_by_the_gateway() {
    let mut s = Spliced::open().await;
    s.probe(1).await;
    let mut goaway = BytesMut::new();
    frame::put_goaway(&mut goaway, StreamId::new(1), reason::NO_ERROR);
    s.plugin.send_raw(&goaway).await;
    s.client.next_of(Kind::GoAway).await.unwrap();
    s.client.call(3, "/csi.v1.Identity/Probe", &[]).await;
    let trailers = s.client.trailers(3).await;
    assert_eq!(field(&trailers, "grpc-status"), Some("0"), "{trailers:?}");
    // The plugin still finishes stream 1, and got nothing of stream 3.
    s.plugin_replies(1, &[]).await;
    s.client.trailers(1).await;
    s.plugin.send(Kind::Ping, 0, 0, b"12345678").await;
    let seen = until(&mut s.plugin, Kind::Ping).await;
    assert!(seen.iter().all(|(h, _)| h.stream.get() != 3), "{seen:?}");
}

/// Shutdown: the client gets GOAWAY naming its last stream, that stream still gets its reply
/// from the plugin, and the connection then ends.
#[tokio::test]
async fn shutdown_lets_the_call_in_flight_finish_then_closes() {
    let mut s = Spliced::open().await;
    s.probe(1).await;
    s.client.shutdown.send(true).unwrap();
    let (_, payload) = s.client.next_of(Kind::GoAway).await.unwrap();
    assert_eq!(
        frame::goaway(&payload).unwrap(),
        (StreamId::new(1), reason::NO_ERROR)
    );
    s.plugin_replies(1, b"last").await;
    assert_eq!(field(&s.client.trailers(1).await, "grpc-status"), Some("0"));
    assert!(s.client.closes_within(WAIT).await);
}

/// Extension frames are per hop (RFC 9113 §5.5): dropped, not forwarded.
#[tokio::test]
async fn an_unknown_frame_type_is_dropped_not_forwarded() {
    let mut s = Spliced::open().await;
    s.client.send(Kind::Unknown(0xf0), 0, 0, b"ext").await;
    s.client
        .send(Kind::WindowUpdate, 0, 0, &10u32.to_be_bytes())
        .await;
    let seen = until(&mut s.plugin, Kind::WindowUpdate).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
}

fn keepalive() -> Setup {
    Setup {
        keepalive: Some(Keepalive {
            interval: Duration::from_millis(100),
            timeout: Duration::from_millis(200),
        }),
        ..Setup::default()
    }
}

/// The gateway's keepalive PINGs go to the plugin every interval; answered, they go on, and
/// the plugin's calls with them.
#[tokio::test]
async fn the_gateways_keepalive_pings_the_plugin_every_interval() {
    let mut s = Spliced::open_with(keepalive()).await;
    for _ in 0..2 {
        let (h, payload) = s.plugin.next_of(Kind::Ping).await.unwrap();
        assert_eq!(h.flags, 0);
        s.plugin.send(Kind::Ping, frame::ACK, 0, &payload).await;
    }
    s.probe(1).await;
    s.plugin_replies(1, &[]).await;
    assert_eq!(field(&s.client.trailers(1).await, "grpc-status"), Some("0"));
}

/// A keepalive PING the plugin leaves unanswered for its timeout: the upstream is lost, the
/// call in flight UNAVAILABLE.
#[tokio::test]
async fn an_unanswered_keepalive_ping_is_the_upstream_lost() {
    let mut s = Spliced::open_with(keepalive()).await;
    s.probe(1).await;
    let started = Instant::now();
    s.plugin.next_of(Kind::Ping).await.unwrap();
    let trailers = s.client.trailers(1).await;
    assert_eq!(field(&trailers, "grpc-status"), Some("14"), "{trailers:?}");
    assert!(
        field(&trailers, "grpc-message").is_some_and(|m| m.contains("keepalive")),
        "{trailers:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
}

/// A connection error of the client's: the GOAWAY it gets names the last stream the gateway
/// took (relayed here), and the connection closes.
#[tokio::test]
async fn a_client_connection_error_names_the_last_stream_taken() {
    let mut s = Spliced::open().await;
    s.probe(1).await;
    s.probe(3).await;
    s.client.send(Kind::Data, 0, 0, b"x").await;
    let (_, payload) = s.client.next_of(Kind::GoAway).await.unwrap();
    assert_eq!(
        frame::goaway(&payload).unwrap(),
        (StreamId::new(3), reason::PROTOCOL_ERROR)
    );
    assert!(s.client.closes_within(WAIT).await);
}

/// Past `max_resets_per_second` (the rapid-reset attack), the connection ends: GOAWAY
/// ENHANCE_YOUR_CALM; the plugin's connection closes with it.
#[tokio::test]
async fn too_many_resets_end_the_connection() {
    let mut s = Spliced::with_limits(Limits {
        max_resets_per_second: 2,
        ..Limits::default()
    })
    .await;
    for id in [1, 3, 5, 7] {
        s.client.request(id, "/csi.v1.Identity/Probe", false).await;
        s.client
            .send(Kind::RstStream, 0, id, &reason::CANCEL.to_be_bytes())
            .await;
    }
    let (h, payload) = s.client.next_of(Kind::GoAway).await.unwrap();
    assert_eq!(code(&h, &payload), reason::ENHANCE_YOUR_CALM);
    // The plugin's connection ends with the client's, and every stream on it.
    assert!(s.plugin.closes_within(WAIT).await);
}

/// A spliced connection without a stream for `idle_timeout` is asked to go away (NO_ERROR),
/// naming the last stream it had.
#[tokio::test]
async fn an_idle_connection_is_asked_to_go_away() {
    let mut s = Spliced::with_limits(Limits {
        idle_timeout: Duration::from_millis(200),
        ..Limits::default()
    })
    .await;
    s.probe(1).await;
    s.plugin_replies(1, &[]).await;
    s.client.trailers(1).await;
    let started = Instant::now();
    let (_, payload) = s.client.next_of(Kind::GoAway).await.unwrap();
    assert_eq!(
        frame::goaway(&payload).unwrap(),
        (StreamId::new(1), reason::NO_ERROR)
    );
    assert!(started.elapsed() < Duration::from_secs(3));
}
