//! The upstream is never waited on past a bound: call deadlines (`grpc-timeout`), the
//! plugin's SETTINGS within `connect_timeout`, and the upstream lost or broken mid-call.

use super::*;

/// Bounds how long an answer the gateway owes may take: well past each deadline here, far
/// short of `WAIT`.
const SOON: Duration = Duration::from_secs(3);

#[tokio::test]
async fn a_relayed_call_past_its_deadline_is_deadline_exceeded_and_reset_on_the_plugin() {
    let mut s = Spliced::open().await;
    let started = Instant::now();
    let timeout = [("grpc-timeout", "200m")];
    s.client
        .call_with(1, "/csi.v1.Identity/Probe", &timeout, &[])
        .await;
    let (_, fields, _) = s.plugin_request().await;
    assert_eq!(field(&fields, "grpc-timeout"), Some("200m"), "passed on");
    s.plugin_data().await;
    let trailers = s.client.trailers(1).await;
    assert_eq!(field(&trailers, "grpc-status"), Some("4"), "{trailers:?}");
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert!(started.elapsed() < SOON);
    assert_eq!(s.plugin.reset_of(1).await, reason::CANCEL);
}

/// The plugin's reply that comes after the gateway answered the call in its place is dropped:
/// the client gets one answer, and the connection serves the next call.
#[tokio::test]
async fn a_reply_after_the_deadline_is_dropped() {
    let mut s = Spliced::open().await;
    s.client.timed_probe(1, "100m").await;
    s.plugin_request().await;
    assert_eq!(field(&s.client.trailers(1).await, "grpc-status"), Some("4"));
    s.plugin.next_of(Kind::RstStream).await.unwrap();
    s.plugin_replies(1, b"late").await;
    s.probe(3).await;
    s.plugin_replies(3, b"on time").await;
    let (h, _) = s.client.next_stream_frame().await.unwrap();
    assert_eq!(
        (h.kind, h.stream.get()),
        (Kind::Headers, 3),
        "nothing more of stream 1"
    );
}

/// The hazard of issue 51: the plugin opens a reply header block (HEADERS without
/// END_HEADERS, passed on to the client) and goes silent. The client's connection can carry
/// nothing but that block's CONTINUATION, so the gateway cannot answer the call whose deadline
/// passes meanwhile: the upstream connection is given up at that deadline, which closes the
/// client's connection (every call on it fails at once, as on a lost connection) instead of
/// holding it past every deadline.
#[tokio::test]
async fn a_deadline_inside_a_reply_block_passed_on_closes_the_connection_in_time() {
    let mut s = Spliced::open().await;
    s.probe(1).await;
    s.client.timed_probe(3, "200m").await;
    s.plugin_request().await;
    let started = Instant::now();
    let head = reply_head();
    s.plugin.send(Kind::Headers, 0, 1, &head[..3]).await;
    let (h, _) = s.client.next_stream_frame().await.unwrap();
    assert_eq!((h.kind, h.stream.get()), (Kind::Headers, 1));
    assert!(s.client.closes_within(SOON).await, "closed by the deadline");
    assert!(started.elapsed() < SOON);
    assert!(s.plugin.closes_within(SOON).await, "the upstream given up");
}

/// The same hazard where the open block is one the gateway keeps (a translated call's
/// trailers): the client's connection is intact, so the expired call gets DEADLINE_EXCEEDED,
/// the upstream is given up (it can carry nothing but that block), the connection's other
/// calls on it get UNAVAILABLE, and the connection serves new calls itself.
#[tokio::test]
async fn a_deadline_inside_a_kept_reply_block_is_answered_and_the_others_too() {
    let mut s = Spliced::open().await;
    s.probe(1).await;
    let id = s.node_get_id(3, &[("grpc-timeout", "200m")]).await;
    let started = Instant::now();
    s.kept_block_left_open(id).await;
    let mut answers = HashMap::new();
    while answers.len() < 2 {
        let (h, payload) = s.client.next_stream_frame().await.expect("the answers");
        if h.kind == Kind::Headers {
            assert!(h.has(frame::END_HEADERS));
            let fields = s.client.decode(&payload);
            if h.has(frame::END_STREAM) {
                let status = field(&fields, "grpc-status").map(str::to_string);
                answers.insert(h.stream.get(), status);
            }
        }
    }
    assert!(started.elapsed() < SOON);
    assert_eq!(answers[&3].as_deref(), Some("4"), "DEADLINE_EXCEEDED");
    assert_eq!(answers[&1].as_deref(), Some("14"), "UNAVAILABLE");
    // A new call is the gateway's to answer, on its own upstream connection.
    s.client.call(5, "/csi.v1.Identity/Probe", &[]).await;
    assert_eq!(field(&s.client.trailers(5).await, "grpc-status"), Some("0"));
}

