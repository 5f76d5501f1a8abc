//! Calls translated on the connection's own upstream connection (`Plan::TranslateHere`): a
//! v0.3 client's NodeGetId to a v1 plugin is one NodeGetInfo call, its reply translated once
//! whole.

use super::*;
use crate::call::plan::{self, Plan};

/// NodeGetInfoResponse { node_id: "node-1", max_volumes_per_node: 5 }
const NODE_INFO: &[u8] = b"\x0a\x06node-1\x10\x05";
/// NodeGetIdResponse { node_id: "node-1" }: v0.3 has no max_volumes_per_node.
const NODE_ID: &[u8] = b"\x0a\x06node-1";

#[tokio::test]
async fn node_get_id_is_translated_here_for_a_v1_plugin() {
    let s = Spliced::open().await;
    let route = s.shared.router.route(NODE_GET_ID).unwrap();
    assert!(matches!(
        plan::plan(&route, Dialect::V1, false, true),
        Plan::TranslateHere(i) if i.path == "/csi.v1.Node/NodeGetInfo"
    ));
}

#[tokio::test]
async fn a_translated_call_reaches_the_plugin_in_its_dialect_and_the_reply_the_client_in_its_own() {
    let mut s = Spliced::open().await;
    let id = s.node_get_id(1, &[]).await;
    s.plugin_replies(id, NODE_INFO).await;
    let (head, end) = s.client.block(1).await;
    assert!(!end);
    assert_eq!(field(&head, ":status"), Some("200"));
    let (h, data) = s.client.next_stream_frame().await.unwrap();
    assert_eq!((h.kind, h.stream.get()), (Kind::Data, 1));
    assert_eq!(message_of(&data), NODE_ID, "the v0.3 reply");
    let trailers = s.client.trailers(1).await;
    assert_eq!(field(&trailers, "grpc-status"), Some("0"));
}

#[tokio::test]
async fn a_translated_calls_error_reaches_the_client_with_its_code() {
    let mut s = Spliced::open().await;
    let id = s.node_get_id(1, &[]).await;
    let fields = block(&[
        (":status", "200"),
        ("content-type", "application/grpc"),
        ("grpc-status", "9"),
        ("grpc-message", "not now"),
    ]);
    let end = frame::END_HEADERS | frame::END_STREAM;
    s.plugin.send(Kind::Headers, end, id, &fields).await;
    let trailers = s.client.trailers(1).await;
    assert_eq!(field(&trailers, "grpc-status"), Some("9"), "{trailers:?}");
}

/// The translated reply's trailers split across HEADERS and CONTINUATION (a block the gateway
/// keeps, not passes): the client gets the translated reply and its status.
#[tokio::test]
async fn translated_trailers_split_across_continuation_are_read_whole() {
    let mut s = Spliced::open().await;
    let id = s.node_get_id(1, &[]).await;
    s.plugin
        .send(Kind::Headers, frame::END_HEADERS, id, &reply_head())
        .await;
    s.plugin
        .send(Kind::Data, 0, id, &h2raw::message(NODE_INFO))
        .await;
    let trailers = block(&[("grpc-status", "0"), ("x-plugin", "here")]);
    let (first, rest) = trailers.split_at(4);
    s.plugin
        .send(Kind::Headers, frame::END_STREAM, id, first)
        .await;
    s.plugin
        .send(Kind::Continuation, frame::END_HEADERS, id, rest)
        .await;
    s.client.block(1).await;
    let (h, data) = s.client.next_stream_frame().await.unwrap();
    assert_eq!(h.kind, Kind::Data);
    assert_eq!(message_of(&data), NODE_ID);
    assert_eq!(field(&s.client.trailers(1).await, "grpc-status"), Some("0"));
}

#[tokio::test]
async fn the_plugins_reset_of_a_translated_call_reaches_the_client() {
    let mut s = Spliced::open().await;
    let id = s.node_get_id(1, &[]).await;
    s.plugin
        .send(
            Kind::RstStream,
            0,
            id,
            &reason::INTERNAL_ERROR.to_be_bytes(),
        )
        .await;
    assert_eq!(s.client.reset_of(1).await, reason::INTERNAL_ERROR);
}

/// A relayed and a translated call on one connection: each reply reaches its stream, the
/// relayed one as it came, the translated one translated.
#[tokio::test]
async fn relayed_and_translated_calls_share_the_connection() {
    let mut s = Spliced::open().await;
    s.probe(1).await;
    let id = s.node_get_id(3, &[]).await;
    s.plugin_replies(id, NODE_INFO).await;
    s.plugin_replies(1, b"\x0a\x02\x08\x01").await;
    let (_, _) = s.client.block(3).await;
    let (_, data) = s.client.next_stream_frame().await.unwrap();
    assert_eq!(message_of(&data), NODE_ID);
    s.client.trailers(3).await;
    let (_, _) = s.client.block(1).await;
    let (_, data) = s.client.next_stream_frame().await.unwrap();
    assert_eq!(message_of(&data), b"\x0a\x02\x08\x01");
}

/// A translated call past its deadline: DEADLINE_EXCEEDED to the client from the gateway.
#[tokio::test]
async fn a_translated_call_past_its_deadline_is_deadline_exceeded() {
    let mut s = Spliced::open().await;
    let started = Instant::now();
    s.node_get_id(1, &[("grpc-timeout", "200m")]).await;
    let trailers = s.client.trailers(1).await;
    assert_eq!(field(&trailers, "grpc-status"), Some("4"), "{trailers:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
}
