//! Calls relayed to the scripted plugin: their frames pass both ways as they came, on the
//! client's stream ids; a call of another dialect whose messages are wire-identical goes on
//! the plugin's `:path`.

use super::*;
use crate::call::plan::{self, Plan};

#[tokio::test]
async fn a_relayed_unary_call_reaches_the_plugin_on_its_stream_and_the_reply_the_client() {
    let mut s = Spliced::open().await;
    s.client
        .call(5, "/csi.v1.Identity/Probe", b"\x0a\x01x")
        .await;
    let (id, fields, end) = s.plugin_request().await;
    assert_eq!(id, 5, "the client's stream id");
    assert!(!end);
    assert_eq!(field(&fields, ":path"), Some("/csi.v1.Identity/Probe"));
    assert_eq!(field(&fields, "content-type"), Some("application/grpc"));
    let (id, data, end) = s.plugin_data().await;
    assert_eq!((id, end), (5, true));
    assert_eq!(message_of(&data), b"\x0a\x01x", "the message as it came");

    s.plugin_replies(5, b"\x0a\x02\x08\x01").await;
    let (head, end) = s.client.block(5).await;
    assert!(!end);
    assert_eq!(field(&head, ":status"), Some("200"));
    let (h, data) = s.client.next_stream_frame().await.unwrap();
    assert_eq!((h.kind, h.stream.get()), (Kind::Data, 5));
    assert_eq!(message_of(&data), b"\x0a\x02\x08\x01");
    let trailers = s.client.trailers(5).await;
    assert_eq!(field(&trailers, "grpc-status"), Some("0"));
}

#[tokio::test]
async fn calls_in_flight_together_each_get_their_own_reply_in_any_order() {
    let mut s = Spliced::open().await;
    for id in [1, 3, 5] {
        s.probe(id).await;
    }
    for id in [5, 1, 3] {
        s.plugin_replies(id, &[id as u8]).await;
    }
    for id in [5, 1, 3] {
        let (head, _) = s.client.block(id).await;
        assert_eq!(field(&head, ":status"), Some("200"));
        let (h, data) = s.client.next_stream_frame().await.unwrap();
        assert_eq!((h.kind, h.stream.get()), (Kind::Data, id));
        assert_eq!(message_of(&data), [id as u8]);
        assert_eq!(
            field(&s.client.trailers(id).await, "grpc-status"),
            Some("0")
        );
    }
}

#[tokio::test]
async fn the_plugins_trailers_only_reply_reaches_the_client_with_its_status() {
    let mut s = Spliced::open().await;
    s.probe(1).await;
    let fields = block(&[
        (":status", "200"),
        ("content-type", "application/grpc"),
        ("grpc-status", "5"),
        ("grpc-message", "no such volume"),
    ]);
    let end = frame::END_HEADERS | frame::END_STREAM;
    s.plugin.send(Kind::Headers, end, 1, &fields).await;
    let (reply, end) = s.client.block(1).await;
    assert!(end, "trailers-only");
    assert_eq!(field(&reply, "grpc-status"), Some("5"));
    assert_eq!(field(&reply, "grpc-message"), Some("no such volume"));
}

/// A v0.3 client's call that is wire-identical to the v1 plugin's goes on as it came but for
/// its `:path`, which becomes the plugin's (`Plan::Relay { rewrite }`).
#[tokio::test]
async fn a_wire_identical_call_of_another_dialect_reaches_the_plugin_on_its_path() {
    let mut s = Spliced::open().await;
    let methods = [
        "Identity/GetPluginInfo",
        "Identity/GetPluginCapabilities",
        "Identity/Probe",
        "Controller/DeleteVolume",
        "Controller/ControllerUnpublishVolume",
        "Controller/DeleteSnapshot",
        "Controller/GetCapacity",
        "Controller/ControllerGetCapabilities",
        "Node/NodeUnstageVolume",
        "Node/NodeUnpublishVolume",
        "Node/NodeGetCapabilities",
    ];
    let (path, rewrite) = methods
        .iter()
        .map(|m| format!("/csi.v0.{m}"))
        .find_map(|path| {
            let route = s.shared.router.route(&path)?;
            match plan::plan(&route, Dialect::V1, false, true) {
                Plan::Relay { rewrite: Some(to) } => Some((path, to)),
                _ => None,
            }
        })
        .expect("a v0.3 call relayed to a v1 plugin on its path");
    assert_eq!(rewrite, path.replace("csi.v0", "csi.v1"));
    // Relayed as it came: whatever the bytes, the plugin gets them.
    let request = b"\x0a\x05vol-1";
    s.client.call(1, &path, request).await;
    let (id, fields, _) = s.plugin_request().await;
    assert_eq!(id, 1);
    assert_eq!(field(&fields, ":path"), Some(rewrite), "from {path}");
    let (_, data, end) = s.plugin_data().await;
    assert!(end);
    assert_eq!(message_of(&data), request, "the message as it came");
    s.plugin_replies(1, &[]).await;
    let (head, _) = s.client.block(1).await;
    assert_eq!(field(&head, ":status"), Some("200"));
    assert_eq!(field(&s.client.trailers(1).await, "grpc-status"), Some("0"));
}