#[tokio::test]
async fn the_upstream_closing_mid_call_is_unavailable_naming_it() {
    let mut s = Spliced::open().await;
    s.probe(1).await;
    let Spliced {
        mut client,
        plugin,
        backend,
        ..
    } = s;
    drop(plugin);
    let trailers = client.trailers(1).await;
    assert_eq!(field(&trailers, "grpc-status"), Some("14"), "{trailers:?}");
    let endpoint = backend.live.conn.endpoint().to_string();
    assert!(
        field(&trailers, "grpc-message").is_some_and(|m| m.contains(&endpoint)),
        "{trailers:?}"
    );
    let (_, payload) = client.next_of(Kind::GoAway).await.unwrap();
    assert_eq!(frame::goaway(&payload).unwrap().1, reason::NO_ERROR);
}

/// A plugin that accepts the connection and never sends its SETTINGS is given up after
/// `connect_timeout`: the gateway's own SETTINGS open the client's side, and the client's
/// calls are answered by the gateway.
#[tokio::test]
async fn the_plugins_settings_not_coming_within_connect_timeout() {
    let connect_timeout = Duration::from_millis(300);
    let mut s = Spliced::started(Setup {
        connect_timeout,
        ..Setup::default()
    })
    .await;
    let started = Instant::now();
    let (h, payload) = s.client.next().await.expect("the server preface");
    assert_eq!((h.kind, h.flags), (Kind::Settings, 0));
    assert!(started.elapsed() >= connect_timeout - Duration::from_millis(50));
    let values: HashMap<u16, u32> = frame::settings(&payload).collect();
    assert!(values.contains_key(&frame::SETTINGS_MAX_CONCURRENT_STREAMS));
    s.client.call(1, "/csi.v1.Identity/Probe", &[]).await;
    assert_eq!(field(&s.client.trailers(1).await, "grpc-status"), Some("0"));
}

/// A plugin whose first frame is not SETTINGS does not speak HTTP/2 as a server: given up at
/// once, without waiting for `connect_timeout`.
#[tokio::test]
async fn a_plugin_not_starting_with_settings_is_given_up_at_once() {
    let mut s = Spliced::started(Setup::default()).await;
    s.plugin.send(Kind::Ping, 0, 0, b"12345678").await;
    let started = Instant::now();
    let (h, _) = s.client.next().await.expect("the server preface");
    assert_eq!(h.kind, Kind::Settings);
    assert!(started.elapsed() < SOON, "not connect_timeout (5s)");
    s.client.call(1, "/csi.v1.Identity/Probe", &[]).await;
    assert_eq!(field(&s.client.trailers(1).await, "grpc-status"), Some("0"));
}

/// A call whose deadline passes before the plugin's SETTINGS came: the client gets the
/// gateway's own server preface and DEADLINE_EXCEEDED, not a wait for `connect_timeout`.
#[tokio::test]
async fn a_deadline_before_the_plugins_settings_is_answered() {
    let mut s = Spliced::started(Setup::default()).await;
    let started = Instant::now();
    s.client.timed_probe(1, "200m").await;
    let trailers = s.client.trailers(1).await;
    assert_eq!(field(&trailers, "grpc-status"), Some("4"), "{trailers:?}");
    assert!(started.elapsed() < SOON);
}

/// The plugin breaking HTTP/2 (a frame other than CONTINUATION inside its header block) is
/// the upstream lost; as its block went on to the client midway, the client's connection
/// closes too.
#[tokio::test]
async fn a_plugins_header_block_interrupted_closes_the_connection() {
    let mut s = Spliced::open().await;
    s.probe(1).await;
    let head = reply_head();
    s.plugin.send(Kind::Headers, 0, 1, &head[..3]).await;
    s.plugin.send(Kind::Ping, 0, 0, b"12345678").await;
    assert!(s.client.closes_within(SOON).await);
}

/// The plugin's PUSH_PROMISE (push was disabled) is the upstream broken: the call in flight
/// gets UNAVAILABLE, the connection stays for the gateway's own answers.
#[tokio::test]
async fn a_plugins_push_promise_is_the_upstream_lost() {
    let mut s = Spliced::open().await;
    s.probe(1).await;
    s.plugin
        .send(Kind::PushPromise, frame::END_HEADERS, 1, &[0, 0, 0, 2])
        .await;
    let trailers = s.client.trailers(1).await;
    assert_eq!(field(&trailers, "grpc-status"), Some("14"), "{trailers:?}");
}

/// The upstream closing inside a reply block the gateway kept from the client (a translated
/// call's trailers): the client's connection never saw any of it, so its calls are answered
/// (UNAVAILABLE) and it goes on, rather than being closed.
#[tokio::test]
async fn the_upstream_closing_inside_a_kept_reply_block_leaves_the_client_connection() {
    let mut s = Spliced::open().await;
    let id = s.node_get_id(1, &[]).await;
    s.kept_block_left_open(id).await;
    let Spliced {
        mut client, plugin, ..
    } = s;
    drop(plugin);
    let trailers = client.trailers(1).await;
    assert_eq!(field(&trailers, "grpc-status"), Some("14"), "{trailers:?}");
    client.call(3, "/csi.v1.Identity/Probe", &[]).await;
    assert_eq!(field(&client.trailers(3).await, "grpc-status"), Some("0"));
}
