//! A connection without an upstream connection of its own (`Splice::unattached`), whose
//! plugin is never reached: every answer here is the connection's own, so each rule is seen
//! without a socket or a process.

use super::*;

#[tokio::test]
async fn the_server_preface_is_the_gateways_own_settings_then_the_clients_ack() {
    let mut c = Client::connect().await;
    let (first, _) = c.next().await.unwrap();
    assert_eq!((first.kind, first.flags & frame::ACK), (Kind::Settings, 0));
    let (ack, payload) = c.next_of(Kind::Settings).await.unwrap();
    assert_eq!(ack.flags & frame::ACK, frame::ACK);
    assert!(payload.is_empty());
}

#[tokio::test]
async fn a_ping_is_answered_with_its_payload() {
    let mut c = Client::connect().await;
    c.send(Kind::Ping, 0, 0, b"12345678").await;
    let (head, payload) = c.next_of(Kind::Ping).await.unwrap();
    assert_eq!(head.flags & frame::ACK, frame::ACK);
    assert_eq!(payload, b"12345678");
}

#[tokio::test]
async fn an_unknown_method_is_unimplemented_in_a_trailers_only_reply() {
    let mut c = Client::connect().await;
    c.request(1, "/csi.v9.Nothing/Here", true).await;
    let (head, block) = c.next_of(Kind::Headers).await.unwrap();
    assert_eq!(head.stream.get(), 1);
    assert_ne!(head.flags & frame::END_STREAM, 0, "trailers-only");
    let fields = fields(&block);
    assert_eq!(field(&fields, "grpc-status"), Some("12"), "{fields:?}");
    assert!(
        field(&fields, "grpc-message").is_some_and(|m| m.contains("/csi.v9.Nothing/Here")),
        "{fields:?}"
    );
}

#[tokio::test]
async fn data_on_stream_zero_ends_the_connection_with_a_protocol_error() {
    let mut c = Client::connect().await;
    c.send(Kind::Data, 0, 0, b"x").await;
    let (_, payload) = c.next_of(Kind::GoAway).await.unwrap();
    let code = u32::from_be_bytes(payload[4..8].try_into().unwrap());
    assert_eq!(code, 1, "PROTOCOL_ERROR");
    assert!(
        c.next().await.is_none(),
        "the connection closes after its GOAWAY"
    );
}

#[tokio::test]
async fn a_zero_window_increment_on_the_connection_is_a_protocol_error() {
    let mut c = Client::connect().await;
    c.send(Kind::WindowUpdate, 0, 0, &0u32.to_be_bytes()).await;
    let (_, payload) = c.next_of(Kind::GoAway).await.unwrap();
    let code = u32::from_be_bytes(payload[4..8].try_into().unwrap());
    assert_eq!(code, 1, "PROTOCOL_ERROR (RFC 9113 §6.9)");
}

#[tokio::test]
async fn a_call_while_the_plugin_is_away_is_unavailable_naming_it() {
    let mut c = Client::connect().await;
    c.request(1, "/csi.v1.Identity/Probe", false).await;
    // An empty request message ends the stream.
    c.send(Kind::Data, frame::END_STREAM, 1, &[0, 0, 0, 0, 0])
        .await;
    // The block that ends the stream: the trailers.
    let block = loop {
        let (head, payload) = c.next().await.expect("an answer");
        let ends = head.flags & frame::END_STREAM != 0;
        if head.kind == Kind::Headers && head.stream.get() == 1 && ends {
            break payload;
        }
    };
    let fields = fields(&block);
    assert_eq!(field(&fields, "grpc-status"), Some("14"), "{fields:?}");
    assert!(
        field(&fields, "grpc-message").is_some_and(|m| m.contains("plugin.sock")),
        "{fields:?}"
    );
}

/// RFC 9113 §6.9.1, §6.9.2: no window of a stream the gateway answers may pass 2^31-1, by a
/// WINDOW_UPDATE (a stream error) or by a new SETTINGS_INITIAL_WINDOW_SIZE (a connection error).
#[tokio::test]
async fn a_window_past_two_to_the_31_is_a_flow_control_error() {
    let max = frame::MAX_WINDOW as u32;
    let settings = |size: u32| {
        let mut payload = frame::SETTINGS_INITIAL_WINDOW_SIZE.to_be_bytes().to_vec();
        payload.extend_from_slice(&size.to_be_bytes());
        payload
    };
    // A WINDOW_UPDATE that takes the stream's window over: that stream is reset.
    let mut c = Client::connect().await;
    c.request(1, "/csi.v1.Identity/Probe", false).await;
    c.send(Kind::WindowUpdate, 0, 1, &max.to_be_bytes()).await;
    let (head, payload) = c.next_of(Kind::RstStream).await.unwrap();
    assert_eq!(head.stream.get(), 1);
    assert_eq!(frame::rst_reason(&payload), Ok(reason::FLOW_CONTROL_ERROR));

    // The window at its largest, then the initial size raised by one: the connection ends.
    let mut c = Client::connect().await;
    c.request(1, "/csi.v1.Identity/Probe", false).await;
    let to_max = max - frame::DEFAULT_WINDOW as u32;
    c.send(Kind::WindowUpdate, 0, 1, &to_max.to_be_bytes())
        .await;
    let raised = settings(frame::DEFAULT_WINDOW as u32 + 1);
    c.send(Kind::Settings, 0, 0, &raised).await;
    let (_, payload) = c.next_of(Kind::GoAway).await.unwrap();
    assert_eq!(
        frame::goaway(&payload).map(|(_, code)| code),
        Ok(reason::FLOW_CONTROL_ERROR)
    );

    // The same raise without the WINDOW_UPDATE is fine: the call is answered.
    let mut c = Client::connect().await;
    c.request(1, "/csi.v9.Nothing/Here", false).await;
    c.send(Kind::Settings, 0, 0, &raised).await;
    c.send(Kind::Data, frame::END_STREAM, 1, &[0, 0, 0, 0, 0])
        .await;
    let (head, _) = c.next_of(Kind::Headers).await.unwrap();
    assert_eq!(head.stream.get(), 1);
}