/// A reply head split across HEADERS and CONTINUATION reaches the client whole, and nothing of
/// the gateway's own (a PING's ACK) goes between its frames (RFC 9113 §6.10).
#[tokio::test]
async fn a_reply_block_split_across_continuation_is_not_interrupted() {
    let mut s = Spliced::open().await;
    s.probe(1).await;
    let head = reply_head();
    let (first, rest) = head.split_at(5);
    s.plugin.send(Kind::Headers, 0, 1, first).await;
    let (h, _) = s.client.next_stream_frame().await.unwrap();
    assert_eq!((h.kind, h.flags & frame::END_HEADERS), (Kind::Headers, 0));
    // A PING the gateway answers while the block is open, then a WINDOW_UPDATE it passes on:
    // once the plugin has that, the gateway handled the PING.
    s.client.send(Kind::Ping, 0, 0, b"inblock!").await;
    s.client
        .send(Kind::WindowUpdate, 0, 0, &1000u32.to_be_bytes())
        .await;
    let (h, _) = s.plugin.next_of(Kind::WindowUpdate).await.unwrap();
    assert!(h.stream.is_connection());
    s.plugin
        .send(Kind::Continuation, frame::END_HEADERS, 1, rest)
        .await;
    let (h, payload) = s.client.next().await.unwrap();
    assert_eq!((h.kind, h.stream.get()), (Kind::Continuation, 1));
    let mut whole = first.to_vec();
    whole.extend_from_slice(&payload);
    let fields = s.client.decode(&whole);
    assert_eq!(field(&fields, ":status"), Some("200"));
    let (h, payload) = s.client.next().await.unwrap();
    assert_eq!(
        (h.kind, h.flags),
        (Kind::Ping, frame::ACK),
        "after the block"
    );
    assert_eq!(payload, b"inblock!");
}

#[tokio::test]
async fn the_clients_reset_of_a_relayed_stream_reaches_the_plugin() {
    let mut s = Spliced::open().await;
    s.client.request(1, "/csi.v1.Identity/Probe", false).await;
    let (id, _, _) = s.plugin_request().await;
    assert_eq!(id, 1);
    s.client.reset(1, reason::CANCEL).await;
    assert_eq!(s.plugin.reset_of(1).await, reason::CANCEL);
}

#[tokio::test]
async fn the_plugins_reset_of_a_relayed_stream_reaches_the_client() {
    let mut s = Spliced::open().await;
    s.probe(3).await;
    s.plugin.reset(3, reason::REFUSED_STREAM).await;
    assert_eq!(s.client.reset_of(3).await, reason::REFUSED_STREAM);
    // The stream is over; the connection serves the next call.
    s.probe(5).await;
    s.plugin_replies(5, &[]).await;
    assert_eq!(field(&s.client.trailers(5).await, "grpc-status"), Some("0"));
}

/// Flow control runs end to end: the WINDOW_UPDATEs of a relayed stream and of the
/// connection pass both ways as they came.
#[tokio::test]
async fn window_updates_pass_both_ways() {
    let mut s = Spliced::open().await;
    s.client.request(1, "/csi.v1.Identity/Probe", false).await;
    s.plugin_request().await;
    s.client
        .send(Kind::WindowUpdate, 0, 1, &777u32.to_be_bytes())
        .await;
    let (h, payload) = s.plugin.next_of(Kind::WindowUpdate).await.unwrap();
    assert_eq!(h.stream.get(), 1);
    assert_eq!(frame::increment(&payload), Ok(777));

    s.plugin
        .send(Kind::WindowUpdate, 0, 0, &5000u32.to_be_bytes())
        .await;
    s.plugin
        .send(Kind::WindowUpdate, 0, 1, &6000u32.to_be_bytes())
        .await;
    let (h, payload) = s.client.next_of(Kind::WindowUpdate).await.unwrap();
    assert_eq!((h.stream.get(), frame::increment(&payload)), (0, Ok(5000)));
    let (h, payload) = s.client.next_of(Kind::WindowUpdate).await.unwrap();
    assert_eq!((h.stream.get(), frame::increment(&payload)), (1, Ok(6000)));
}

/// RFC 9113 §8.1.1: DATA that does not add up to the request's `content-length` makes it
/// malformed: the client's stream is reset (PROTOCOL_ERROR), so is the plugin's.
#[tokio::test]
async fn a_request_short_of_its_content_length_is_reset_both_ways() {
    let mut s = Spliced::open().await;
    s.client
        .request_with(
            1,
            "/csi.v1.Identity/Probe",
            &[("content-length", "10")],
            false,
        )
        .await;
    s.plugin_request().await;
    s.client
        .send(Kind::Data, frame::END_STREAM, 1, &h2raw::message(&[]))
        .await;
    assert_eq!(s.client.next_reset().await, (1, reason::PROTOCOL_ERROR));
    s.plugin.reset_of(1).await;
}

