//! The connection in-process, through a scripted I/O (as h2's `tests/h2-support` mock does):
//! the client's bytes written into one end of an in-memory pipe, the splice on the other, and
//! what it writes back read frame by frame. These are unattached connections (no upstream
//! connection of their own), whose plugin is never reached: every answer here is the
//! connection's own, so each rule is seen without a socket or a process.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::*;
use crate::call::router::Router;
use crate::call::services::Services;
use crate::dialect::Dialect;
use crate::endpoint::Endpoint;
use crate::upstream::{self, Upstream};
use csi_gateway_test_support::h2raw;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const WAIT: Duration = Duration::from_secs(5);

impl Io for DuplexStream {
    const KIND: &'static str = "test";
}

/// What a gateway in front of a plugin that is not there shares with its connections.
fn shared() -> Arc<Shared> {
    let dialects = [Dialect::V1, Dialect::V0_3, Dialect::V0_1];
    let upstream = Upstream::spawn(upstream::Settings {
        endpoint: Endpoint::Unix("/nonexistent/csi-gateway-test/plugin.sock".into()),
        dialect: None,
        connect_timeout: Duration::from_millis(100),
        backoff_initial: Duration::from_secs(60),
        backoff_max: Duration::from_secs(60),
        failover: Vec::new(),
        tls: None,
        inline_handles: false,
    });
    Arc::new(Shared {
        router: Router::new(&dialects).unwrap(),
        upstream: upstream.clone(),
        store: None,
        staging: None,
        redactor: crate::observe::Redactor::new(Vec::new()),
        limits: Limits::default(),
        protection: crate::call::protect::Protection::new(Default::default()),
        services: Services::new(&dialects, upstream, Duration::from_secs(1)).unwrap(),
        node_paths: None,
        resets: Default::default(),
        buffered: crate::call::budget::Budget::new(8 << 20),
    })
}

/// The client's end of a new unattached connection, the splice running on the other.
struct Client {
    io: DuplexStream,
    read: BytesMut,
    _shutdown: watch::Sender<bool>,
}

impl Client {
    async fn connect() -> Client {
        let (io, server) = tokio::io::duplex(1 << 20);
        let (shutdown, stop) = watch::channel(false);
        tokio::spawn(Splice::unattached(shared(), None, server, stop).run());
        let mut client = Client {
            io,
            read: BytesMut::new(),
            _shutdown: shutdown,
        };
        client.send_raw(PREFACE).await;
        client.send(Kind::Settings, 0, 0, &[]).await;
        client
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.io.write_all(bytes).await.unwrap();
    }

    async fn send(&mut self, kind: Kind, flags: u8, stream: u32, payload: &[u8]) {
        let mut out = BytesMut::new();
        frame::put(&mut out, kind, flags, StreamId::new(stream), payload);
        self.send_raw(&out).await;
    }

    /// The next frame the splice writes: its head and payload; `None` once it closed.
    async fn next(&mut self) -> Option<(Head, Vec<u8>)> {
        loop {
            if let Some(head) = frame::next(&self.read) {
                if self.read.len() >= 9 + head.len {
                    let whole = self.read.split_to(9 + head.len);
                    return Some((head, whole[9..].to_vec()));
                }
            }
            let n = tokio::time::timeout(WAIT, self.io.read_buf(&mut self.read))
                .await
                .expect("the splice wrote nothing in time")
                .unwrap_or(0);
            if n == 0 {
                return None;
            }
        }
    }

    /// The next frame of `kind`, those of other kinds skipped (SETTINGS, WINDOW_UPDATE, …).
    async fn next_of(&mut self, kind: Kind) -> Option<(Head, Vec<u8>)> {
        loop {
            let (head, payload) = self.next().await?;
            if head.kind == kind {
                return Some((head, payload));
            }
        }
    }

    /// A request's header block, as literals (no table), ending the stream or not.
    async fn request(&mut self, stream: u32, path: &str, end_stream: bool) {
        let block = h2raw::request_block(&[], path, &[]);
        let flags = frame::END_HEADERS | if end_stream { frame::END_STREAM } else { 0 };
        self.send(Kind::Headers, flags, stream, &block).await;
    }
}

/// The fields of a header block the splice wrote.
fn fields(block: &[u8]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    headers::Decoder::default()
        .decode(block, |n, v, _| {
            out.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        })
        .unwrap();
    out
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

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
