//! Flow control (RFC 9113 §6.9) enforced on the client's DATA, and the buffer budget: what
//! the gateway holds for a connection, and the window it withholds while the budget is spent.

use super::*;

/// A connection whose streams start with a window larger than the connection's own.
async fn wide_streams() -> Spliced {
    Spliced::open_with(Setup {
        plugin_settings: vec![(frame::SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20)],
        ..Setup::default()
    })
    .await
}

#[tokio::test]
async fn data_past_the_connection_window_is_a_flow_control_error() {
    let mut s = wide_streams().await;
    s.client.request(1, "/csi.v1.Identity/Probe", false).await;
    s.plugin_request().await;
    // 65,535 octets of connection window: four full frames are one octet past it.
    let chunk = vec![0u8; 16384];
    for _ in 0..4 {
        s.client.send(Kind::Data, 0, 1, &chunk).await;
    }
    let (h, payload) = s.client.next_of(Kind::GoAway).await.unwrap();
    assert_eq!(code(&h, &payload), reason::FLOW_CONTROL_ERROR);
    assert!(s.client.closes_within(WAIT).await);
}

#[tokio::test]
async fn data_within_the_window_the_plugin_granted_passes() {
    let mut s = wide_streams().await;
    s.client.request(1, "/csi.v1.Identity/Probe", false).await;
    s.plugin_request().await;
    s.plugin
        .send(Kind::WindowUpdate, 0, 0, &100_000u32.to_be_bytes())
        .await;
    s.client.next_of(Kind::WindowUpdate).await.unwrap();
    let chunk = vec![0u8; 16384];
    for _ in 0..5 {
        s.client.send(Kind::Data, 0, 1, &chunk).await;
    }
    for _ in 0..5 {
        let (id, data, _) = s.plugin_data().await;
        assert_eq!((id, data.len()), (1, 16384));
    }
}

/// DATA past one stream's window only is a stream error: that stream is reset
/// (FLOW_CONTROL_ERROR), the connection's other calls go on.
#[tokio::test]
async fn data_past_a_streams_window_resets_that_stream_only() {
    let mut s = Spliced::open_with(Setup {
        plugin_settings: vec![(frame::SETTINGS_INITIAL_WINDOW_SIZE, 100)],
        ..Setup::default()
    })
    .await;
    s.client.request(1, "/csi.v1.Identity/Probe", false).await;
    s.plugin_request().await;
    s.client.send(Kind::Data, 0, 1, &[0u8; 101]).await;
    assert_eq!(s.client.next_reset().await, (1, reason::FLOW_CONTROL_ERROR));
    // Reset on the plugin too, and nothing of the DATA reached it.
    s.plugin.reset_of(1).await;
    s.probe(3).await;
    s.plugin_replies(3, &[]).await;
    assert_eq!(field(&s.client.trailers(3).await, "grpc-status"), Some("0"));
}

/// While the gateway's buffer budget is spent (other connections hold it), the plugin's
/// connection WINDOW_UPDATE is not passed on, so the client sends no more; it is granted once
/// there is room again.
#[tokio::test]
async fn a_connection_window_update_waits_while_the_budget_is_spent() {
    let mut s = Spliced::open().await;
    let full = 8 << 20;
    // Another connection's hold, all of the budget.
    let others = s.shared.buffered.reserve(full).expect("nothing held yet");
    s.plugin
        .send(Kind::WindowUpdate, 0, 0, &5000u32.to_be_bytes())
        .await;
    // Once the plugin has its PING's ACK, the WINDOW_UPDATE before it was handled.
    s.plugin.send(Kind::Ping, 0, 0, b"12345678").await;
    s.plugin.next_of(Kind::Ping).await.unwrap();
    s.client.send(Kind::Ping, 0, 0, b"87654321").await;
    loop {
        let (h, _) = s.client.next().await.unwrap();
        assert_ne!(
            h.kind,
            Kind::WindowUpdate,
            "withheld while the budget is spent"
        );
        if h.kind == Kind::Ping {
            break;
        }
    }
    drop(others);
    let (h, payload) = s.client.next_of(Kind::WindowUpdate).await.unwrap();
    assert!(h.stream.is_connection());
    assert_eq!(frame::increment(&payload), Ok(5000));
}

/// A translated call's reply is held whole before it is translated: the gateway's budget
/// counts it while it is held, and has it back once the reply went to the client.
#[tokio::test]
async fn a_translated_reply_is_counted_in_the_budget_while_held_and_given_back() {
    let mut s = Spliced::open().await;
    assert_eq!(s.shared.buffered.used(), 0);
    s.client.call(1, "/csi.v0.Node/NodeGetId", &[]).await;
    let (id, _, _) = s.plugin_request().await;
    s.plugin_data().await;
    s.plugin
        .send(Kind::Headers, frame::END_HEADERS, id, &reply_head())
        .await;
    let reply = h2raw::message(b"\x0a\x06node-1");
    s.plugin.send(Kind::Data, 0, id, &reply).await;
    s.plugin.send(Kind::Ping, 0, 0, b"12345678").await;
    s.plugin.next_of(Kind::Ping).await.unwrap();
    assert_eq!(s.shared.buffered.used(), reply.len(), "the reply held");
    let end = frame::END_HEADERS | frame::END_STREAM;
    s.plugin.send(Kind::Headers, end, id, &ok_trailers()).await;
    assert_eq!(field(&s.client.trailers(1).await, "grpc-status"), Some("0"));
    let given_back = async {
        while s.shared.buffered.used() != 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(WAIT, given_back)
        .await
        .expect("the budget given back");
}