/// RFC 9113 §5.1: DATA on a stream the client already ended is a stream error STREAM_CLOSED,
/// answered by the gateway; the plugin's reply to the call itself still comes.
#[tokio::test]
async fn data_after_the_clients_end_stream_is_stream_closed() {
    let mut s = Spliced::open().await;
    s.probe(1).await;
    s.client.send(Kind::Data, 0, 1, &h2raw::message(&[])).await;
    assert_eq!(s.client.next_reset().await, (1, reason::STREAM_CLOSED));
}

/// A stream past the gateway's `max_concurrent_streams` is refused by the gateway
/// (REFUSED_STREAM) and never reaches the plugin, which gets the next one.
#[tokio::test]
async fn a_stream_past_max_concurrent_streams_is_refused_and_not_relayed() {
    let mut s = Spliced::with_limits(Limits {
        max_concurrent_streams: 1,
        ..Limits::default()
    })
    .await;
    s.client.request(1, "/csi.v1.Identity/Probe", false).await;
    s.plugin_request().await;
    s.client.request(3, "/csi.v1.Identity/Probe", false).await;
    assert_eq!(s.client.next_reset().await, (3, reason::REFUSED_STREAM));
    // Stream 1 done, stream 5 is the plugin's next.
    s.client
        .send(Kind::Data, frame::END_STREAM, 1, &h2raw::message(&[]))
        .await;
    s.plugin_data().await;
    s.plugin_replies(1, &[]).await;
    s.client.trailers(1).await;
    s.client.request(5, "/csi.v1.Identity/Probe", true).await;
    let (id, _, _) = s.plugin_request().await;
    assert_eq!(id, 5, "stream 3 never reached the plugin");
}

/// The plugin's reply that ends with DATA (END_STREAM, no trailers) reaches the client as it
/// came: the gateway passes relayed frames, it does not finish the plugin's replies.
#[tokio::test]
async fn a_reply_ended_by_data_without_trailers_passes_as_it_came() {
    let mut s = Spliced::open().await;
    s.probe(1).await;
    s.plugin
        .send(Kind::Headers, frame::END_HEADERS, 1, &reply_head())
        .await;
    s.plugin
        .send(Kind::Data, frame::END_STREAM, 1, &h2raw::message(b"m"))
        .await;
    s.client.block(1).await;
    let (h, data) = s.client.next_stream_frame().await.unwrap();
    assert_eq!((h.kind, h.stream.get()), (Kind::Data, 1));
    assert!(h.has(frame::END_STREAM));
    assert_eq!(message_of(&data), b"m");
}

/// Request trailers (a second header block, which ends the stream) are relayed too.
#[tokio::test]
async fn request_trailers_pass_to_the_plugin() {
    let mut s = Spliced::open().await;
    s.client.request(1, "/csi.v1.Identity/Probe", false).await;
    s.plugin_request().await;
    s.client.send(Kind::Data, 0, 1, &h2raw::message(&[])).await;
    s.plugin_data().await;
    let trailers = block(&[("x-trailer", "t")]);
    let end = frame::END_HEADERS | frame::END_STREAM;
    s.client.send(Kind::Headers, end, 1, &trailers).await;
    let (id, fields, end) = s.plugin_request().await;
    assert_eq!((id, end), (1, true));
    assert_eq!(field(&fields, "x-trailer"), Some("t"));
}

/// RFC 9113 §8.1: trailers that do not end the stream make the request malformed: reset both
/// ways (PROTOCOL_ERROR to the client). The block never reached the plugin, whose decoding
/// context the next request's block, re-encoded, still follows.
#[tokio::test]
async fn request_trailers_without_end_stream_reset_the_stream_both_ways() {
    let mut s = Spliced::open().await;
    s.client.request(1, "/csi.v1.Identity/Probe", false).await;
    s.plugin_request().await;
    let trailers = block(&[("x-trailer", "t")]);
    s.client
        .send(Kind::Headers, frame::END_HEADERS, 1, &trailers)
        .await;
    assert_eq!(s.client.next_reset().await, (1, reason::PROTOCOL_ERROR));
    s.plugin.reset_of(1).await;
    s.probe(3).await;
}

/// Trailers holding a pseudo-header are malformed too (RFC 9113 §8.1).
#[tokio::test]
async fn request_trailers_with_a_pseudo_header_are_malformed() {
    let mut s = Spliced::open().await;
    s.client.request(1, "/csi.v1.Identity/Probe", false).await;
    s.plugin_request().await;
    let trailers = block(&[(":path", "/csi.v1.Identity/Probe")]);
    let end = frame::END_HEADERS | frame::END_STREAM;
    s.client.send(Kind::Headers, end, 1, &trailers).await;
    assert_eq!(s.client.next_reset().await, (1, reason::PROTOCOL_ERROR));
    s.plugin.reset_of(1).await;
}
