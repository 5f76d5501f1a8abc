//! One spliced client connection: its frames read, looked at and written on in a single poll
//! loop, with the upstream connection that belongs to it alone.
//!
//! What passes unchanged: every frame of a relayed stream (HEADERS, CONTINUATION, DATA,
//! WINDOW_UPDATE, RST_STREAM, PRIORITY) and the connection's WINDOW_UPDATEs, so that flow
//! control runs end to end as if directly connected. Stream ids are the client's own. Request
//! header blocks are re-encoded once needed (see `headers`), which frees the splice to answer
//! some streams itself: those whose method needs translation, or that the gateway refuses. A
//! call of another dialect whose messages are wire-identical (`translate::identical`) is relayed
//! like a same-dialect one, its request block re-encoded with the upstream's `:path`. For
//! those it is the server: it returns the client's flow-control credit for what it consumed,
//! and sends its replies within the client's windows. Its replies take connection-level window
//! the upstream does not know was used, so the splice owes that much: it keeps it back from
//! the client's next connection WINDOW_UPDATE, and holds the upstream's DATA when forwarding it
//! would exceed what the client really allows.
//!
//! The client's own flow control is enforced (RFC 9113 §6.9.1): the splice counts the window
//! the client was granted — the upstream's SETTINGS_INITIAL_WINDOW_SIZE and WINDOW_UPDATEs as
//! they pass, and the splice's own — and DATA past the connection's is a connection error
//! (GOAWAY FLOW_CONTROL_ERROR), past only a stream's a stream error (RST_STREAM
//! FLOW_CONTROL_ERROR), which leaves the connection's other calls alone. h2 answers both with a
//! connection error; the RFC lets a receiver choose, and a gateway serving many callers on one
//! connection loses less this way.
//!
//! The connection-level frames are answered per hop (RFC 9113 §5.4, §6.5, §6.7, §6.8): the
//! gateway answers each side's PINGs itself, and a client never sees the upstream's GOAWAY —
//! the GOAWAY it gets names the last stream the *gateway* took, answered by it or relayed.
//! SETTINGS are the gateway's own on each side; the few values that govern what passes
//! unchanged (header table size, initial window, frame size) are taken from the other side's,
//! and a side's SETTINGS is acknowledged once the other side acknowledged the values taken
//! from it, so that neither peer relies on a value the other does not apply yet. Extension
//! frames are dropped, as RFC 9113 §5.5 lets a hop do.
//!
//! The upstream is never waited on past a bound. A call on it with a `grpc-timeout` whose reply
//! has not ended by then gets DEADLINE_EXCEEDED from the gateway, as a call it answers does,
//! and its stream is reset there (RST_STREAM CANCEL); the connection's deadlines share one
//! timer (`deadlines`). The upstream's SETTINGS must come within `upstream.connect_timeout` of
//! the client's preface, and its first frame must be SETTINGS: else (a plugin stopped, or not
//! speaking HTTP/2) the upstream connection is given up as if it had closed, and the gateway's
//! own SETTINGS open the client's side, whose calls it then answers itself.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use crate::call::plan::{self, Admission, Plan};
use crate::call::{answer as call, rescue as reply};
use crate::front::router::{Inline, Route};
use crate::front::services;
use crate::front::Shared;
use crate::grpc::status::status_fields;
use crate::grpc::{frame as grpc_frame, Code, Status, MAX_MESSAGE_BYTES};
use crate::metrics::{InFlight, Origin};
use crate::observe::{self, Report};
use crate::tls::{Authorization, Keepalive};
use crate::translate::identical::Verdict;
use crate::translate::CallError;
use crate::upstream::Live;

use crate::front::limits::{self, Limits, Rate};

use super::io::{write, Io, Unattached};
use super::local_stream::{self, LocalStreams};
use csi_gateway_wire::frame::{self, reason, Head, Kind, Reason};
use csi_gateway_wire::headers;

/// Reading pauses while this much waits to be written the other way.
const HIGH_WATER: usize = 256 * 1024;
/// Once handling what was read has added this much for one side, it is written before the
/// rest is handled. A burst of calls (many in flight, answered together) then reaches the next
/// hop in pieces, which it starts on while this hop builds the rest, instead of every hop
/// taking the whole burst in turn and the others waiting: at 64 calls in flight on 2 cores
/// that serialised the client, the gateway and the plugin (`benches/bridge.rs`, the e2e
/// bench). About four small calls' requests (a Probe's is ~120 bytes as a client sends it).
const PIECE: usize = 512;

/// How far `client_heard` lags behind the client's last request frame at most.
const HEARD_STEP: Duration = Duration::from_millis(100);

/// A client's timer and the gateway's for one deadline differ by the time its request took to
/// arrive: a reset this close to the deadline is the client giving up at it.
const RESET_SLACK_MS: u64 = 50;
/// The largest header block accepted, however many CONTINUATION frames carry it.
const MAX_HEADER_BLOCK: usize = 256 * 1024;
/// Calls the splice answers itself at once on one connection; more are refused
/// (REFUSED_STREAM, which a client may retry).
const MAX_LOCAL_CALLS: usize = 1024;
/// The request bodies of local calls buffered at once on one connection: past it a request
/// gets RESOURCE_EXHAUSTED, so that a connection's memory stays bounded.
const MAX_LOCAL_BODIES: usize = 4 * MAX_MESSAGE_BYTES;
/// How often a connection whose window is withheld, or whose calls wait for room for their
/// replies, looks whether the gateway has room again.
const BUDGET_RETRY: Duration = Duration::from_millis(50);
/// Room in the gateway's budget (`Shared::buffered`) a call it answers itself takes before it
/// starts: the largest reply such a (unary) call is expected to produce, a whole message. Its
/// reply is made whole before a byte of it is sent, so its room must be had first: else calls
/// whose replies no client reads would each hold theirs, past any budget. Exchanged for the
/// reply's real size once it is made. The price: at most `max_buffered_bytes / REPLY_ROOM`
/// such calls run at once in the whole gateway (64 at the 256 MiB default, 2 at the 8 MiB
/// least), the others wait for room (`waiting_room`), `BUDGET_WAIT` at most.
const REPLY_ROOM: usize = MAX_MESSAGE_BYTES;
/// The largest frame the splice lets either side send (SETTINGS_MAX_FRAME_SIZE is capped at
/// this): bounds the buffer one frame needs.
const MAX_FRAME: u32 = 64 * 1024;

/// A call the splice answers itself: its stream, when it started, its report and outcome.
/// It ends early (CANCELLED) when its stream does: dropped, the upstream call is reset.
type LocalCall = Pin<Box<dyn Future<Output = LocalOutcome> + Send>>;
type LocalOutcome = (u32, Instant, Report, Result<Vec<u8>, Status>);

pub struct Splice<C, U> {
    shared: Arc<Shared>,
    /// The plugin this connection's upstream connection reaches; `None` on a connection
    /// started without one when no plugin was ever detected (`unattached`).
    live: Option<Arc<Live>>,
    client: C,
    upstream: U,
    from_client: BytesMut,
    from_upstream: BytesMut,
    to_client: BytesMut,
    to_upstream: BytesMut,
    /// The splice's own frames for the client while they may not go yet: before the server
    /// preface, or inside a header block of the upstream's (RFC 9113 §6.10).
    own: BytesMut,
    limits: Limits,
    preface: bool,
    /// The client's first frame, its SETTINGS, came (RFC 9113 §3.4).
    client_settings_seen: bool,
    /// Whether the upstream's SETTINGS (the server preface) went to the client: nothing of the
    /// splice's own may precede it.
    server_preface: bool,
    /// The connection cannot go on (a header block cut off midway).
    dead: bool,
    accepted: Instant,
    client_decoder: headers::Decoder,
    upstream_decoder: headers::Decoder,
    /// A request header block still waiting for its CONTINUATION frames.
    request_block: Option<Block>,
    /// A reply header block whose frames went on but which is not complete: nothing may be
    /// written to the client between its frames.
    reply_block: Option<Block>,
    /// Looked up on every frame: foldhash, at a fraction of SipHash's cost. At most
    /// `max_concurrent_streams` entries, which bounds what ids chosen to collide could cost.
    streams: foldhash::HashMap<u32, Stream>,
    last_stream: u32,
    /// The client's settings, which the splice obeys when it sends replies itself.
    client_initial_window: i64,
    /// The SETTINGS_INITIAL_WINDOW_SIZE the client was told (the upstream's, passed on): the
    /// window each new stream of the client's starts with (RFC 9113 §6.9.2).
    client_stream_window: i64,
    /// How much DATA the client may still send on the connection: the window it was granted,
    /// by the upstream's WINDOW_UPDATEs passed on and by the splice's own, less what it sent.
    /// Below zero it broke flow control (RFC 9113 §6.9.1).
    client_credit: i64,
    client_max_frame: usize,
    /// The upstream's largest frame, for re-encoded header blocks.
    upstream_max_frame: usize,
    /// The largest frame each side was told it may send.
    client_frame_limit: usize,
    upstream_frame_limit: usize,
    /// SETTINGS sent to each side and not yet acknowledged, oldest first, with the header
    /// table size each carried: applied once acknowledged, when the other side gets its ACK.
    /// The client's also carry an initial window lowered, which counts from its ACK.
    settings_to_client: VecDeque<(Option<u32>, Option<i64>)>,
    settings_to_upstream: VecDeque<Option<u32>>,
    /// The upstream's decoder waits for a size update that the client's blocks, now
    /// re-encoded, no longer carry to it.
    upstream_expects_update: Option<usize>,
    /// A request block whose `:path` was rewritten in place, kept to be reused by the next.
    rewritten: Vec<u8>,
    /// The `:path` fields put in place of the client's in its frames as they came.
    path_fields: headers::PathFields,
    /// The upstream sent GOAWAY: no new stream is relayed to it.
    upstream_draining: bool,
    resets: Rate,
    /// Request body bytes of local calls held now.
    local_bodies: usize,
    /// Request bytes the gateway's own services hold now (`LocalStreams::held`), and the reply
    /// bytes waiting to go to the client, as counted in `Shared::buffered`.
    services_held: usize,
    /// Reply bytes held for the client, on the gateway's count too (`Shared::buffered`): the
    /// splice's own replies not sent yet (`Local::reply`, waiting on the client's windows or
    /// buffer) and translated calls' replies as they come from the plugin (`Translated::reply`,
    /// until whole).
    replies_held: usize,
    /// Since when the upstream is not read: this connection holds replies and the gateway has
    /// no room for more (`reads_upstream`); looked at again every `BUDGET_RETRY`, and past
    /// `BUDGET_WAIT` a translated reply still coming is refused to make room (`make_reply_room`).
    replies_paused: Option<Instant>,
    /// Connection window the client's DATA for local calls took and that is not given back
    /// yet: the connection or the gateway holds all the request bytes it may (`give_back`).
    withheld: u64,
    /// Since when window has been withheld, or the last request refused for room.
    withheld_since: Option<Instant>,
    /// Since when the connection has had no stream, and since when a request header block
    /// waits for its CONTINUATION frames.
    idle_since: Option<Instant>,
    /// When the client last sent a frame of a request — HEADERS, CONTINUATION or DATA — (or the
    /// stalled-request check last found none): with streams open, a request unfinished
    /// `idle_timeout` after it is stalled, whatever else (PINGs, WINDOW_UPDATEs) the client
    /// sends meanwhile.
    client_heard: Instant,
    block_since: Option<Instant>,
    /// Since when the client's frame at the front of `from_client` has been only partly read.
    frame_since: Option<Instant>,
    /// How much more DATA the client accepts on the connection, from anyone.
    window: i64,
    /// Connection window the splice's own replies took and the upstream does not know about.
    debt: u64,
    /// The upstream's DATA waits: forwarding it now would exceed the client's window.
    held: bool,
    /// Frames read and not handled yet: handling stopped to write a piece (`PIECE`).
    client_unhandled: bool,
    upstream_unhandled: bool,
    calls: FuturesUnordered<LocalCall>,
    /// Streams served by the gateway's own services (`local_stream`).
    services: LocalStreams,
    /// Local calls whose request is whole and that wait for room for their reply
    /// (`REPLY_ROOM`), oldest first, with since when: started once there is room, refused past
    /// `BUDGET_WAIT` or their deadline.
    waiting_room: VecDeque<(u32, Instant)>,
    /// The one local call of this connection running without room reserved for its reply:
    /// a connection that holds nothing else (requests or replies) may always run one, so that
    /// a client that reads its replies (a Probe) is answered while others fill the budget.
    free_call: Option<u32>,
    /// When the calls and service streams waiting for room look for it again: a fixed time,
    /// as the connection's timer fires only for a deadline that stays put.
    room_retry: Option<Instant>,
    /// Relayed calls that ended, with when they started: counted and logged once this turn's
    /// bytes are written, so that no reply waits on the bookkeeping of the calls before it.
    ended: Vec<(Report, Instant)>,
    /// When the bytes being handled were read.
    now: Instant,
    /// Local streams with reply frames still to send, in the order they were answered.
    replying: VecDeque<u32>,
    /// Set once the gateway is shutting down and told the client so: streams after this id
    /// are refused, and the connection ends with its last stream.
    going_away: Option<u32>,
    /// The last-stream id of the last GOAWAY the client got (the upstream's included): a
    /// later one may not name a higher id.
    goaway_sent: Option<u32>,
    upstream_gone: bool,
    going_away_later: bool,
    /// Set once a request block was not forwarded (see `forward_request_block`).
    reencode: bool,
    /// Set once an upstream header block was kept from the client and changed the upstream's
    /// table: the client's table no longer follows it, and every reply block the client gets
    /// from then on is re-encoded as literals (`headers::reply_reencoded`).
    reencode_replies: bool,
    /// The connection has had a stream the splice opened on the upstream for itself (a
    /// translated call) or reset there: from then on the upstream's stream frames are sorted
    /// (`passes_on`) rather than all passed on.
    own_streams: bool,
    /// Streams the splice reset on the upstream (most recent last): frames the upstream sent
    /// before it saw the reset are dropped, not passed to the client.
    reset_upstream: VecDeque<u32>,
    /// Streams whose half the client closed (END_STREAM, RST_STREAM) and that have since
    /// ended, most recent last: a later DATA on one is a stream error STREAM_CLOSED (RFC 9113
    /// §5.1; a HEADERS is a reused id, a connection error). DATA on a stream the splice ended
    /// while the client was still sending is dropped instead, as frames in flight may be.
    client_closed: VecDeque<u32>,
    /// Ended translated calls' state, kept for the next ones (see `recycle`): boxed, as
    /// `Side::Translated` holds it, so that the box is what is used again.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Translated>>,
    /// Connection window the upstream spent on frames the client never got (translated
    /// replies, replies to reset streams), not given back yet: netted against `debt`, and
    /// given back once it is worth a frame.
    owed_upstream: u64,
    /// The upstream's SETTINGS_INITIAL_WINDOW_SIZE: what a translated request may be.
    upstream_initial_window: i64,
    shutdown: watch::Receiver<bool>,
    /// What the client may call, for a peer of the appliance listener (`None`: anything).
    authorization: Option<Arc<Authorization>>,
    /// Set once the client finished a request (`served`): a call in flight counts, however
    /// long its plugin takes.
    served: crate::front::listener::Served,
    /// PINGs to the upstream (a bridge connection): a peer that vanished without a FIN is
    /// noticed within `timeout`, not after TCP's retransmissions.
    keepalive: Option<Keepalive>,
    /// When the next keepalive PING goes, or — while one is out — by when its ACK must come.
    ping_at: Option<Instant>,
    ping_out: bool,
    /// The deadlines (`grpc-timeout`) of the calls on the upstream, soonest first, with their
    /// streams: the connection's one timer is set to the first (`Timeout::Call`).
    deadlines: BTreeSet<(Instant, u32)>,
    /// When the client's preface went on to the upstream: the upstream's SETTINGS must follow
    /// within `Live::connect_timeout` (`Timeout::UpstreamHandshake`).
    upstream_asked: Option<Instant>,
}

struct Block {
    stream: u32,
    end_stream: bool,
    /// The header block fragments joined.
    bytes: Vec<u8>,
    /// A request block's frames as they came, for forwarding as they are; a reply block's
    /// when they wait to be passed on or not (a translated call's trailers).
    frames: Vec<u8>,
    /// A reply block whose frames go to the client as they come.
    passes: bool,
}

struct Stream {
    started: Instant,
    report: Option<Report>,
    request_done: bool,
    /// The upstream's reply headers went to the client.
    reply_started: bool,
    reply_done: bool,
    /// The client's `grpc-timeout`, for a call on the upstream (see `deadlines`).
    timeout: Option<Duration>,
    /// The client sent END_STREAM or RST_STREAM on it (see `client_closed`).
    client_ended: bool,
    /// What is left of the request's `content-length`, when it declared one.
    content_left: Option<u64>,
    /// How much DATA the client may still send on the stream: the window it was granted, the
    /// upstream's on a relayed stream, the splice's own on one it answers (`client_credit`).
    credit: i64,
    _in_flight: InFlight,
    side: Side,
}

impl Stream {
    /// When a call on the upstream is answered DEADLINE_EXCEEDED if its reply has not ended.
    fn deadline(&self) -> Option<Instant> {
        self.started.checked_add(self.timeout?)
    }
}

enum Side {
    Relayed,
    /// Translated on the upstream connection, as the one call it is there (`Translated`).
    Translated(Box<Translated>),
    Local(Local),
    /// Served by one of the gateway's own services, as a stream (`local_stream`).
    Service,
}

impl Side {
    /// The stream is a call on the upstream connection: relayed, or translated there.
    fn on_upstream(&self) -> bool {
        matches!(self, Side::Relayed | Side::Translated(_))
    }

    /// The client's request frames go on to the upstream as they came: a relayed call's, and
    /// a translated call's relayed as it came (`Asked::Relayed`).
    fn relays_request(&self) -> bool {
        match self {
            Side::Relayed => true,
            Side::Translated(t) => t.asked.relayed(),
            _ => false,
        }
    }
}

#[derive(Default)]
struct Local {
    body: BytesMut,
    /// The call is refused before it starts (a request or header list too large).
    refused: Option<Status>,
    timeout: Option<Duration>,
    /// What the client still accepts on this stream.
    window: i64,
    reply: Option<Reply>,
    /// Dropped with the stream: the running call ends then.
    cancel: Option<tokio::sync::oneshot::Sender<()>>,
    /// The room its reply may take (`REPLY_ROOM`), reserved before the call starts: given
    /// back once the reply is made and held at its real size, or with the stream.
    room: Option<Held>,
}

/// A call translated on the splice's own upstream connection (`Route::inline_call`): its
/// request head went on with the plugin's path; its message is translated once whole, and the
/// plugin's reply once it ends.
struct Translated {
    route: Route,
    /// The plugin path the head named.
    path: &'static str,
    body: BytesMut,
    timeout: Option<Duration>,
    /// Connection window the client's DATA took: it pays for the translated message the
    /// upstream gets, and the rest is given back then.
    credit: u64,
    /// What the plugin was asked, which its reply is translated for.
    asked: Asked,
    reply: BytesMut,
    /// The plugin's reply was larger than a message may be.
    reply_too_large: bool,
    /// Reply bytes the upstream's stream window lacks (given back past half of it).
    reply_unacked: u32,
    /// What the client still accepts on this stream.
    window: i64,
    /// The plugin ended its reply before the request was sent (it refused the call on its
    /// head alone): its status.
    early: Option<CallError>,
    /// For a call wire-identical but for what its request may hold, the check its request
    /// must pass to go on as it came (`Splice::check_request`).
    check: Option<&'static crate::translate::identical::RequestCheck>,
    /// Such a call's reply is translated all the same (`Inline::reply_translated`).
    reply_translated: bool,
}

/// What a translated call's plugin was asked.
enum Asked {
    /// Nothing yet: the request is translated once whole (`send_translated`).
    Not,
    /// The hub request, translated and sent.
    Hub(Box<crate::hub::Request>),
    /// The client's request, relayed as it came, its reply translated for the method alone:
    /// neither revision's request for this method has a field (`Inline::empty_request`), or
    /// the request passed its check with secrets (`Verdict::CopiedWithSecrets`), which reach
    /// the reply's translation only through the request as it came (`observe::scrub`).
    Relayed(crate::hub::Method),
}

impl Asked {
    fn sent(&self) -> bool {
        !matches!(self, Asked::Not)
    }

    /// The client's request goes on as it came.
    fn relayed(&self) -> bool {
        matches!(self, Asked::Relayed(_))
    }
}

impl Translated {
    /// A new call's state: in `spare`, an ended call's box, when there is one, whose box and
    /// buffers are used again.
    fn start(
        spare: Option<Box<Translated>>,
        route: Route,
        timeout: Option<Duration>,
        window: i64,
        inline: Inline,
    ) -> Box<Translated> {
        let fresh = |mut body: BytesMut, mut reply: BytesMut| {
            body.clear();
            reply.clear();
            Translated {
                route,
                path: inline.path,
                body,
                timeout,
                credit: 0,
                asked: inline.empty_request.map_or(Asked::Not, Asked::Relayed),
                reply,
                reply_too_large: false,
                reply_unacked: 0,
                window,
                early: None,
                check: inline.check,
                reply_translated: inline.reply_translated,
            }
        };
        match spare {
            Some(mut t) => {
                let (body, reply) = (std::mem::take(&mut t.body), std::mem::take(&mut t.reply));
                *t = fresh(body, reply);
                t
            }
            None => Box::new(fresh(BytesMut::new(), BytesMut::new())),
        }
    }
}

/// How many ended translated calls' boxes a splice keeps (`Splice::spare`), and the largest
/// buffer kept with one: enough for a burst of calls in flight, without holding on to the
/// memory of an occasional large message.
const SPARE_TRANSLATED: usize = 256;
const SPARE_BUFFER: usize = 16 * 1024;

/// The largest request translated on the splice's upstream connection: a larger one is
/// answered through `call::answer`, since its window is given back to the client only once
/// it is whole.
const MAX_TRANSLATED_REQUEST: u64 = 16 * 1024;
/// Connection window owed to the upstream, kept until this much (see `owed_upstream`).
const OWED_UPSTREAM_FLUSH: u64 = 16 * 1024;
/// How many streams reset on the upstream are remembered (see `reset_upstream`).
const RESET_REMEMBERED: usize = 256;

/// Bytes on the gateway's count (`Shared::buffered`) until dropped, however what holds them
/// ends: a local call's request bytes, or room reserved for a reply.
pub(super) struct Held(Arc<Shared>, usize);

impl Held {
    /// `n` bytes of room, if the gateway has them within its limit.
    pub(super) fn reserve(shared: &Arc<Shared>, n: usize) -> Option<Held> {
        shared.buffered.try_take(n).then(|| Held(shared.clone(), n))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.buffered.give(self.1);
    }
}

/// A local reply's frames still to go.
struct Reply {
    head: Option<Vec<u8>>,
    data: Bytes,
    trailers: Option<Vec<u8>>,
}

#[derive(Clone, Copy, Debug)]
enum Timeout {
    Preface,
    HeaderBlock,
    Idle,
    Keepalive,
    /// The upstream's SETTINGS did not come in time.
    UpstreamHandshake,
    /// A call on the upstream reached its deadline.
    Call,
    /// The client has sent nothing for `idle_timeout` while it has streams open: any whose
    /// request it never finished is stalled.
    Stalled,
    /// Window is withheld (`withheld`): whether it may be granted now.
    Budget,
}

/// The payload of the splice's keepalive PINGs: its ACK is told from others' by it.
const KEEPALIVE_PING: [u8; 8] = *b"csi-gw-k";

/// Why the splice ends early.
#[derive(Debug, thiserror::Error)]
enum Broken {
    #[error("client: {0}")]
    Client(&'static str, Reason),
    #[error("upstream: {0}")]
    Upstream(String),
}

impl<C: Io> Splice<C, Unattached> {
    /// A connection for which no upstream connection could be had at accept (the plugin down,
    /// refusing, or not detected yet). It starts in the state a splice is in once its upstream
    /// went away, except that the client is not asked to go: the gateway's own SETTINGS open
    /// the client's side, and it answers every call itself on its shared upstream connection,
    /// which waits for the plugin as far as each call's deadline allows (`call::answer`).
    pub fn unattached(
        shared: Arc<Shared>,
        live: Option<Arc<Live>>,
        client: C,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        let mut splice = Splice::build(shared, live, client, Unattached, shutdown);
        splice.upstream_gone = true;
        splice.own_preface();
        splice
    }
}

impl<C: Io, U: Io> Splice<C, U> {
    pub fn new(
        shared: Arc<Shared>,
        live: Arc<Live>,
        client: C,
        upstream: U,
        shutdown: watch::Receiver<bool>,
    ) -> Splice<C, U> {
        Splice::build(shared, Some(live), client, upstream, shutdown)
    }

    fn build(
        shared: Arc<Shared>,
        live: Option<Arc<Live>>,
        client: C,
        upstream: U,
        shutdown: watch::Receiver<bool>,
    ) -> Splice<C, U> {
        let limits = shared.limits.clone();
        let client_decoder = client_decoder(&shared, live.as_deref());
        let services = LocalStreams::new(shared.clone());
        Splice {
            shared,
            live,
            client,
            upstream,
            from_client: BytesMut::with_capacity(64 * 1024),
            from_upstream: BytesMut::with_capacity(64 * 1024),
            to_client: BytesMut::with_capacity(64 * 1024),
            to_upstream: BytesMut::with_capacity(64 * 1024),
            own: BytesMut::new(),
            limits,
            preface: false,
            client_settings_seen: false,
            server_preface: false,
            dead: false,
            accepted: Instant::now(),
            client_decoder,
            upstream_decoder: headers::Decoder::default(),
            request_block: None,
            reply_block: None,
            streams: HashMap::default(),
            last_stream: 0,
            client_initial_window: frame::DEFAULT_WINDOW,
            client_stream_window: frame::DEFAULT_WINDOW,
            client_credit: frame::DEFAULT_WINDOW,
            client_max_frame: frame::DEFAULT_MAX_FRAME,
            upstream_max_frame: frame::DEFAULT_MAX_FRAME,
            client_frame_limit: frame::DEFAULT_MAX_FRAME,
            upstream_frame_limit: frame::DEFAULT_MAX_FRAME,
            settings_to_client: VecDeque::new(),
            settings_to_upstream: VecDeque::new(),
            upstream_expects_update: None,
            rewritten: Vec::new(),
            path_fields: headers::PathFields::default(),
            upstream_draining: false,
            resets: Rate::default(),
            local_bodies: 0,
            services_held: 0,
            replies_held: 0,
            replies_paused: None,
            withheld: 0,
            withheld_since: None,
            idle_since: Some(Instant::now()),
            client_heard: Instant::now(),
            block_since: None,
            frame_since: None,
            window: frame::DEFAULT_WINDOW,
            debt: 0,
            held: false,
            client_unhandled: false,
            upstream_unhandled: false,
            calls: FuturesUnordered::new(),
            services,
            waiting_room: VecDeque::new(),
            room_retry: None,
            free_call: None,
            ended: Vec::new(),
            now: Instant::now(),
            replying: VecDeque::new(),
            going_away: None,
            goaway_sent: None,
            upstream_gone: false,
            going_away_later: false,
            reencode: false,
            reencode_replies: false,
            own_streams: false,
            reset_upstream: VecDeque::new(),
            client_closed: VecDeque::new(),
            spare: Vec::new(),
            owed_upstream: 0,
            upstream_initial_window: frame::DEFAULT_WINDOW,
            shutdown,
            authorization: None,
            served: Default::default(),
            keepalive: None,
            ping_at: None,
            ping_out: false,
            deadlines: BTreeSet::new(),
            upstream_asked: None,
        }
    }

    /// What the upstream is called in messages and logs.
    fn upstream_name(&self) -> String {
        match &self.live {
            Some(live) => live.conn.endpoint().to_string(),
            None => "(no plugin detected)".to_string(),
        }
    }

    /// Lets the client call only what `authorization` allows: a stream to another CSI service
    /// is answered by the splice with PERMISSION_DENIED (`call::plan::admit`).
    pub fn authorized(mut self, authorization: Option<Arc<Authorization>>) -> Self {
        self.authorization = authorization;
        self
    }

    /// Marks `served` once the client finished a request: the listener keeps such a
    /// connection's slot when every slot is taken.
    pub fn served(mut self, served: crate::front::listener::Served) -> Self {
        self.served = served;
        self
    }

    /// Pings the upstream every `keepalive.interval` and drops it when a PING goes unanswered
    /// for `keepalive.timeout` (its calls then get UNAVAILABLE, as when it closes).
    pub fn keepalive(mut self, keepalive: Option<Keepalive>) -> Self {
        self.keepalive = keepalive;
        self.ping_at = keepalive.map(|k| Instant::now() + k.interval);
        self
    }

    /// Runs the connection to its end.
    pub async fn run(mut self) {
        let mut timer = Box::pin(tokio::time::sleep(limits::PREFACE_TIMEOUT));
        let mut shutdown = self.shutdown.clone();
        let mut shutdown_seen = *shutdown.borrow();
        if shutdown_seen {
            self.go_away();
        }
        let mut stopping = Box::pin(async move {
            let _ = shutdown.wait_for(|s| *s).await;
        });
        std::future::poll_fn(|cx| {
            if !shutdown_seen && stopping.as_mut().poll(cx).is_ready() {
                shutdown_seen = true;
                self.go_away();
            }
            loop {
                if self.poll_run(cx).is_ready() {
                    return Poll::Ready(());
                }
                let Some((at, why)) = self.deadline() else {
                    return Poll::Pending;
                };
                let at = tokio::time::Instant::from_std(at);
                if timer.deadline() != at {
                    timer.as_mut().reset(at);
                }
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                if let Some(done) = self.timed_out(why) {
                    return done;
                }
            }
        })
        .await;
        // The client's: it hung up, broke the protocol or timed out (a lost upstream ends its
        // streams in `upstream_lost`).
        self.finish_all(Code::Cancelled, Origin::Client, "connection closed");
        self.report_ended();
        // What a TLS side still holds (its last records) goes out before the connection is
        // dropped; a UNIX socket holds nothing.
        let _ = tokio::time::timeout(Duration::from_secs(1), self.client.flush()).await;
    }

    /// Moves bytes until nothing more can move, then waits; `Ready` once the connection ends.
    fn poll_run(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            let mut progress = false;
            if self.to_upstream.len() >= HIGH_WATER && !self.upstream_gone {
                // The client is not read while the plugin takes its time: a frame or header
                // block the client began waits on the plugin, not on the client.
                self.restart_client_timers();
            }
            if (self.to_upstream.len() < HIGH_WATER || self.upstream_gone)
                && self.own.len() + self.to_client.len() < 2 * HIGH_WATER
            {
                // What was read is handled before more is read.
                let more = std::mem::take(&mut self.client_unhandled)
                    || match self.client.read_into(&mut self.from_client, cx) {
                        Poll::Ready(Some(_)) => {
                            self.now = Instant::now();
                            true
                        }
                        Poll::Ready(None) => return Poll::Ready(()), // the client hung up
                        Poll::Pending => false,
                    };
                if more {
                    progress = true;
                    if let Err(e) = self.on_client_bytes() {
                        return self.fail(e);
                    }
                }
            }
            // Requests go on before replies are looked at: the upstream has the longer way to go.
            progress |= self.flush_upstream(cx);
            let reads = self.reads_upstream();
            self.replies_paused = match reads {
                true => None,
                false => self.replies_paused.or(Some(self.now)),
            };
            if !self.upstream_gone && !self.held && self.to_client.len() < HIGH_WATER && reads {
                let more = std::mem::take(&mut self.upstream_unhandled)
                    || match self.upstream.read_into(&mut self.from_upstream, cx) {
                        Poll::Ready(Some(_)) => true,
                        Poll::Ready(None) => {
                            progress = true;
                            self.upstream_lost("the upstream closed the connection");
                            false
                        }
                        Poll::Pending => false,
                    };
                if more {
                    progress = true;
                    if let Err(e) = self.on_upstream_bytes() {
                        self.upstream_lost(&e.to_string());
                    }
                }
            }
            if self.held && self.window > 0 {
                if let Err(e) = self.on_upstream_bytes() {
                    self.upstream_lost(&e.to_string());
                }
            }
            // The splice's own answers go to the client in pieces too; the rest are taken on
            // the next turn.
            let piece = self.to_client.len() + PIECE;
            while self.to_client.len() < piece {
                let Poll::Ready(Some(done)) = self.calls.poll_next_unpin(cx) else {
                    break;
                };
                progress = true;
                self.answered(done);
                self.send_replies();
            }
            self.send_replies();
            if !self.waiting_room.is_empty() {
                progress |= self.admit_waiting();
            }
            self.grant_withheld();
            if self.owed_upstream > 0 {
                self.settle_owed();
            }
            if !self.services.is_empty() {
                progress |= self.poll_services(cx);
            }
            if self.going_away_later && self.reply_block.is_none() {
                self.going_away_later = false;
                self.go_away();
            }
            self.release_own();
            self.note_idle();
            self.note_short_of_room();
            if self.server_preface {
                match write(&mut self.client, &mut self.to_client, cx, "client") {
                    Ok(moved) => progress |= moved,
                    Err(_) => return Poll::Ready(()),
                }
            }
            progress |= self.flush_upstream(cx);
            self.report_ended();
            if self.finished() || self.dead {
                return Poll::Ready(());
            }
            if !progress {
                return Poll::Pending;
            }
        }
    }

    /// Writes what waits for the upstream; `true` if anything moved.
    /// Restarts the timers of a frame or header block the client is part way through.
    fn restart_client_timers(&mut self) {
        if self.frame_since.is_some() || self.block_since.is_some() {
            let now = Instant::now();
            self.frame_since = self.frame_since.map(|_| now);
            self.block_since = self.block_since.map(|_| now);
        }
    }

    fn flush_upstream(&mut self, cx: &mut Context<'_>) -> bool {
        if self.upstream_gone {
            self.to_upstream.clear();
            return false;
        }
        match write(&mut self.upstream, &mut self.to_upstream, cx, "upstream") {
            Ok(moved) => moved,
            Err(_) => {
                self.upstream_lost("writing to the upstream failed");
                true
            }
        }
    }

    /// After a GOAWAY (ours or because the upstream went), the connection ends with its last
    /// stream and its last written byte.
    fn finished(&self) -> bool {
        self.going_away.is_some()
            && self.streams.is_empty()
            && self.calls.is_empty()
            && self.to_client.is_empty()
            && self.own.is_empty()
    }

    fn fail(&mut self, e: Broken) -> Poll<()> {
        match e {
            Broken::Client(what, code) => {
                tracing::debug!(error = what, "client broke the HTTP/2 protocol");
                if self.reply_block.is_none() {
                    if !self.server_preface {
                        // The upstream's settings never came: the connection ends anyway, so
                        // the gateway's own SETTINGS opens it, and GOAWAY closes it.
                        self.to_client.clear();
                        let settings = self.own_settings();
                        frame::put_settings(&mut self.to_client, &settings);
                    } else {
                        self.release_own();
                    }
                    let last = self
                        .goaway_sent
                        .map_or(self.last_stream, |s| s.min(self.last_stream));
                    frame::put_goaway(&mut self.to_client, last, code);
                    // Best effort: the connection is over either way.
                    let _ = write(
                        &mut self.client,
                        &mut self.to_client,
                        &mut noop_context(),
                        "client",
                    );
                }
            }
            Broken::Upstream(why) => self.upstream_lost(&why),
        }
        Poll::Ready(())
    }

    // ---- client to upstream ----

    fn on_client_bytes(&mut self) -> Result<(), Broken> {
        if !self.preface {
            if self.from_client.len() < frame::PREFACE.len() {
                return match frame::PREFACE.starts_with(&self.from_client) {
                    true => Ok(()),
                    false => Err(Broken::Client(
                        "not the HTTP/2 preface",
                        reason::PROTOCOL_ERROR,
                    )),
                };
            }
            if !self.from_client.starts_with(frame::PREFACE) {
                return Err(Broken::Client(
                    "not the HTTP/2 preface",
                    reason::PROTOCOL_ERROR,
                ));
            }
            self.to_upstream.extend_from_slice(frame::PREFACE);
            self.from_client.advance(frame::PREFACE.len());
            self.preface = true;
            self.upstream_asked = Some(self.now);
        }
        // The buffer is taken out while its frames are handled in place, then put back.
        let mut buf = std::mem::take(&mut self.from_client);
        let before = buf.len();
        let piece = self.to_upstream.len() + PIECE;
        let handled = take_frames(&mut buf, |head, whole| {
            if self.to_upstream.len() >= piece {
                self.client_unhandled = true;
                return Ok(false);
            }
            self.on_client_frame(head, whole).map(|()| true)
        });
        if buf.len() < before {
            // Every frame it began is whole: what is left is a new one.
            self.frame_since = None;
        }
        self.from_client = buf;
        handled?;
        // A frame only partly read, of any kind, is timed from its first byte: a client that
        // trickles a frame (a DATA frame byte by byte, say) is held to header_block_timeout as
        // one that never ends a header block, whatever else it sends.
        if !self.from_client.is_empty() && !self.client_unhandled {
            self.frame_since = self.frame_since.or(Some(self.now));
        }
        if self.from_client.len() >= frame::HEAD_LEN {
            let head = Head::parse(&self.from_client);
            // Refused before it is buffered (RFC 9113 §4.2).
            if head.len > self.client_frame_limit {
                return Err(Broken::Client("frame too large", reason::FRAME_SIZE_ERROR));
            }
            // A header frame only partly read is a header block begun: a client trickling one
            // byte by byte is held to header_block_timeout as one that never ends its block.
            let partial = self.from_client.len() < frame::HEAD_LEN + head.len;
            if partial && matches!(head.kind, Kind::Headers | Kind::Continuation) {
                self.block_since = self.block_since.or(Some(self.now));
            }
            self.from_client.reserve(frame::HEAD_LEN + head.len);
        }
        Ok(())
    }

    /// Whether a client's reset of stream `id` counts against the reset budget: not when the
    /// call's own deadline has passed (a gRPC client resets a call it gave up on at its
    /// deadline; 500 calls expiring together are no rapid-reset attack).
    /// Nor a reset of a stream already ended here (answered, or past its deadline): it cost
    /// the gateway and the plugin nothing more.
    fn reset_counted(&self, id: u32) -> bool {
        let slack = Duration::from_millis(RESET_SLACK_MS);
        self.streams
            .get(&id)
            .is_some_and(|s| s.deadline().is_none_or(|at| self.now + slack < at))
    }

    /// One more counted reset: past `max_resets_per_second` on this connection, or on all of
    /// the gateway's together (a client spreading resets over connections).
    fn too_many_resets(&mut self) -> bool {
        let per_second = self.limits.max_resets_per_second;
        let here = self.resets.exceeded(self.now, per_second);
        let all = self
            .shared
            .resets
            .lock()
            .map(|mut r| r.exceeded(self.now, per_second))
            .unwrap_or(false);
        here || all
    }

    fn on_client_frame(&mut self, head: Head, whole: &[u8]) -> Result<(), Broken> {
        let payload = &whole[frame::HEAD_LEN..];
        // Moved on in steps, so the connection's timer is not re-armed on every frame.
        let request = matches!(head.kind, Kind::Headers | Kind::Continuation | Kind::Data);
        if request && self.now.saturating_duration_since(self.client_heard) >= HEARD_STEP {
            self.client_heard = self.now;
        }
        if head.len > self.client_frame_limit {
            return Err(Broken::Client("frame too large", reason::FRAME_SIZE_ERROR));
        }
        frame::check(&head, payload).map_err(|(what, code)| Broken::Client(what, code))?;
        if !self.client_settings_seen {
            if head.kind != Kind::Settings || head.has(frame::ACK) {
                return Err(Broken::Client(
                    "the preface is not followed by SETTINGS",
                    reason::PROTOCOL_ERROR,
                ));
            }
            self.client_settings_seen = true;
        }
        if self.request_block.is_some() && head.kind != Kind::Continuation {
            return Err(Broken::Client(
                "header block interrupted",
                reason::PROTOCOL_ERROR,
            ));
        }
        match head.kind {
            Kind::Headers => {
                let range = frame::content(&head, payload).map_err(|_| malformed())?;
                let end_stream = head.has(frame::END_STREAM);
                if head.has(frame::END_HEADERS) {
                    self.block_since = None;
                    self.on_request_block(head.stream, end_stream, &payload[range], whole)?;
                    if frame::depends_on_itself(&head, payload) {
                        self.stream_error(head.stream, reason::PROTOCOL_ERROR, "depends on itself");
                    }
                } else {
                    // From the block's first byte, however slowly its frames came.
                    self.block_since = self.block_since.or(Some(self.now));
                    self.request_block = Some(Block {
                        stream: head.stream,
                        end_stream,
                        bytes: payload[range].to_vec(),
                        frames: whole.to_vec(),
                        passes: false,
                    });
                }
            }
            Kind::Continuation => {
                let Some(block) = self.request_block.as_mut() else {
                    return Err(Broken::Client(
                        "CONTINUATION without HEADERS",
                        reason::PROTOCOL_ERROR,
                    ));
                };
                if block.stream != head.stream {
                    return Err(Broken::Client(
                        "CONTINUATION on another stream",
                        reason::PROTOCOL_ERROR,
                    ));
                }
                if block.frames.len() + whole.len() > MAX_HEADER_BLOCK {
                    return Err(Broken::Client(
                        "header block too large",
                        reason::ENHANCE_YOUR_CALM,
                    ));
                }
                block.bytes.extend_from_slice(payload);
                block.frames.extend_from_slice(whole);
                if head.has(frame::END_HEADERS) {
                    let b = self.request_block.take().expect("checked above");
                    self.block_since = None;
                    self.on_request_block(b.stream, b.end_stream, &b.bytes, &b.frames)?;
                }
            }
            Kind::Data => self.on_client_data(head, whole)?,
            Kind::Settings if head.has(frame::ACK) => {
                // The client applies what the gateway passed on from the upstream: so may the
                // upstream now rely on the client's acknowledgement.
                if let Some((table, lowered)) = self.settings_to_client.pop_front() {
                    if let Some(window) = lowered {
                        self.lower_stream_window(window);
                    }
                    if let Some(size) = table {
                        let size = size as usize;
                        if size < self.client_decoder.table_max() {
                            self.upstream_expects_update = Some(size);
                        }
                        self.client_decoder.table_size_acknowledged(size as u32);
                    }
                    if !self.upstream_gone {
                        frame::put(&mut self.to_upstream, Kind::Settings, frame::ACK, 0, &[]);
                    }
                }
            }
            Kind::Settings => self.client_settings(payload)?,
            Kind::Ping => {
                if !head.has(frame::ACK) {
                    frame::put(self.own_out(), Kind::Ping, frame::ACK, 0, payload);
                }
            }
            Kind::WindowUpdate => {
                let n = frame::increment(payload).map_err(|_| malformed())?;
                self.client_window_update(head.stream, n, whole)?;
            }
            Kind::RstStream => {
                let code = frame::rst_reason(payload).map_err(|_| malformed())?;
                self.idle_stream_check(head.stream, "RST_STREAM")?;
                if self.reset_counted(head.stream) && self.too_many_resets() {
                    return Err(Broken::Client(
                        "too many streams reset",
                        reason::ENHANCE_YOUR_CALM,
                    ));
                }
                match self
                    .streams
                    .get(&head.stream)
                    .map(|s| matches!(s.side, Side::Relayed))
                {
                    Some(true) => {
                        self.to_upstream.extend_from_slice(whole);
                        let why = cancelled_by_client(code);
                        self.end_stream(head.stream, Code::Cancelled, Origin::Client, why);
                    }
                    // A local call the client gave up on ends here (its upstream call is
                    // dropped with the stream); its reply is not sent.
                    Some(false) => {
                        let why = cancelled_by_client(code);
                        self.end_stream(head.stream, Code::Cancelled, Origin::Client, why)
                    }
                    None => {}
                }
            }
            Kind::Priority => {
                if head.len != 5 {
                    frame::put_rst_stream(self.own_out(), head.stream, reason::FRAME_SIZE_ERROR);
                } else if frame::depends_on_itself(&head, payload) {
                    // RFC 9113 §5.3.1 (RFC 7540's priority, still a stream error to answer).
                    if self.streams.contains_key(&head.stream) {
                        self.stream_error(head.stream, reason::PROTOCOL_ERROR, "depends on itself");
                    } else {
                        frame::put_rst_stream(self.own_out(), head.stream, reason::PROTOCOL_ERROR);
                    }
                } else if self
                    .streams
                    .get(&head.stream)
                    .is_some_and(|s| matches!(s.side, Side::Relayed))
                {
                    self.to_upstream.extend_from_slice(whole);
                }
            }
            Kind::PushPromise => {
                return Err(Broken::Client(
                    "PUSH_PROMISE from a client",
                    reason::PROTOCOL_ERROR,
                ))
            }
            // The client's GOAWAY concerns streams the gateway would start: it starts none.
            // Extension frames are per hop, and the gateway knows none (RFC 9113 §5.5).
            Kind::GoAway | Kind::Unknown(_) => {}
        }
        let ends = match head.kind {
            Kind::Data | Kind::Headers => head.has(frame::END_STREAM),
            Kind::RstStream => true,
            _ => false,
        };
        if ends && head.stream != 0 {
            self.client_ended(head.stream);
        }
        Ok(())
    }

    /// The client closed its half of stream `id` (END_STREAM) or reset it: remembered once the
    /// stream has ended (see `client_closed`).
    fn client_ended(&mut self, id: u32) {
        match self.streams.get_mut(&id) {
            Some(stream) => stream.client_ended = true,
            None => self.remember_closed(id),
        }
    }

    fn remember_closed(&mut self, id: u32) {
        self.client_closed.push_back(id);
        if self.client_closed.len() > RESET_REMEMBERED {
            self.client_closed.pop_front();
        }
    }

    /// A frame on a stream the client never opened (RFC 9113 §5.1: idle).
    fn idle_stream_check(&self, stream: u32, what: &'static str) -> Result<(), Broken> {
        if stream > self.last_stream || stream.is_multiple_of(2) {
            let _ = what;
            return Err(Broken::Client(
                "frame on an idle stream",
                reason::PROTOCOL_ERROR,
            ));
        }
        Ok(())
    }

    /// The client's SETTINGS: obeyed by the gateway's own sending, and the values that govern
    /// what passes unchanged passed on to the upstream in a SETTINGS of the gateway's.
    fn client_settings(&mut self, payload: &[u8]) -> Result<(), Broken> {
        frame::check_settings(payload).map_err(|(what, code)| Broken::Client(what, code))?;
        let mut upstream = vec![(frame::SETTINGS_ENABLE_PUSH, 0)];
        let mut table = None;
        for (id, value) in frame::settings(payload) {
            match id {
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    let delta = value as i64 - self.client_initial_window;
                    self.client_initial_window = value as i64;
                    for s in self.streams.values_mut() {
                        match &mut s.side {
                            Side::Local(l) => l.window += delta,
                            Side::Translated(t) => t.window += delta,
                            _ => {}
                        }
                    }
                    self.services.adjust_windows(delta);
                    upstream.push((id, value));
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    // The splice's own frames stay within the size every peer accepts from
                    // the start: a raise counts only from the splice's ACK, which waits for the
                    // upstream's, and some clients (gRPC C-core) enforce it only from then on.
                    self.client_max_frame = (value as usize).min(frame::DEFAULT_MAX_FRAME);
                    let value = value.min(MAX_FRAME);
                    self.upstream_frame_limit = self.upstream_frame_limit.max(value as usize);
                    upstream.push((id, value));
                }
                frame::SETTINGS_HEADER_TABLE_SIZE => {
                    let value = value.min(headers::MAX_TABLE_SIZE);
                    self.upstream_decoder.allow_table_size(value);
                    table = Some(value);
                    upstream.push((id, value));
                }
                frame::SETTINGS_MAX_HEADER_LIST_SIZE => upstream.push((id, value)),
                _ => {}
            }
        }
        if self.upstream_gone {
            self.apply_upstream_ack(table);
        } else {
            frame::put_settings(&mut self.to_upstream, &upstream);
            self.settings_to_upstream.push_back(table);
        }
        Ok(())
    }

    /// The upstream applies the client's values the gateway passed on: the client gets its
    /// ACK, and the gateway's own blocks follow a cut of the client's table.
    fn apply_upstream_ack(&mut self, table: Option<u32>) {
        if let Some(size) = table {
            self.upstream_decoder.table_size_acknowledged(size);
        }
        frame::put(self.own_out(), Kind::Settings, frame::ACK, 0, &[]);
    }

    /// The client is told a new SETTINGS_INITIAL_WINDOW_SIZE: a raise counts at once for every
    /// stream (the client may apply it as soon as it reads it); a lowering only once the client
    /// acknowledged it (`lower_stream_window`), which it returns.
    fn raise_stream_window(&mut self, window: i64) -> Option<i64> {
        let delta = window - self.client_stream_window;
        if delta < 0 {
            return Some(window);
        }
        self.client_stream_window = window;
        for s in self.streams.values_mut() {
            s.credit += delta;
        }
        None
    }

    fn lower_stream_window(&mut self, window: i64) {
        let delta = window - self.client_stream_window;
        self.client_stream_window = window;
        for s in self.streams.values_mut() {
            s.credit += delta;
        }
    }

    /// Window granted the client on `stream` (0: the connection), by the splice or by the
    /// upstream through it: counted where the client may send it (`client_credit`).
    fn granted(&mut self, stream: u32, n: u32) {
        if stream == 0 {
            self.client_credit += n as i64;
        } else if let Some(s) = self.streams.get_mut(&stream) {
            s.credit += n as i64;
        }
    }

    /// The splice grants the client `n` more bytes of window on `stream` (0: the connection).
    fn grant(&mut self, stream: u32, n: u32) {
        frame::put_window_update(self.own_out(), stream, n);
        self.granted(stream, n);
    }

    /// A client DATA frame of `len` bytes, against the windows the client was granted (RFC
    /// 9113 §6.9.1). Past the connection's: a connection error, FLOW_CONTROL_ERROR (the
    /// gateway cannot tell what else the client sent past it). Past only the stream's: a
    /// stream error (§5.4.2), so that the connection's other calls go on; the frame is dropped
    /// and its connection window given back, as for any frame not passed on. `false` then.
    fn within_window(&mut self, id: u32, len: usize) -> Result<bool, Broken> {
        self.client_credit -= len as i64;
        if self.client_credit < 0 {
            return Err(Broken::Client(
                "DATA past the connection's flow-control window",
                reason::FLOW_CONTROL_ERROR,
            ));
        }
        let Some(stream) = self.streams.get_mut(&id).filter(|s| !s.request_done) else {
            return Ok(true);
        };
        stream.credit -= len as i64;
        if stream.credit >= 0 {
            return Ok(true);
        }
        self.grant(0, len as u32);
        self.stream_error(
            id,
            reason::FLOW_CONTROL_ERROR,
            "DATA past the stream's flow-control window",
        );
        Ok(false)
    }

    fn client_window_update(&mut self, stream: u32, n: u32, whole: &[u8]) -> Result<(), Broken> {
        if stream == 0 {
            if n == 0 {
                return Err(Broken::Client("WINDOW_UPDATE of 0", reason::PROTOCOL_ERROR));
            }
            self.window += n as i64;
            if self.window > frame::MAX_WINDOW {
                return Err(Broken::Client(
                    "connection window over 2^31-1",
                    reason::FLOW_CONTROL_ERROR,
                ));
            }
            // Keep back what the splice's own replies took, so the upstream's idea of the
            // window is never more than the client's.
            let repay = self.debt.min(n as u64);
            self.debt -= repay;
            let forward = n - repay as u32;
            if forward == n {
                self.to_upstream.extend_from_slice(whole);
            } else if forward > 0 {
                frame::put_window_update(&mut self.to_upstream, 0, forward);
            }
            return Ok(());
        }
        self.idle_stream_check(stream, "WINDOW_UPDATE")?;
        let side = self.streams.get_mut(&stream).map(|s| &mut s.side);
        let own_window = match side {
            Some(Side::Local(l)) => Some(&mut l.window),
            Some(Side::Translated(t)) => Some(&mut t.window),
            _ => None,
        };
        if let Some(window) = own_window {
            *window += n as i64;
            if n == 0 || *window > frame::MAX_WINDOW {
                let code = if n == 0 {
                    reason::PROTOCOL_ERROR
                } else {
                    reason::FLOW_CONTROL_ERROR
                };
                frame::put_rst_stream(self.own_out(), stream, code);
                self.end_stream(stream, Code::Internal, Origin::Client, bad_window_update());
            }
            return Ok(());
        }
        match self.streams.get_mut(&stream).map(|s| &mut s.side) {
            Some(Side::Local(_)) | Some(Side::Translated(_)) => {}
            Some(Side::Relayed) => self.to_upstream.extend_from_slice(whole),
            Some(Side::Service) => {
                let bad = match n {
                    0 => Some(reason::PROTOCOL_ERROR),
                    n => (!self.services.window_update(stream, n))
                        .then_some(reason::FLOW_CONTROL_ERROR),
                };
                if let Some(code) = bad {
                    frame::put_rst_stream(self.own_out(), stream, code);
                    self.end_stream(stream, Code::Internal, Origin::Client, bad_window_update());
                }
            }
            // A stream that has ended: nothing is sent on it any more; an increment of 0 is
            // still an error (RFC 9113 §6.9).
            None if n == 0 => frame::put_rst_stream(self.own_out(), stream, reason::PROTOCOL_ERROR),
            None => {}
        }
        Ok(())
    }

    fn on_client_data(&mut self, head: Head, whole: &[u8]) -> Result<(), Broken> {
        let payload = &whole[frame::HEAD_LEN..];
        let end = head.has(frame::END_STREAM);
        if !self.within_window(head.stream, head.len)? {
            return Ok(());
        }
        if !self.streams.contains_key(&head.stream) {
            self.idle_stream_check(head.stream, "DATA")?;
            // Data for a stream that has ended: drop it, but give back the window it used.
            if head.len > 0 {
                self.grant(0, head.len as u32);
            }
            if self.client_closed.contains(&head.stream) {
                frame::put_rst_stream(self.own_out(), head.stream, reason::STREAM_CLOSED);
            }
            return Ok(());
        }
        if self.content_length_broken(head, payload)? {
            // Not passed on: its window is the splice's to give back.
            self.grant(0, head.len as u32);
            self.stream_error(head.stream, reason::PROTOCOL_ERROR, CONTENT_LENGTH);
            return Ok(());
        }
        let stream = &self.streams[&head.stream];
        let (too_large, verdict, reply_translated) = match &stream.side {
            Side::Translated(t) if t.credit + head.len as u64 > MAX_TRANSLATED_REQUEST => {
                (!t.asked.sent(), Verdict::Translated, false)
            }
            Side::Translated(t) => (
                false,
                self.check_request(stream, t, head, payload),
                t.reply_translated,
            ),
            _ => (false, Verdict::Translated, false),
        };
        // A request that passed a check whose revisions number its fields differently goes on
        // renumbered (`identical::RequestCheck::renumber`), in the copy the upstream gets.
        let renumber = match (&stream.side, verdict) {
            (Side::Translated(t), Verdict::Copied | Verdict::CopiedWithSecrets) => {
                t.check.filter(|c| c.renumbers())
            }
            _ => None,
        };
        if too_large {
            // Answered through `call::answer` instead, which takes it whatever its size.
            self.translated_to_local(head.stream);
        }
        match verdict {
            // Relayed below, as everything after it both ways.
            Verdict::Copied if !reply_translated => self.turn_relayed(head.stream),
            // Relayed below as it came; the reply is translated for the method alone: a rule
            // about the reply applies, or an error must be scrubbed of the secrets read from
            // the request, whatever the log level.
            Verdict::Copied | Verdict::CopiedWithSecrets => {
                if let Some(Stream {
                    side: Side::Translated(t),
                    report: Some(report),
                    ..
                }) = self.streams.get_mut(&head.stream)
                {
                    if let Some(method) = t.route.hub {
                        t.asked = Asked::Relayed(method);
                        report.request = frame::content(&head, payload)
                            .ok()
                            .and_then(|range| first_message(&payload[range]));
                    }
                }
            }
            Verdict::Translated => {}
        }
        let own = if self.reply_block.is_some() || !self.server_preface {
            &mut self.own
        } else {
            &mut self.to_client
        };
        let stream = self.streams.get_mut(&head.stream).expect("checked above");
        if stream.request_done {
            frame::put_window_update(own, 0, head.len as u32);
            self.client_credit += head.len as i64;
            // A stream error (RFC 9113 §5.1, half-closed): answered here for every stream, a
            // relayed one too (a plugin may answer it by closing its whole connection). DATA
            // after the splice itself ended the request is dropped, as frames in flight are.
            if stream.client_ended {
                self.stream_error(head.stream, reason::STREAM_CLOSED, "DATA after END_STREAM");
            }
            return Ok(());
        }
        stream.request_done = end;
        if end {
            self.served.mark();
        }
        match &mut stream.side {
            Side::Translated(t) if !t.asked.relayed() => {
                let range = frame::content(&head, payload).map_err(|_| malformed())?;
                if !end {
                    t.body.extend_from_slice(&payload[range.clone()]);
                }
                // The connection's share pays for what the upstream gets (`send_translated`).
                t.credit += head.len as u64;
                if head.len > 0 && !end {
                    frame::put_window_update(own, head.stream, head.len as u32);
                    stream.credit += head.len as i64;
                }
                if end {
                    self.send_translated(head.stream, &payload[range]);
                }
            }
            // A relayed request, or a translated call's relayed as it came (`Asked::Relayed`).
            Side::Relayed | Side::Translated(_) => {
                if let Some(report) = stream.report.as_mut() {
                    if report.request.is_none() {
                        let range = frame::content(&head, payload).map_err(|_| malformed())?;
                        if observe::request_wanted() {
                            report.request = first_message(&payload[range]);
                        }
                    }
                }
                self.to_upstream.extend_from_slice(whole);
                if let Some(check) = renumber {
                    let range = frame::content(&head, payload).map_err(|_| malformed())?;
                    // The message, past the frame's head and gRPC's 5-byte prefix.
                    let at = self.to_upstream.len() - whole.len() + frame::HEAD_LEN;
                    check.renumber(&mut self.to_upstream[at + range.start + 5..at + range.end]);
                }
                if end && stream.reply_done {
                    self.remove(head.stream);
                }
            }
            Side::Local(local) => {
                let range = frame::content(&head, payload).map_err(|_| malformed())?;
                let (mut held, mut dropped) = (0, 0);
                let mut refused_now = false;
                // Refused, or answered already (`start_local`): what comes is dropped.
                if local.refused.is_some() || local.cancel.is_some() {
                } else if local.body.len() + range.len() > MAX_MESSAGE_BYTES + 5 {
                    local.refused = Some(Status::resource_exhausted(format!(
                        "request larger than {MAX_MESSAGE_BYTES} bytes"
                    )));
                    dropped = local.body.len();
                    local.body = BytesMut::new();
                    refused_now = true;
                } else if self.local_bodies + range.len() > MAX_LOCAL_BODIES {
                    // Only a client that sends past its window gets here (`CONNECTION_BUFFERED`).
                    local.refused = Some(Status::resource_exhausted(format!(
                        "the connection's calls hold {MAX_LOCAL_BODIES} bytes of requests already"
                    )));
                    dropped = local.body.len();
                    local.body = BytesMut::new();
                } else {
                    held = range.len();
                    local.body.extend_from_slice(&payload[range]);
                }
                // The splice consumed it: the credit comes from here, not the upstream. The
                // stream's at once (one message is bounded); the connection's once the
                // connection and the gateway may hold more (`give_back`).
                if head.len > 0 && !end {
                    frame::put_window_update(own, head.stream, head.len as u32);
                    stream.credit += head.len as i64;
                }
                self.let_go(dropped);
                self.hold(held);
                self.give_back(head.len as u32);
                // A request past the message limit is answered at once, not read to its end
                // (`send_replies` then resets the stream: NO_ERROR, the client stops sending).
                if end || refused_now {
                    self.start_local(head.stream);
                }
            }
            Side::Service => {
                let range = frame::content(&head, payload).map_err(|_| malformed())?;
                let content = &payload[range];
                self.services.data(head.stream, content, head.len, end, own);
                self.services_granted();
                self.count_services();
                // Given back as the connection and the gateway may hold more, as for a local
                // call's request.
                self.give_back(head.len as u32);
            }
        }
        Ok(())
    }

    /// Counts a client DATA frame against its stream's `content-length`: `true` if it goes
    /// past it, or ends the request short of it (RFC 9113 §8.1.1: malformed).
    fn content_length_broken(&mut self, head: Head, payload: &[u8]) -> Result<bool, Broken> {
        let Some(stream) = self.streams.get_mut(&head.stream) else {
            return Ok(false);
        };
        if stream.request_done {
            return Ok(false);
        }
        let Some(left) = stream.content_left.as_mut() else {
            return Ok(false);
        };
        let len = frame::content(&head, payload)
            .map_err(|_| malformed())?
            .len() as u64;
        if len > *left || (head.has(frame::END_STREAM) && len < *left) {
            return Ok(true);
        }
        *left -= len;
        Ok(false)
    }

    /// Whether this client DATA frame starts a translated call's request that goes on as it
    /// came (`Translated::check`): the first of the request, holding its whole message, which
    /// the translation would copy, and nothing of the plugin's reply yet (not even a block
    /// begun). A request that comes in pieces is translated, as is any call once something of
    /// it was.
    fn check_request(
        &self,
        stream: &Stream,
        t: &Translated,
        head: Head,
        payload: &[u8],
    ) -> Verdict {
        let Some(check) = t.check else {
            return Verdict::Translated;
        };
        // No DATA yet (the body holds only what the credit paid for).
        let untouched = t.credit == 0 && !t.asked.sent() && t.early.is_none();
        let replying = stream.reply_started
            || stream.reply_done
            || self
                .reply_block
                .as_ref()
                .is_some_and(|b| b.stream == head.stream);
        // A renumbered request must end with this frame: a message after it would reach the
        // plugin with the front's numbers.
        let whole = !check.renumbers() || head.has(frame::END_STREAM);
        match frame::content(&head, payload) {
            Ok(range) if untouched && !replying && !stream.request_done && whole => {
                check.verdict(&payload[range])
            }
            _ => Verdict::Translated,
        }
    }

    /// Makes a translated call whose request's first DATA frame passed its check
    /// (`check_request`) the relayed call it is wire-identical to: that frame and everything
    /// after it go on as they came, both ways. What the client gave the stream's window beyond
    /// its start came to the splice, which sent nothing on the stream: the plugin gets it.
    fn turn_relayed(&mut self, id: u32) {
        self.drop_translated_reply(id);
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        if !matches!(stream.side, Side::Translated(_)) {
            return;
        }
        let Side::Translated(t) = std::mem::replace(&mut stream.side, Side::Relayed) else {
            return;
        };
        let given = t.window - self.client_initial_window;
        if given > 0 {
            frame::put_window_update(&mut self.to_upstream, id, given as u32);
        }
        self.recycle(t);
    }

    /// A request header block, complete: `frames` are the HEADERS and CONTINUATION frames
    /// that carried it.
    fn on_request_block(
        &mut self,
        id: u32,
        end_stream: bool,
        bytes: &[u8],
        frames: &[u8],
    ) -> Result<(), Broken> {
        // The connection's first request block is kept whole: its `:authority` decides whether
        // the upstream can have the client's blocks as they came (see `localize`).
        let keep = self.reencode || self.last_stream == 0;
        let mut request = headers::request(&mut self.client_decoder, bytes, keep)
            .map_err(|_| Broken::Client("undecodable header block", reason::COMPRESSION_ERROR))?;
        if request.size > limits::HEADER_LIST_ABUSE * self.limits.max_header_list_size as usize {
            return Err(Broken::Client(
                "header list far over the limit",
                reason::ENHANCE_YOUR_CALM,
            ));
        }
        if id == 0 {
            return Err(Broken::Client(
                "HEADERS on stream 0",
                reason::PROTOCOL_ERROR,
            ));
        }
        if self.streams.contains_key(&id) {
            // Trailers must end the stream and hold no pseudo-header (RFC 9113 §8.1).
            let short = self.streams[&id].content_left.is_some_and(|n| n > 0);
            let malformed = match end_stream {
                false => Some("trailers without END_STREAM"),
                true if short => Some(CONTENT_LENGTH),
                true => request.malformed_trailers,
            };
            // Nor come after the client ended its half (RFC 9113 §5.1: half-closed).
            let closed = self.streams[&id].client_ended;
            let error = match (closed, malformed) {
                (true, _) => Some((reason::STREAM_CLOSED, "HEADERS after END_STREAM")),
                (false, Some(why)) => Some((reason::PROTOCOL_ERROR, why)),
                (false, None) => None,
            };
            if let Some((code, why)) = error {
                // Not passed on: the upstream's decoding context no longer follows.
                self.reencode = true;
                self.stream_error(id, code, why);
                return Ok(());
            }
        }
        if let Some(stream) = self.streams.get_mut(&id) {
            // Trailers from the client end its half of the stream.
            stream.request_done = true;
            self.served.mark();
            match stream.side {
                Side::Relayed => {
                    self.forward_request_block(id, end_stream, bytes, frames, request, true)
                }
                Side::Local(_) => {
                    self.reencode = true;
                    self.start_local(id);
                }
                Side::Translated(ref t) if !t.asked.relayed() => {
                    self.reencode = true;
                    self.send_translated(id, &[]);
                }
                // Its request relayed as it came (`Asked::Relayed`).
                Side::Translated(_) => {
                    self.forward_request_block(id, end_stream, bytes, frames, request, true)
                }
                Side::Service => {
                    self.reencode = true;
                    self.services.end_requests(id);
                }
            }
            return Ok(());
        }
        if id <= self.last_stream || id.is_multiple_of(2) {
            return Err(Broken::Client("stream id not new", reason::PROTOCOL_ERROR));
        }
        self.last_stream = id;
        // A malformed request is a stream error (RFC 9113 §8.1.1), on every path: what a
        // server behind the splice would answer, also for calls the splice answers itself.
        let no_content = end_stream && request.content_length.is_some_and(|n| n > 0);
        let malformed = match no_content {
            true => Some("a content-length and no DATA"),
            false => request.malformed,
        };
        if let Some(why) = malformed {
            tracing::debug!(
                stream = id,
                why,
                "malformed request: stream reset (PROTOCOL_ERROR)"
            );
            self.reencode = true;
            frame::put_rst_stream(self.own_out(), id, reason::PROTOCOL_ERROR);
            return Ok(());
        }
        if self.going_away.is_some_and(|last| id > last) {
            self.reencode = true;
            frame::put_rst_stream(self.own_out(), id, reason::REFUSED_STREAM);
            return Ok(());
        }
        let path = request.path.take().unwrap_or_default();
        let head = plan::Head {
            path: &path,
            header_list: request.size,
            authorization: self.authorization.as_ref(),
        };
        let (route, service, refused) = match plan::admit(&self.shared, &head) {
            Admission::Call(route) => (Some(route), None, None),
            Admission::Service(handler) => (None, Some(handler), None),
            Admission::Unknown => (None, None, None),
            Admission::Refused(route, s) => (route, None, Some(s)),
        };
        let planned = match (route, &refused) {
            (Some(r), None) => {
                let live = self.live.as_ref();
                live.map(|live| {
                    plan::plan(
                        &r,
                        live.detected.dialect,
                        live.session.requires_staging,
                        !end_stream,
                    )
                })
            }
            _ => None,
        };
        // Relayed on this connection's own upstream connection while it can take the call's
        // head: as it came, or on the plugin's path (a wire-identical call, or one translated
        // here, whose head goes on now and its message once whole, `send_translated`).
        let rewrite = match planned {
            Some(Plan::Relay { rewrite }) => rewrite,
            Some(Plan::TranslateHere(inline)) => Some(inline.path),
            _ => None,
        };
        let inline = match planned {
            Some(Plan::TranslateHere(inline)) => Some(inline),
            _ => None,
        };
        let relayed = !self.upstream_gone
            && !self.upstream_draining
            && match (planned, rewrite) {
                (Some(Plan::Answer) | None, _) => false,
                (_, None) => self.localize(&mut request, keep),
                (_, Some(to)) => self.rewrite_path(&mut request, keep, &path, to),
            };
        if self.streams.len() >= self.limits.max_concurrent_streams as usize
            || (!relayed && self.local_streams() >= MAX_LOCAL_CALLS)
        {
            self.reencode = true;
            frame::put_rst_stream(self.own_out(), id, reason::REFUSED_STREAM);
            return Ok(());
        }
        if let Some(handler) = &service {
            self.services.open(
                id,
                handler,
                &path,
                request.timeout,
                self.client_initial_window,
                end_stream,
            );
        }
        let mut report = Report::new(path);
        report.bridge_peer = self.authorization.is_some();
        report.called = route.map(|r| r.called());
        // Counted and logged as the translated call it stands for.
        report.translated = relayed && rewrite.is_some();
        report.service = service
            .as_ref()
            .map(|_| services::method_name(&report.path));
        if let Some(live) = &self.live {
            report.upstream_dialect = Some(live.detected.dialect);
            report.driver = Some(live.driver_name.clone());
        }
        let side = if let (true, Some(inline), Some(route)) = (relayed, inline, route) {
            self.own_streams = true;
            let window = self.client_initial_window;
            let spare = self.spare.pop();
            Side::Translated(Translated::start(
                spare,
                route,
                request.timeout,
                window,
                inline,
            ))
        } else if relayed {
            Side::Relayed
        } else if service.is_some() {
            Side::Service
        } else {
            Side::Local(Local {
                timeout: request.timeout,
                window: self.client_initial_window,
                refused,
                ..Local::default()
            })
        };
        let starts_local = end_stream && matches!(side, Side::Local(_));
        if end_stream {
            self.served.mark();
        }
        let content_length = request.content_length;
        // The splice's own calls keep their deadlines themselves (`call::answer`,
        // `local_stream`); the upstream's are kept here.
        let timeout = request.timeout.filter(|_| side.on_upstream());
        if relayed {
            self.forward_request_block(id, end_stream, bytes, frames, request, false);
        } else {
            // The upstream never sees this block: from now on, its decoding context no longer
            // follows the client's, and forwarded blocks are re-encoded.
            self.reencode = true;
        }
        self.streams.insert(
            id,
            Stream {
                started: self.now,
                report: Some(report),
                request_done: end_stream,
                reply_started: false,
                reply_done: false,
                timeout,
                client_ended: false,
                content_left: content_length,
                credit: self.client_stream_window,
                _in_flight: InFlight::start(),
                side,
            },
        );
        if let Some(at) = self.streams[&id].deadline() {
            self.deadlines.insert((at, id));
        }
        if starts_local {
            self.start_local(id);
        }
        Ok(())
    }

    /// Gives a new stream's request the `:authority` every UNIX-socket leg of the gateway sends
    /// (`headers::LOCAL_AUTHORITY`), so that a plugin that checks it (any tonic plugin) serves
    /// clients that send the socket path. A client that sends something else gets its blocks
    /// re-encoded from then on. False when the block cannot be rewritten (its fields were not
    /// kept): the splice answers that stream itself, on the gateway's own upstream connection.
    fn localize(&mut self, request: &mut headers::Request, kept: bool) -> bool {
        if request.local_authority {
            return true;
        }
        self.reencode = true;
        if kept {
            headers::localize_authority(&mut request.fields);
        }
        kept
    }

    /// Gives a wire-identical call's request the upstream's `:path`. While the upstream's
    /// decoding context follows the client's, in place ([`headers::rebuild`]: every such
    /// path is rewritten the same way on this connection, and where the two differ in length
    /// the client's decoder keeps the upstream's table apart, `headers::Follower`); else with
    /// the local `:authority`, re-encoding the connection's request blocks from now on. False
    /// when the block can be neither (its fields were not kept): the splice answers that
    /// stream itself, translated, on the gateway's own upstream connection.
    fn rewrite_path(
        &mut self,
        request: &mut headers::Request,
        kept: bool,
        from: &str,
        path: &'static str,
    ) -> bool {
        if !self.reencode
            && request.local_authority
            && request.paths == 1
            && self.client_decoder.follows(from, path.len())
        {
            if let Some(span) = request.path_span {
                request.rewrite = Some((span, path));
                return true;
            }
        }
        self.reencode = true;
        if !kept {
            return false;
        }
        if !request.local_authority {
            headers::localize_authority(&mut request.fields);
        }
        headers::set_path(&mut request.fields, path);
        true
    }

    /// Passes a request block to the upstream: its frames as they came while the upstream's
    /// decoding context still follows the client's, re-encoded once it does not.
    fn forward_request_block(
        &mut self,
        id: u32,
        end_stream: bool,
        block: &[u8],
        frames: &[u8],
        request: headers::Request,
        trailers: bool,
    ) {
        if !self.reencode {
            // The client's encoder signals its own table's changes to the upstream.
            self.upstream_expects_update = None;
            // Several `:path` fields, or one in trailers (both malformed), may leave an entry
            // in the upstream's table that no in-place rewrite made: no later block may refer
            // to the upstream's table then.
            self.reencode = request.paths > 1 || (trailers && request.paths > 0);
            // A rewritten path is patched where it lies when it can be, else its block rebuilt,
            // as it is with fields that refer to entries the upstream's table no longer has.
            let out = &mut self.to_upstream;
            let patched = !request.patches.is_empty();
            if let Some((span, path)) = request.rewrite.filter(|_| !patched) {
                if self
                    .path_fields
                    .put_rewritten(frames, block, span, path, out)
                {
                    return;
                }
            }
            let renamed = request
                .rewrite
                .is_some_and(|(s, _)| s.rep != headers::Rep::Indexed);
            if patched || renamed {
                headers::rebuild(
                    block,
                    &request.patches,
                    request.rewrite,
                    &mut self.rewritten,
                );
                frame::put_headers(
                    out,
                    id,
                    &self.rewritten,
                    end_stream,
                    self.upstream_max_frame,
                );
                // Kept for the next call at the size of an ordinary block, not the largest.
                if self.rewritten.capacity() > 4096 {
                    self.rewritten = Vec::new();
                }
                return;
            }
            return self.to_upstream.extend_from_slice(frames);
        }
        let block = headers::encode(request.fields, self.upstream_expects_update.take());
        frame::put_headers(
            &mut self.to_upstream,
            id,
            &block,
            end_stream,
            self.upstream_max_frame,
        );
    }

    /// Sends a translated call's message once its request is whole: translated for the plugin
    /// (`call::inline_request`) and paid for with the connection window the client's DATA took,
    /// the rest given back to the client. A call that is not the one call its head named, or
    /// whose message is larger than that window, is answered by the splice itself.
    /// `last` is the request's last piece, not in its body yet: a request that came in one
    /// DATA frame (most) is translated from that frame, never copied.
    fn send_translated(&mut self, id: u32, last: &[u8]) {
        let Some(live) = self.live.clone() else {
            // Only a connection with an upstream of its own translates calls on it.
            return self.fall_back(id);
        };
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let head_sent = stream.reply_started;
        let (Side::Translated(t), Some(report)) = (&mut stream.side, stream.report.as_mut()) else {
            return;
        };
        if t.asked.sent() {
            return;
        }
        if !t.body.is_empty() {
            t.body.extend_from_slice(last);
        }
        let body = if t.body.is_empty() { last } else { &t.body[..] };
        let outcome = call::inline_request(&live, t.route, t.path, body, report);
        if !matches!(outcome, call::Inline::Call(..)) && t.body.is_empty() {
            // Answered by the splice after all, which wants the request whole.
            t.body.extend_from_slice(last);
        }
        if let Some(early) = t.early.take() {
            // The plugin answered already: its answer, translated.
            let answer = match outcome {
                call::Inline::Call(request, _) => {
                    call::inline_reply(&self.shared, &live, t.route, &request, Err(early), report)
                }
                call::Inline::Answer(answer) => answer,
                call::Inline::Fallback => return self.fall_back(id),
            };
            self.release_translated(id);
            return self.reply_translated(id, answer, head_sent);
        }
        match outcome {
            call::Inline::Call(request, message)
                if (grpc_frame::HEADER + message.len()) as u64 <= t.credit
                    && (grpc_frame::HEADER + message.len()) as i64
                        <= self.upstream_initial_window =>
            {
                let refund = t.credit - (grpc_frame::HEADER + message.len()) as u64;
                t.credit = 0;
                t.body.clear();
                t.asked = Asked::Hub(request);
                frame::put_message(
                    &mut self.to_upstream,
                    id,
                    &message,
                    frame::END_STREAM,
                    self.upstream_max_frame,
                );
                if refund > 0 {
                    self.give_back(refund as u32);
                }
            }
            call::Inline::Answer(answer) => {
                self.release_translated(id);
                self.reply_translated(id, answer, head_sent);
            }
            _ => self.fall_back(id),
        }
    }

    /// A translated call takes `call::answer`'s path after all.
    fn fall_back(&mut self, id: u32) {
        self.translated_to_local(id);
        self.start_local(id);
    }

    /// A translated call answered by the splice itself after all: the plugin's stream is
    /// reset (nothing of it reaches the client), the client gets back the window its DATA
    /// took, and the stream becomes a local one with what it has of its request.
    fn translated_to_local(&mut self, id: u32) {
        self.drop_translated_reply(id);
        // Given back with what the local call holds (`give_back`), not at once.
        let credit = match self.streams.get_mut(&id).map(|s| &mut s.side) {
            Some(Side::Translated(t)) => std::mem::take(&mut t.credit),
            _ => 0,
        };
        self.release_translated(id);
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let Side::Translated(t) = &mut stream.side else {
            return;
        };
        let local = Local {
            body: std::mem::take(&mut t.body),
            timeout: t.timeout,
            window: t.window,
            ..Local::default()
        };
        let held = local.body.len();
        stream.side = Side::Local(local);
        self.hold(held);
        self.give_back(credit as u32);
    }

    /// Lets go of a translated call's stream on the upstream (reset, unless its reply ended)
    /// and gives the client back the window its DATA took.
    fn release_translated(&mut self, id: u32) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let upstream_done = stream.reply_done;
        let Side::Translated(t) = &mut stream.side else {
            return;
        };
        let credit = std::mem::take(&mut t.credit);
        // Marked done: `remove` resets it no more.
        stream.reply_done = true;
        if !upstream_done {
            self.reset_on_upstream(id);
        }
        if credit > 0 {
            self.give_back(credit as u32);
        }
    }

    /// Resets a stream the splice opened on the upstream, and remembers it (`reset_upstream`).
    /// A stream error of the client's (RFC 9113 §5.4.2) on a stream the gateway knows: reset
    /// with `code` to the client and on the upstream, and ended.
    fn stream_error(&mut self, id: u32, code: Reason, why: &'static str) {
        tracing::debug!(stream = id, why, %code, "stream error: stream reset");
        frame::put_rst_stream(self.own_out(), id, code);
        if self
            .streams
            .get(&id)
            .is_some_and(|s| matches!(s.side, Side::Relayed))
        {
            self.reset_on_upstream(id);
        }
        let message = Some(format!("stream error: {why}"));
        self.end_stream(id, Code::Internal, Origin::Client, message);
    }

    fn reset_on_upstream(&mut self, id: u32) {
        if !self.upstream_gone {
            frame::put_rst_stream(&mut self.to_upstream, id, reason::CANCEL);
        }
        self.reset_upstream.push_back(id);
        if self.reset_upstream.len() > RESET_REMEMBERED {
            self.reset_upstream.pop_front();
        }
    }

    /// A translated call's answer, sent by the splice as a local stream's reply (after the
    /// plugin's reply head, if that went to the client already).
    fn reply_translated(&mut self, id: u32, answer: Result<Vec<u8>, Status>, head_sent: bool) {
        self.drop_translated_reply(id);
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let window = match &stream.side {
            Side::Translated(t) => t.window,
            Side::Local(l) => l.window,
            _ => return,
        };
        let reply = reply_frames(answer, !head_sent);
        let held = reply.data.len();
        stream.side = Side::Local(Local {
            window,
            reply: Some(reply),
            ..Local::default()
        });
        self.replying.push_back(id);
        self.hold_reply(held);
    }

    /// Starts answering a local stream whose request is complete.
    fn start_local(&mut self, id: u32) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        // Answered already: a translated call whose plugin replied before the client's request
        // ended (`Asked::Relayed`) is never made a second time.
        if matches!(&stream.side, Side::Local(l) if l.reply.is_some()) {
            return;
        }
        let Side::Local(local) = &mut stream.side else {
            return;
        };
        if stream.report.is_none() {
            return; // started already
        }
        // A refused call's reply is its status alone: it needs no room.
        if local.refused.is_none() && local.room.is_none() && self.free_call != Some(id) {
            local.room = Held::reserve(&self.shared, REPLY_ROOM);
            if local.room.is_none() {
                let others = self.local_bodies + self.services_held + self.replies_held;
                if self.free_call.is_some() || others > local.body.len() {
                    return self.wait_for_room(id);
                }
                self.free_call = Some(id);
            }
        }
        let Some(mut report) = stream.report.take() else {
            return;
        };
        let body = std::mem::take(&mut local.body).freeze();
        // Off the connection's count, on the gateway's until the call ends with its request.
        self.local_bodies -= body.len();
        let held = Held(self.shared.clone(), body.len());
        let started = stream.started;
        let refused = local.refused.take();
        let timeout = local.timeout;
        let shared = self.shared.clone();
        let (cancel, mut cancelled) = tokio::sync::oneshot::channel();
        local.cancel = Some(cancel);
        self.calls.push(Box::pin(async move {
            let _held = held;
            let outcome = if let Some(s) = refused {
                reply::error_reply(report.called, Origin::Client, s, &mut report)
            } else {
                let message = grpc_frame::decode_unary(&body).map(Bytes::copy_from_slice);
                tokio::select! {
                    biased;
                    _ = &mut cancelled => {
                        let s = Status::cancelled("the client reset the stream");
                        report.fail(Origin::Client, &s);
                        Err(s)
                    }
                    outcome = call::answer(&shared, message, timeout, &mut report) => outcome,
                }
            };
            (id, started, report, outcome)
        }));
    }

    /// A local call with no room for its reply waits (`waiting_room`).
    fn wait_for_room(&mut self, id: u32) {
        if !self.waiting_room.iter().any(|&(w, _)| w == id) {
            tracing::debug!(stream = id, "call waits for room for its reply");
            self.waiting_room.push_back((id, Instant::now()));
        }
    }

    /// Calls or service streams wait for room: they look again in `BUDGET_RETRY` (room another
    /// connection makes is not announced).
    fn note_short_of_room(&mut self) {
        let short = !self.waiting_room.is_empty() || self.services.short_of_room();
        if short && self.room_retry.is_none() {
            self.room_retry = Some(Instant::now() + BUDGET_RETRY);
        }
    }

    /// Starts the waiting calls, oldest first, as long as the gateway has room for their
    /// replies.
    fn admit_waiting(&mut self) -> bool {
        let mut started = false;
        while let Some(&(id, _)) = self.waiting_room.front() {
            let waits = match self.streams.get_mut(&id).map(|s| &mut s.side) {
                Some(Side::Local(local)) if local.room.is_none() && local.reply.is_none() => {
                    local.room = Held::reserve(&self.shared, REPLY_ROOM);
                    if local.room.is_none() {
                        let others = self.local_bodies + self.services_held + self.replies_held;
                        if self.free_call.is_some() || others > local.body.len() {
                            return started;
                        }
                        self.free_call = Some(id);
                    }
                    true
                }
                _ => false, // gone, or answered otherwise meanwhile
            };
            self.waiting_room.pop_front();
            if waits {
                self.start_local(id);
                started = true;
            }
        }
        started
    }

    /// Refuses the waiting calls whose deadline passed (DEADLINE_EXCEEDED) or that waited
    /// `BUDGET_WAIT` for room (RESOURCE_EXHAUSTED): their requests are let go, and a client
    /// that does not read its replies cannot keep other calls waiting without end.
    fn expire_waiting(&mut self) {
        let now = Instant::now();
        let mut refused = Vec::new();
        self.waiting_room.retain(|&(id, since)| {
            let Some(stream) = self.streams.get(&id) else {
                return false;
            };
            let Side::Local(local) = &stream.side else {
                return false;
            };
            let deadline = local.timeout.and_then(|t| stream.started.checked_add(t));
            let status = if deadline.is_some_and(|at| at <= now) {
                Status::deadline_exceeded(format!(
                    "deadline of {:?} exceeded waiting for room in the gateway for its reply (max_buffered_bytes)",
                    local.timeout.unwrap_or_default()
                ))
            } else if now.duration_since(since) >= limits::BUDGET_WAIT {
                limits::no_reply_room()
            } else {
                return true;
            };
            refused.push((id, status));
            false
        });
        for (id, status) in refused {
            tracing::debug!(stream = id, code = ?status.code(), "call refused: no room for its reply");
            if let Some(Side::Local(local)) = self.streams.get_mut(&id).map(|s| &mut s.side) {
                local.refused = Some(status);
                self.start_local(id);
            }
        }
    }

    /// `n` more request bytes held for a local call, on the connection's count and the
    /// gateway's (`Shared::buffered`).
    fn hold(&mut self, n: usize) {
        self.local_bodies += n;
        self.shared.buffered.take(n);
    }

    fn let_go(&mut self, n: usize) {
        self.local_bodies -= n;
        self.shared.buffered.give(n);
    }

    /// `n` more reply bytes held for the client, on the connection's count and the gateway's.
    fn hold_reply(&mut self, n: usize) {
        self.replies_held += n;
        self.shared.buffered.take(n);
    }

    fn let_go_reply(&mut self, n: usize) {
        self.replies_held -= n;
        self.shared.buffered.give(n);
    }

    /// A translated call's reply as it came from the plugin is no longer needed (answered, or
    /// the stream becomes another kind): let go.
    fn drop_translated_reply(&mut self, id: u32) {
        let Some(Side::Translated(t)) = self.streams.get_mut(&id).map(|s| &mut s.side) else {
            return;
        };
        let n = t.reply.len();
        t.reply.clear();
        self.let_go_reply(n);
    }

    /// What this connection holds, of requests and replies, on the gateway's count.
    fn holds(&self) -> usize {
        self.local_bodies + self.services_held + self.replies_held
    }

    /// Whether the client may be granted more window now: the connection and the gateway may
    /// hold more.
    fn may_grant(&self) -> bool {
        self.holds() < limits::CONNECTION_BUFFERED && self.shared.buffered.room()
    }

    /// Whether the upstream is read: not while this connection holds replies and it or the
    /// gateway may hold no more. The plugin's replies then wait in the plugin, paced by flow
    /// control, rather than in the gateway.
    fn reads_upstream(&self) -> bool {
        self.replies_held == 0 || self.may_grant()
    }

    /// The upstream has not been read for `BUDGET_WAIT`. Replies whole and waiting for the
    /// client free their room as it reads; translated replies still coming would hold theirs
    /// without end (every connection's waiting for another's room): the largest is answered
    /// RESOURCE_EXHAUSTED, its stream reset on the upstream, and what it held let go.
    fn make_reply_room(&mut self) {
        self.replies_paused = Some(Instant::now());
        let largest = self
            .streams
            .iter()
            .filter_map(|(id, s)| match &s.side {
                Side::Translated(t) if !s.reply_done && !t.reply.is_empty() => {
                    Some((t.reply.len(), *id))
                }
                _ => None,
            })
            .max();
        let Some((held, id)) = largest else {
            return;
        };
        tracing::debug!(
            stream = id,
            held,
            "translated reply refused: no room to hold it"
        );
        let head_sent = self.streams.get(&id).is_some_and(|s| s.reply_started);
        let refusal = Status::resource_exhausted(format!(
            "the gateway holds all the replies it may (max_buffered_bytes, or {} bytes on this connection); this one waited {:?} for room",
            limits::CONNECTION_BUFFERED,
            limits::BUDGET_WAIT,
        ));
        self.release_translated(id);
        self.reply_translated(id, Err(refusal), head_sent);
    }

    /// Connection window for `n` bytes of a local call's request the splice consumed: given
    /// back now if the connection and the gateway may hold more, else once they may
    /// (`withheld`), so that a client obeying flow control sends no more meanwhile.
    fn give_back(&mut self, n: u32) {
        self.withheld += n as u64;
        if self.withheld > 0 && self.withheld_since.is_none() {
            self.withheld_since = Some(self.now);
        }
        self.grant_withheld();
    }

    fn grant_withheld(&mut self) {
        if self.withheld == 0 || !self.may_grant() {
            return;
        }
        // Never more than a window may be: only a client sending past its window withholds more.
        let n = std::mem::take(&mut self.withheld).min(frame::MAX_WINDOW as u64);
        self.withheld_since = None;
        self.grant(0, n as u32);
    }

    /// Window withheld `BUDGET_WAIT`: the connection's largest unfinished local request is
    /// answered RESOURCE_EXHAUSTED now and what it held let go.
    fn make_room(&mut self) {
        self.withheld_since = Some(Instant::now());
        let largest = self
            .streams
            .iter()
            .filter_map(|(id, s)| match &s.side {
                Side::Local(l) if !s.request_done && l.cancel.is_none() && !l.body.is_empty() => {
                    Some((l.body.len(), *id))
                }
                _ => None,
            })
            .max();
        let refusal = limits::no_room();
        // A service's stream, if it holds more: ended at the services' next poll.
        if let Some((held, id)) = self.services.largest_unfinished() {
            if largest.is_none_or(|(local, _)| held > local) {
                tracing::debug!(
                    stream = id,
                    held,
                    "service request refused: no room to buffer it"
                );
                self.services.refuse(id, refusal);
                return;
            }
        }
        let Some((_, id)) = largest else {
            return;
        };
        let Some(Side::Local(local)) = self.streams.get_mut(&id).map(|s| &mut s.side) else {
            return;
        };
        local.refused = Some(refusal);
        let held = std::mem::take(&mut local.body).len();
        tracing::debug!(stream = id, held, "request refused: no room to buffer it");
        self.let_go(held);
        self.start_local(id);
        self.grant_withheld();
    }

    /// A local call's outcome, turned into the frames of its reply.
    fn answered(&mut self, (id, started, mut report, outcome): LocalOutcome) {
        if self.free_call == Some(id) {
            self.free_call = None;
        }
        let Some(stream) = self.streams.get_mut(&id) else {
            // The client reset the stream meanwhile: the call is reported, not answered.
            report.fail(
                Origin::Client,
                &Status::cancelled("the client reset the stream"),
            );
            return observe::finish(&report, started.elapsed(), &self.shared.redactor);
        };
        let Side::Local(local) = &mut stream.side else {
            return;
        };
        let reply = reply_frames(outcome, true);
        let held = reply.data.len();
        local.reply = Some(reply);
        // Its room is exchanged for what the reply really holds.
        let room = local.room.take();
        stream.report = Some(report);
        self.replying.push_back(id);
        self.hold_reply(held);
        drop(room);
    }

    /// Writes as much of the local replies as the client's windows allow, never inside a
    /// reply header block the upstream has begun.
    fn send_replies(&mut self) {
        // Replies passed over, their stream's window spent: a client that does not read one
        // stream does not hold back the others' (a refusal waiting for room is trailers alone).
        let mut passed = 0;
        while let Some(&id) = self.replying.front() {
            if passed >= self.replying.len() {
                return;
            }
            if self.reply_block.is_some() || self.client_settings_unacked() {
                return;
            }
            let out = if self.server_preface {
                &mut self.to_client
            } else {
                &mut self.own
            };
            let Some(Stream {
                side: Side::Local(local),
                ..
            }) = self.streams.get_mut(&id)
            else {
                self.replying.pop_front();
                continue;
            };
            let Some(reply) = local.reply.as_mut() else {
                self.replying.pop_front();
                continue;
            };
            if out.len() >= HIGH_WATER {
                return; // the client reads slowly: the rest waits here, counted
            }
            let only_head = reply.data.is_empty() && reply.trailers.is_none();
            if let Some(head) = reply.head.take() {
                let mut block = Vec::with_capacity(head.len() + 4);
                self.upstream_decoder.own_block(&mut block);
                block.extend_from_slice(&head);
                frame::put_headers(out, id, &block, only_head, self.client_max_frame);
            }
            let mut stream_spent = false;
            while !reply.data.is_empty() {
                let room = self
                    .window
                    .min(local.window)
                    .min(self.client_max_frame as i64);
                if self.window <= 0 {
                    return; // wait for the client's WINDOW_UPDATE
                }
                if room <= 0 {
                    stream_spent = true;
                    break;
                }
                let piece = reply.data.split_to((room as usize).min(reply.data.len()));
                frame::put(out, Kind::Data, 0, id, &piece);
                self.window -= piece.len() as i64;
                local.window -= piece.len() as i64;
                self.debt += piece.len() as u64;
                self.replies_held -= piece.len();
                self.shared.buffered.give(piece.len());
                if out.len() >= HIGH_WATER {
                    break;
                }
            }
            if stream_spent {
                self.replying.pop_front();
                self.replying.push_back(id);
                passed += 1;
                continue;
            }
            if !reply.data.is_empty() {
                return;
            }
            if let Some(trailers) = reply.trailers.take() {
                let mut block = Vec::with_capacity(trailers.len() + 4);
                self.upstream_decoder.own_block(&mut block);
                block.extend_from_slice(&trailers);
                frame::put_headers(out, id, &block, true, self.client_max_frame);
            }
            self.replying.pop_front();
            let request_done = self.streams.get(&id).is_some_and(|s| s.request_done);
            if !request_done {
                // Answered before the client finished (a refused oversized request).
                frame::put_rst_stream(self.own_out(), id, reason::NO_ERROR);
            }
            // Its outcome is in its report already.
            self.remove(id);
        }
    }

    /// Where a frame of the splice's own for the client goes now: straight on, or held while
    /// it may not go yet (see `own`). Header blocks of its own are never written inside the
    /// upstream's, so only single frames are ever held.
    /// The client's SETTINGS are not acknowledged yet (the splice's ACK follows the upstream's).
    /// The gateway's own replies wait for that ACK, as the upstream's do: a client applies its
    /// own SETTINGS once they are acknowledged, so DATA sent before counts against its old
    /// INITIAL_WINDOW_SIZE, and a client that then shrinks its window on the ACK may never give
    /// that credit back (h2 0.4 does not: the stream stalls with the gateway's window at 0).
    fn client_settings_unacked(&self) -> bool {
        !self.settings_to_upstream.is_empty()
    }

    fn own_out(&mut self) -> &mut BytesMut {
        if self.reply_block.is_some() || !self.server_preface {
            &mut self.own
        } else {
            &mut self.to_client
        }
    }

    /// Lets the held frames go once they may.
    fn release_own(&mut self) {
        if !self.own.is_empty() && self.reply_block.is_none() && self.server_preface {
            let own = self.own.split();
            self.to_client.unsplit(own);
        }
    }

    /// The gateway's limits as SETTINGS, for its server preface when the upstream's never came.
    fn own_settings(&self) -> Vec<(u16, u32)> {
        vec![
            (
                frame::SETTINGS_MAX_CONCURRENT_STREAMS,
                self.limits.max_concurrent_streams,
            ),
            (
                frame::SETTINGS_MAX_HEADER_LIST_SIZE,
                self.limits.max_header_list_size,
            ),
        ]
    }

    /// Notes when the connection last had no stream, for the idle timeout.
    fn note_idle(&mut self) {
        let idle = self.streams.is_empty() && self.calls.is_empty();
        match (idle, self.idle_since) {
            (true, None) => self.idle_since = Some(Instant::now()),
            (false, Some(_)) => self.idle_since = None,
            _ => {}
        }
    }

    /// The next timeout, and what it is for.
    fn deadline(&self) -> Option<(Instant, Timeout)> {
        let keepalive = self
            .ping_at
            .filter(|_| !self.upstream_gone)
            .map(|at| (at, Timeout::Keepalive));
        let handshake = self
            .upstream_asked
            .filter(|_| !self.server_preface && !self.upstream_gone)
            .zip(self.live.as_ref())
            .and_then(|(asked, live)| asked.checked_add(live.connect_timeout))
            .map(|at| (at, Timeout::UpstreamHandshake));
        // Not inside the upstream's header block, where nothing of the splice's own may go to
        // the client: a call that expires then is answered once the block ends.
        let call = match self.reply_block {
            None => self.deadlines.first().map(|&(at, _)| (at, Timeout::Call)),
            Some(_) => None,
        };
        // Room another connection makes is not announced: looked for every `BUDGET_RETRY`.
        let budget = self
            .withheld_since
            .filter(|_| self.withheld > 0)
            .map(|since| {
                let at = (Instant::now() + BUDGET_RETRY).min(since + limits::BUDGET_WAIT);
                (at, Timeout::Budget)
            })
            .or_else(|| {
                let since = self.replies_paused?;
                let at = (Instant::now() + BUDGET_RETRY).min(since + limits::BUDGET_WAIT);
                Some((at, Timeout::Budget))
            })
            .or_else(|| Some((self.room_retry?, Timeout::Budget)));
        [self.client_deadline(), keepalive, handshake, call, budget]
            .into_iter()
            .flatten()
            .min_by_key(|&(at, _)| at)
    }

    /// The next timeout of the client's side.
    fn client_deadline(&self) -> Option<(Instant, Timeout)> {
        if !self.preface {
            return Some((self.accepted + limits::PREFACE_TIMEOUT, Timeout::Preface));
        }
        if let Some(since) = self.block_since.into_iter().chain(self.frame_since).min() {
            return Some((
                since + self.limits.header_block_timeout,
                Timeout::HeaderBlock,
            ));
        }
        let idle = self.limits.idle_timeout;
        match self.idle_since {
            _ if idle.is_zero() => None,
            Some(since) if self.going_away.is_none() => Some((since + idle, Timeout::Idle)),
            // One stream opened and never finished would keep a connection from ever being
            // idle: a client silent that long with a request unfinished has stalled.
            None if !self.streams.is_empty() => Some((self.client_heard + idle, Timeout::Stalled)),
            _ => None,
        }
    }

    /// `idle_timeout` passed with the client silent and streams open: the streams whose
    /// request it never finished are reset (CANCEL) and the connection asked to go away; with
    /// none such, the check starts over.
    fn stalled(&mut self) {
        let stalled: Vec<u32> = self
            .streams
            .iter()
            .filter(|(_, s)| !s.request_done && !matches!(s.side, Side::Service))
            .map(|(id, _)| *id)
            .collect();
        self.client_heard = self.now;
        if stalled.is_empty() {
            return;
        }
        tracing::debug!(streams = stalled.len(), after = ?self.limits.idle_timeout, "requests not finished by a silent client: streams reset, connection asked to go away");
        for id in stalled {
            self.stream_error(
                id,
                reason::CANCEL,
                "request not finished within idle_timeout",
            );
        }
        self.go_away();
    }

    /// A timeout fired: `Some` when the connection ends now.
    fn timed_out(&mut self, why: Timeout) -> Option<Poll<()>> {
        match why {
            Timeout::Preface => {
                tracing::debug!(after = ?self.accepted.elapsed(), "client sent no HTTP/2 preface");
                Some(Poll::Ready(()))
            }
            Timeout::HeaderBlock => Some(self.fail(Broken::Client(
                "header block or frame not finished in time",
                reason::PROTOCOL_ERROR,
            ))),
            Timeout::Idle => {
                tracing::debug!("idle client connection asked to go away");
                self.go_away();
                None
            }
            Timeout::Keepalive => {
                self.keepalive_due();
                None
            }
            Timeout::UpstreamHandshake => {
                let timeout = self.live.as_ref().map(|l| l.connect_timeout);
                let why = format!(
                    "no HTTP/2 SETTINGS within {:?} (upstream.connect_timeout)",
                    timeout.unwrap_or_default()
                );
                self.upstream_lost(&why);
                None
            }
            Timeout::Call => {
                self.calls_expired();
                None
            }
            Timeout::Stalled => {
                self.stalled();
                None
            }
            // `poll_run` grants what it may.
            Timeout::Budget => {
                if self
                    .withheld_since
                    .is_some_and(|t| t.elapsed() >= limits::BUDGET_WAIT)
                {
                    self.make_room();
                }
                if self
                    .replies_paused
                    .is_some_and(|t| t.elapsed() >= limits::BUDGET_WAIT)
                {
                    self.make_reply_room();
                }
                if self.room_retry.is_some_and(|at| at <= Instant::now()) {
                    // Set again by `poll_run` while anything still waits.
                    self.room_retry = None;
                    self.expire_waiting();
                    self.admit_waiting();
                }
                None
            }
        }
    }

    /// The calls whose deadlines passed (the first one's at least, which the timer fired for):
    /// each gets DEADLINE_EXCEEDED from the gateway in the plugin's place. Before the
    /// upstream's SETTINGS nothing can reach the client but after a server preface of the
    /// gateway's own: the upstream connection is given up then, as when it closes.
    fn calls_expired(&mut self) {
        let now = Instant::now();
        let due = self.deadlines.first().map_or(now, |&(at, _)| at.max(now));
        let mut expired = Vec::new();
        while let Some(&(at, id)) = self.deadlines.first() {
            if at > due {
                break;
            }
            self.deadlines.pop_first();
            let waiting = self
                .streams
                .get(&id)
                .is_some_and(|s| s.side.on_upstream() && !s.reply_done);
            if waiting {
                expired.push(id);
            }
        }
        if expired.is_empty() {
            return;
        }
        for &id in &expired {
            self.deadline_exceeded(id);
        }
        if !self.server_preface {
            self.upstream_lost("no HTTP/2 SETTINGS before a call's deadline");
        }
    }

    /// A call on the upstream whose deadline passed before its reply ended: answered
    /// DEADLINE_EXCEEDED by the gateway, as a call it answers gets it
    /// (`call::answer::with_deadline`), and its stream reset on the upstream (RST_STREAM
    /// CANCEL), whose frames on it from then on are dropped (`reset_upstream`).
    fn deadline_exceeded(&mut self, id: u32) {
        let Some(stream) = self.streams.get(&id) else {
            return;
        };
        let timeout = stream.timeout.unwrap_or_default();
        let s = Status::deadline_exceeded(format!(
            "deadline of {timeout:?} exceeded waiting for upstream {}",
            self.upstream_name()
        ));
        tracing::debug!(
            stream = id,
            ?timeout,
            "call past its deadline; answered by the gateway"
        );
        if matches!(stream.side, Side::Translated(_)) {
            let head_sent = stream.reply_started;
            self.release_translated(id);
            let Some(stream) = self.streams.get_mut(&id) else {
                return;
            };
            let answer = match stream.report.as_mut() {
                Some(report) => reply::error_reply(report.called, Origin::Gateway, s, report),
                None => Err(s),
            };
            return self.reply_translated(id, answer, head_sent);
        }
        // From now on the upstream's stream frames are sorted (`passes_on`).
        self.own_streams = true;
        self.reset_on_upstream(id);
        self.answer_instead(id, &s);
    }

    /// A keepalive PING is due, or the last one's ACK is overdue.
    fn keepalive_due(&mut self) {
        let Some(k) = self.keepalive else { return };
        if !self.client_settings_seen {
            // The upstream's first frame must be the SETTINGS that follows the preface, which
            // the client's own SETTINGS brings: no PING before it.
            self.ping_at = Some(Instant::now() + k.interval);
            return;
        }
        if self.ping_out {
            let why = format!("no keepalive ping reply within {:?}", k.timeout);
            tracing::warn!(upstream = %self.upstream_name(), reason = %why, "upstream peer unresponsive; dropping the connection");
            self.ping_at = None;
            return self.upstream_lost(&why);
        }
        frame::put(&mut self.to_upstream, Kind::Ping, 0, 0, &KEEPALIVE_PING);
        self.ping_out = true;
        self.ping_at = Some(Instant::now() + k.timeout);
    }

    fn local_streams(&self) -> usize {
        self.streams
            .values()
            .filter(|s| matches!(s.side, Side::Local(_) | Side::Service))
            .count()
    }

    /// Moves the gateway-service streams on (`local_stream`), never inside a reply header
    /// block the upstream has begun; ends those that ended. `true` if anything moved.
    fn poll_services(&mut self, cx: &mut Context<'_>) -> bool {
        if self.reply_block.is_some() || self.client_settings_unacked() {
            return false;
        }
        let room = self.to_client.len() < HIGH_WATER;
        let mut out = local_stream::Out {
            frames: if self.server_preface {
                &mut self.to_client
            } else {
                &mut self.own
            },
            encoder: &mut self.upstream_decoder,
            window: &mut self.window,
            debt: &mut self.debt,
            max_frame: self.client_max_frame,
            room,
        };
        let mut ended = Vec::new();
        let progress = self.services.poll(cx, &mut out, &mut ended);
        self.services_granted();
        self.count_services();
        for local_stream::Finished { id, status } in ended {
            let Some(stream) = self.streams.get_mut(&id) else {
                continue;
            };
            if let (Some(report), false) = (stream.report.as_mut(), status.code() == Code::Ok) {
                report.fail(services::origin(status.code()), &status);
            }
            if !stream.request_done {
                // Answered before the client finished: it may stop sending (RFC 9113 §8.1).
                frame::put_rst_stream(self.own_out(), id, reason::NO_ERROR);
            }
            self.remove(id);
        }
        progress
    }

    /// Keeps `Shared::buffered` at what the services hold of this connection's requests.
    fn count_services(&mut self) {
        let now = self.services.held();
        if now > self.services_held {
            self.shared.buffered.take(now - self.services_held);
        } else {
            self.shared.buffered.give(self.services_held - now);
        }
        self.services_held = now;
    }

    /// Counts the stream window the services gave the client (`Stream::credit`).
    fn services_granted(&mut self) {
        for (id, n) in self.services.drain_granted() {
            if let Some(s) = self.streams.get_mut(&id) {
                s.credit += n as i64;
            }
        }
    }

    // ---- upstream to client ----

    fn on_upstream_bytes(&mut self) -> Result<(), Broken> {
        self.held = false;
        let mut buf = std::mem::take(&mut self.from_upstream);
        let piece = self.to_client.len() + PIECE;
        let handled = take_frames(&mut buf, |head, whole| {
            if !self.replying.is_empty() {
                // Replies translated from the frames before count towards the piece.
                self.send_replies();
            }
            if self.to_client.len() >= piece {
                self.upstream_unhandled = true;
                return Ok(false);
            }
            if head.kind == Kind::Data && head.len as i64 > self.window {
                // The upstream counts on window the splice's own replies used: wait for more.
                self.held = true;
                return Ok(false);
            }
            self.on_upstream_frame(head, whole).map(|()| true)
        });
        self.from_upstream = buf;
        handled?;
        if self.held {
            return Ok(());
        }
        if self.from_upstream.len() >= frame::HEAD_LEN {
            let head = Head::parse(&self.from_upstream);
            // Refused before it is buffered: a peer that is not HTTP/2 (an HTTP/1 answer, read
            // as a frame head, announces megabytes) is given up on at once, not waited for.
            if !self.server_preface && (head.kind != Kind::Settings || head.has(frame::ACK)) {
                return Err(Broken::Upstream(
                    "the upstream did not start with SETTINGS".into(),
                ));
            }
            if head.len > self.upstream_frame_limit {
                return Err(Broken::Upstream("frame larger than allowed".into()));
            }
            self.from_upstream.reserve(frame::HEAD_LEN + head.len);
        }
        Ok(())
    }

    fn on_upstream_frame(&mut self, head: Head, whole: &[u8]) -> Result<(), Broken> {
        let payload = &whole[frame::HEAD_LEN..];
        if head.len > self.upstream_frame_limit {
            return Err(Broken::Upstream("frame larger than allowed".into()));
        }
        frame::check(&head, payload).map_err(|(what, _)| Broken::Upstream(what.into()))?;
        if !self.server_preface && (head.kind != Kind::Settings || head.has(frame::ACK)) {
            return Err(Broken::Upstream(
                "the upstream did not start with SETTINGS".into(),
            ));
        }
        if self.reply_block.is_some() && head.kind != Kind::Continuation {
            return Err(Broken::Upstream("header block interrupted".into()));
        }
        // A stream's frames travel on; the connection's are answered here.
        let stream_frame = matches!(
            head.kind,
            Kind::Data | Kind::Headers | Kind::Continuation | Kind::RstStream | Kind::WindowUpdate
        );
        let passes = stream_frame && self.passes_on(&head);
        if passes && head.kind == Kind::WindowUpdate {
            let n = frame::increment(payload).map_err(upstream_malformed)?;
            if head.stream == 0 && !self.may_grant() {
                // No new request bytes while the gateway holds all it may: granted later.
                self.give_back(n);
            } else {
                self.to_client.extend_from_slice(whole);
                self.granted(head.stream, n);
            }
        } else if passes {
            self.to_client.extend_from_slice(whole);
        }
        match head.kind {
            Kind::Data if !passes => self.kept_data(head, payload)?,
            Kind::Data => {
                self.window -= head.len as i64;
                let end = head.has(frame::END_STREAM);
                if let Some(stream) = self.streams.get_mut(&head.stream) {
                    if let Some(report) = stream.report.as_mut() {
                        if report.response.is_none() && observe::bodies_enabled() {
                            let range =
                                frame::content(&head, payload).map_err(upstream_malformed)?;
                            report.response = first_message(&payload[range]);
                        }
                    }
                    if end {
                        // A reply that ends without trailers has no status.
                        self.reply_ended(head.stream, None);
                    }
                }
            }
            Kind::Headers => {
                let range = frame::content(&head, payload).map_err(upstream_malformed)?;
                let end_stream = head.has(frame::END_STREAM);
                if head.has(frame::END_HEADERS) && passes {
                    self.on_reply_block(head.stream, end_stream, &payload[range])?;
                } else if head.has(frame::END_HEADERS) {
                    self.kept_reply_block(head.stream, end_stream, &payload[range], whole)?;
                } else {
                    self.reply_block = Some(Block {
                        stream: head.stream,
                        end_stream,
                        bytes: payload[range].to_vec(),
                        frames: if passes { Vec::new() } else { whole.to_vec() },
                        passes,
                    });
                }
            }
            Kind::Continuation => {
                let Some(block) = self.reply_block.as_mut() else {
                    return Err(Broken::Upstream("CONTINUATION without HEADERS".into()));
                };
                if block.bytes.len() + payload.len() > MAX_HEADER_BLOCK {
                    return Err(Broken::Upstream("reply header block too large".into()));
                }
                block.bytes.extend_from_slice(payload);
                if !block.passes {
                    block.frames.extend_from_slice(whole);
                }
                if head.has(frame::END_HEADERS) {
                    let b = self.reply_block.take().expect("checked above");
                    if b.passes {
                        self.on_reply_block(b.stream, b.end_stream, &b.bytes)?;
                    } else {
                        self.kept_reply_block(b.stream, b.end_stream, &b.bytes, &b.frames)?;
                    }
                    // What waited for the block's end goes right after it, before anything
                    // else of the upstream's.
                    self.release_own();
                }
            }
            Kind::Settings if head.has(frame::ACK) => {
                if let Some(table) = self.settings_to_upstream.pop_front() {
                    self.apply_upstream_ack(table);
                }
            }
            Kind::Settings => self.upstream_settings(payload)?,
            Kind::Ping => {
                if !head.has(frame::ACK) {
                    frame::put(&mut self.to_upstream, Kind::Ping, frame::ACK, 0, payload);
                } else if payload == KEEPALIVE_PING && self.ping_out {
                    self.ping_out = false;
                    self.ping_at = self.keepalive.map(|k| Instant::now() + k.interval);
                }
            }
            Kind::RstStream if !passes => {
                frame::rst_reason(payload).map_err(upstream_malformed)?;
                // The plugin reset a translated call: so is the client's stream.
                if let Some(stream) = self.streams.get_mut(&head.stream) {
                    if matches!(stream.side, Side::Translated(_)) {
                        stream.reply_done = true;
                        self.to_client.extend_from_slice(whole);
                        self.end_stream(
                            head.stream,
                            Code::Unavailable,
                            Origin::Gateway,
                            reset_by_upstream(),
                        );
                    }
                }
            }
            Kind::RstStream => {
                let code = frame::rst_reason(payload).map_err(upstream_malformed)?;
                let code = match code {
                    reason::REFUSED_STREAM => Code::Unavailable,
                    reason::CANCEL => Code::Cancelled,
                    _ => Code::Internal,
                };
                self.end_stream(head.stream, code, Origin::Gateway, reset_by_upstream());
            }
            Kind::GoAway => self.upstream_going_away(payload),
            Kind::PushPromise => {
                return Err(Broken::Upstream("PUSH_PROMISE, which was disabled".into()))
            }
            // Forwarded above: flow control runs end to end.
            Kind::WindowUpdate => {}
            // PRIORITY is advisory; extension frames are per hop (RFC 9113 §5.5).
            Kind::Priority | Kind::Unknown(_) => {}
        }
        Ok(())
    }

    /// The upstream's SETTINGS: the values that govern what passes unchanged, passed on to the
    /// client in a SETTINGS of the gateway's, with the gateway's own limits. The first is the
    /// gateway's server preface.
    fn upstream_settings(&mut self, payload: &[u8]) -> Result<(), Broken> {
        frame::check_settings(payload).map_err(|(what, _)| Broken::Upstream(what.into()))?;
        let mut client = Vec::with_capacity(6);
        let (mut streams, mut list) = (None, None);
        let (mut table, mut lowered) = (None, None);
        for (id, value) in frame::settings(payload) {
            match id {
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    self.upstream_max_frame = value as usize;
                    let value = value.min(MAX_FRAME);
                    self.client_frame_limit = self.client_frame_limit.max(value as usize);
                    client.push((id, value));
                }
                frame::SETTINGS_HEADER_TABLE_SIZE => {
                    let value = value.min(headers::MAX_TABLE_SIZE);
                    self.client_decoder.allow_table_size(value);
                    table = Some(value);
                    client.push((id, value));
                }
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    self.upstream_initial_window = value as i64;
                    lowered = self.raise_stream_window(value as i64);
                    client.push((id, value));
                }
                frame::SETTINGS_MAX_CONCURRENT_STREAMS => streams = Some(value),
                frame::SETTINGS_MAX_HEADER_LIST_SIZE => list = Some(value),
                _ => {}
            }
        }
        let first = !self.server_preface;
        if first || streams.is_some() {
            let limit = self.limits.max_concurrent_streams;
            client.push((
                frame::SETTINGS_MAX_CONCURRENT_STREAMS,
                streams.map_or(limit, |v| v.min(limit)),
            ));
        }
        if first || list.is_some() {
            let limit = self.limits.max_header_list_size;
            client.push((
                frame::SETTINGS_MAX_HEADER_LIST_SIZE,
                list.map_or(limit, |v| v.min(limit)),
            ));
        }
        if first {
            // The server preface first, then whatever the splice held meanwhile.
            frame::put_settings(&mut self.to_client, &client);
            self.server_preface = true;
            self.release_own();
        } else {
            frame::put_settings(self.own_out(), &client);
        }
        self.settings_to_client.push_back((table, lowered));
        Ok(())
    }

    /// The upstream's GOAWAY stays on this hop. Its relayed streams above the upstream's last
    /// id were never processed: refused to the client (REFUSED_STREAM, which a client may
    /// retry at once). New streams are answered by the gateway, and the client is asked to
    /// take its next calls to a new connection.
    fn upstream_going_away(&mut self, payload: &[u8]) {
        let last =
            u32::from_be_bytes(payload[..4].try_into().expect("checked length")) & 0x7fff_ffff;
        let code = Reason(u32::from_be_bytes(
            payload[4..8].try_into().expect("checked length"),
        ));
        tracing::debug!(
            last_stream = last,
            %code,
            debug = %String::from_utf8_lossy(&payload[8..]),
            "the upstream connection under a spliced client connection is going away"
        );
        self.upstream_draining = true;
        let refused: Vec<u32> = self
            .streams
            .iter()
            .filter(|(id, s)| **id > last && s.side.on_upstream() && !s.reply_started)
            .map(|(id, _)| *id)
            .collect();
        for id in refused {
            frame::put_rst_stream(self.own_out(), id, reason::REFUSED_STREAM);
            self.end_stream(
                id,
                Code::Unavailable,
                Origin::Gateway,
                Some("refused: the upstream went away before it took the call".into()),
            );
        }
        self.hint_go_away();
    }

    /// A reply header block, complete (its frames already went on).
    fn on_reply_block(
        &mut self,
        stream_id: u32,
        end_stream: bool,
        block: &[u8],
    ) -> Result<(), Broken> {
        let reply = headers::reply(&mut self.upstream_decoder, block)
            .map_err(|e| Broken::Upstream(e.to_string()))?;
        self.reply_seen(stream_id, end_stream, reply);
        Ok(())
    }

    /// A reply block that reached the client, seen: the call's status noted, its end marked.
    fn reply_seen(&mut self, stream_id: u32, end_stream: bool, reply: headers::Reply) {
        if let Some(stream) = self.streams.get_mut(&stream_id) {
            stream.reply_started = true;
            if let (Some(code), Some(report)) = (code_of(reply.code), stream.report.as_mut()) {
                report.code = code;
                if code != Code::Ok && report.translated {
                    // A wire-identical call's failure, as its translation reports it.
                    report.message = Some(reply.message.unwrap_or_default());
                } else if code != Code::Ok {
                    report.message = reply.message;
                }
                if code != Code::Ok {
                    // The plugin's status, relayed as it came.
                    report.origin = Some(Origin::Upstream);
                }
            }
        }
        if end_stream {
            let code = code_of(reply.code).or(Some(Code::Unknown));
            self.reply_ended(stream_id, code);
        }
    }

    /// Whether an upstream frame of a stream goes on to the client as it came. Those of the
    /// streams the splice opened for itself stay here, but for a translated call's reply head;
    /// so do those of the streams it reset there, and header blocks the client gets
    /// re-encoded (`reencode_replies`).
    fn passes_on(&self, head: &Head) -> bool {
        if self.reencode_replies && matches!(head.kind, Kind::Headers | Kind::Continuation) {
            return false;
        }
        if !self.own_streams {
            return true;
        }
        if head.kind == Kind::Continuation {
            return self.reply_block.as_ref().is_some_and(|b| b.passes);
        }
        match self.streams.get(&head.stream).map(|s| &s.side) {
            Some(Side::Relayed) => true,
            // A request relayed as it came is paced by the plugin's window, as a relayed one.
            Some(side @ Side::Translated(_)) => match head.kind {
                Kind::Headers => !head.has(frame::END_STREAM),
                Kind::WindowUpdate => side.relays_request(),
                _ => false,
            },
            Some(_) => false,
            None => !self.reset_upstream.contains(&head.stream),
        }
    }

    /// Upstream DATA the client does not get as it came: a translated call's reply, collected
    /// for its translation, or a reset stream's. The window it took is owed to the upstream.
    fn kept_data(&mut self, head: Head, payload: &[u8]) -> Result<(), Broken> {
        let range = frame::content(&head, payload).map_err(upstream_malformed)?;
        self.owed_upstream += head.len as u64;
        let end = head.has(frame::END_STREAM);
        let Some(Stream {
            side: Side::Translated(t),
            ..
        }) = self.streams.get_mut(&head.stream)
        else {
            return Ok(());
        };
        if t.reply.len() + range.len() > MAX_MESSAGE_BYTES + grpc_frame::HEADER {
            t.reply_too_large = true;
            let dropped = std::mem::take(&mut t.reply).len();
            self.replies_held -= dropped;
            self.shared.buffered.give(dropped);
        } else if !t.reply_too_large {
            t.reply.extend_from_slice(&payload[range.clone()]);
            self.replies_held += range.len();
            self.shared.buffered.take(range.len());
        }
        if !end {
            // The stream's own window, given back past half of it (a reply larger than it).
            t.reply_unacked += head.len as u32;
            if t.reply_unacked as i64 >= self.client_initial_window / 2 {
                frame::put_window_update(&mut self.to_upstream, head.stream, t.reply_unacked);
                t.reply_unacked = 0;
            }
            return Ok(());
        }
        // A reply that ends without trailers has no status.
        self.translated_ended(head.stream, headers::Reply::default(), &[], false);
        Ok(())
    }

    /// A reply block that does not go on as it came: a translated call's trailers, a block
    /// re-encoded for the client (`reencode_replies`), or one of a stream the client does not
    /// get the upstream's reply on (dropped).
    fn kept_reply_block(
        &mut self,
        id: u32,
        end_stream: bool,
        block: &[u8],
        frames: &[u8],
    ) -> Result<(), Broken> {
        let before = self.upstream_decoder.changes();
        let mut literals = Vec::new();
        let reply = match self.reencode_replies {
            true => headers::reply_reencoded(&mut self.upstream_decoder, block, &mut literals),
            false => headers::reply(&mut self.upstream_decoder, block),
        }
        .map_err(|e| Broken::Upstream(e.to_string()))?;
        let changed = self.upstream_decoder.changes() != before;
        let side = self.streams.get(&id).map(|s| &s.side);
        let translated = matches!(side, Some(Side::Translated(_)));
        if translated && end_stream {
            self.translated_ended(id, reply, frames, changed);
            return Ok(());
        }
        let relayed = match side {
            Some(s) => matches!(s, Side::Relayed),
            None => !self.reset_upstream.contains(&id),
        };
        if self.reencode_replies && (translated || relayed) {
            // Re-encoded: a size update of the plugin's did not go with it.
            self.upstream_decoder.withheld();
            let mut out = Vec::with_capacity(literals.len() + 4);
            self.upstream_decoder.own_block(&mut out);
            out.extend_from_slice(&literals);
            frame::put_headers(
                &mut self.to_client,
                id,
                &out,
                end_stream,
                self.client_max_frame,
            );
            self.reply_seen(id, end_stream, reply);
            return Ok(());
        }
        if changed {
            self.part_replies();
        }
        Ok(())
    }

    /// A reply block that changed the upstream's table was kept from the client: the client's
    /// table stops following the upstream's (see `reencode_replies`), and a size update the
    /// client waits for is still owed to it.
    fn part_replies(&mut self) {
        self.upstream_decoder.withheld();
        self.reencode_replies = true;
    }

    /// A translated call's reply ended (`reply` holds its trailers' status, `frames` the
    /// trailers as they came): translated for the client. An answer the plugin's trailers fit
    /// goes as its message and those trailers, at once when the client's windows allow; any
    /// other as the splice's own reply.
    fn translated_ended(&mut self, id: u32, reply: headers::Reply, frames: &[u8], changed: bool) {
        let settings_unacked = self.client_settings_unacked();
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        stream.reply_done = true;
        let head_sent = stream.reply_started;
        let (Side::Translated(t), Some(report)) = (&mut stream.side, stream.report.as_mut()) else {
            return;
        };
        // The plugin's reply, and what is wrong with it, are its own.
        let plugin_status = match code_of(reply.code) {
            Some(Code::Ok) if t.reply_too_large => Err(Status::resource_exhausted(format!(
                "the plugin's reply is larger than {MAX_MESSAGE_BYTES} bytes"
            ))),
            Some(Code::Ok) => Ok(()),
            Some(code) => Err(Status::new(code, reply.message.unwrap_or_default())),
            None => Err(Status::unknown(
                "upstream reply ended without a gRPC status",
            )),
        }
        .map_err(CallError::upstream);
        // Left in place, where it marks the request as sent.
        let request = match &t.asked {
            Asked::Hub(request) => &**request,
            // Its reply's translation reads the method alone (`translate::identical`'s tests).
            Asked::Relayed(method) => crate::translate::identical::empty_request(*method),
            Asked::Not => {
                // Before its request went: answered once the request is whole (`send_translated`).
                t.early = Some(plugin_status.err().unwrap_or_else(|| {
                    let s = Status::internal("the plugin answered before the request was sent");
                    CallError::upstream(s)
                }));
                if changed {
                    self.part_replies();
                }
                return;
            }
        };
        // Not split into upstream time and overhead, as for a relayed call: the splice waits
        // on nothing for it.
        report.code = Code::Ok;
        let plugin = plugin_status
            .and_then(|()| grpc_frame::decode_unary(&t.reply).map_err(CallError::upstream));
        let answer = match plugin {
            // A checked call's reply is wire-identical unless a rule reads it
            // (`translate::identical::checked`): else only an error needs the translation, to
            // scrub it.
            Ok(message) if t.check.is_some() && !t.reply_translated => Ok(message.to_vec()),
            plugin => match &self.live {
                Some(live) => {
                    call::inline_reply(&self.shared, live, t.route, request, plugin, report)
                }
                // Never: only a connection with an upstream of its own translates on it.
                None => Err(Status::unavailable("no upstream connection")),
            },
        };
        if let (Ok(message), Some(Code::Ok), true, false) = (
            &answer,
            code_of(reply.code),
            head_sent,
            self.reencode_replies,
        ) {
            let len = grpc_frame::HEADER + message.len();
            let room = self.to_client.len() < HIGH_WATER;
            if len as i64 <= self.window.min(t.window) && !settings_unacked && room {
                frame::put_message(&mut self.to_client, id, message, 0, self.client_max_frame);
                self.window -= len as i64;
                self.debt += len as u64;
                self.to_client.extend_from_slice(frames);
                if observe::bodies_enabled() {
                    report.response = Some(Bytes::copy_from_slice(message));
                }
                return self.reply_ended(id, Some(Code::Ok));
            }
        }
        if changed {
            self.part_replies();
        }
        self.reply_translated(id, answer, head_sent);
    }

    /// Nets the window owed to the upstream against what the splice's own replies took, and
    /// gives back the rest once it is worth a frame.
    fn settle_owed(&mut self) {
        let net = self.owed_upstream.min(self.debt);
        self.owed_upstream -= net;
        self.debt -= net;
        if self.owed_upstream >= OWED_UPSTREAM_FLUSH && !self.upstream_gone {
            frame::put_window_update(&mut self.to_upstream, 0, self.owed_upstream as u32);
            self.owed_upstream = 0;
        }
    }

    /// A relayed reply reached its end; `code` is `None` when its trailers never came.
    fn reply_ended(&mut self, id: u32, code: Option<Code>) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        stream.reply_done = true;
        if let (None, Some(report)) = (code, stream.report.as_mut()) {
            // The plugin's reply, relayed as it came, without the status it owes.
            report.fail(
                Origin::Upstream,
                &Status::unknown("upstream reply ended without a gRPC status"),
            );
        }
        if stream.request_done {
            self.remove(id);
        } else if let Some(report) = stream.report.take() {
            // Reported now; the stream stays known until the client's half ends.
            self.ended.push((report, stream.started));
        }
    }

    /// The upstream connection is gone: relayed streams get UNAVAILABLE naming it, the client
    /// is told to go away, and local calls may still finish. If the upstream's SETTINGS never
    /// came, the gateway's own open the client's side first (`own_preface`).
    fn upstream_lost(&mut self, why: &str) {
        if self.upstream_gone {
            return;
        }
        self.upstream_gone = true;
        self.held = false;
        if self.reply_block.is_some() {
            // Cut off inside a header block: the client's connection cannot carry another
            // frame; closing it fails its calls.
            tracing::warn!(
                reason = why,
                "upstream connection lost; closing the client connection"
            );
            self.dead = true;
            let why = format!("upstream {}: {why}", self.upstream_name());
            return self.finish_all(Code::Unavailable, Origin::Gateway, &why);
        }
        if !self.server_preface {
            self.own_preface();
        }
        let upstream = self.upstream_name();
        tracing::warn!(upstream = %upstream, reason = why, "upstream connection lost under a spliced client connection");
        let relayed: Vec<u32> = self
            .streams
            .iter()
            .filter(|(_, s)| s.side.on_upstream() && !s.reply_done)
            .map(|(id, _)| *id)
            .collect();
        let s = Status::unavailable(format!("upstream {upstream}: {why}"));
        for id in relayed {
            if let Some(stream) = self.streams.get_mut(&id) {
                stream.request_done = true;
                self.answer_instead(id, &s);
            }
        }
        // This connection now answers every call itself, on the gateway's own upstream
        // connection; a new one would be spliced again. The client's settings waiting for the
        // upstream's ACK get the gateway's.
        self.to_upstream.clear();
        while let Some(table) = self.settings_to_upstream.pop_front() {
            self.apply_upstream_ack(table);
        }
        self.hint_go_away();
    }

    /// The gateway's SETTINGS as the client's server preface, the upstream's having never
    /// come (it is gone, or was given up on): what the splice held for the client follows.
    fn own_preface(&mut self) {
        let settings = self.own_settings();
        frame::put_settings(&mut self.to_client, &settings);
        // The client's ACK of it is nobody else's.
        self.settings_to_client.push_back((None, None));
        self.server_preface = true;
        self.release_own();
    }

    /// Ends a call on the upstream with the gateway's `s` in place of the plugin's reply.
    /// Before its reply began, the call is answered in its front dialect, as on every path
    /// (for the draft, an OK reply carrying a retryable error), and sent within the client's
    /// windows like the splice's own replies. After, trailers end it. A client still sending
    /// its request is told to stop (RST_STREAM NO_ERROR, RFC 9113 §8.1).
    fn answer_instead(&mut self, id: u32, s: &Status) {
        self.drop_translated_reply(id);
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let encoded = match (stream.reply_started, stream.report.as_mut()) {
            (false, Some(report)) => {
                reply::error_reply(report.called, Origin::Gateway, s.clone(), report)
            }
            (_, report) => {
                if let Some(report) = report {
                    report.fail(Origin::Gateway, s);
                }
                Err(s.clone())
            }
        };
        if let (false, Ok(message)) = (stream.reply_started, &encoded) {
            let reply = reply_frames(Ok(message.clone()), true);
            let held = reply.data.len();
            stream.side = Side::Local(Local {
                window: self.client_initial_window,
                reply: Some(reply),
                ..Local::default()
            });
            self.replying.push_back(id);
            self.hold_reply(held);
            return;
        }
        let status = encoded.err().unwrap_or_else(|| s.clone());
        let mut block = Vec::with_capacity(128);
        self.upstream_decoder.own_block(&mut block);
        if !stream.reply_started {
            headers::reply_head(&mut block);
        }
        status_fields(&mut block, &status);
        let still_sending = !std::mem::replace(&mut stream.request_done, true);
        let max_frame = self.client_max_frame;
        frame::put_headers(self.own_out(), id, &block, true, max_frame);
        if still_sending {
            frame::put_rst_stream(self.own_out(), id, reason::NO_ERROR);
        }
        self.reply_ended(id, Some(status.code()));
    }

    /// Tells the client to open no more streams here; those already open finish.
    fn go_away(&mut self) {
        if self.going_away.is_some() {
            return;
        }
        if self.reply_block.is_some() {
            // Not inside the upstream's header block: the next loop turn sends it.
            return self.going_away_later = true;
        }
        let last = self.send_goaway(self.last_stream);
        self.going_away = Some(last);
        self.services.shut_down();
    }

    /// Asks the client to take its next calls to a new connection, while this one still
    /// serves whatever arrives (RFC 9113 §6.8: the highest id, then streams may still come).
    fn hint_go_away(&mut self) {
        if self.goaway_sent.is_none() {
            self.send_goaway(0x7fff_ffff);
        }
    }

    fn send_goaway(&mut self, last: u32) -> u32 {
        let last = self.goaway_sent.map_or(last, |sent| sent.min(last));
        frame::put_goaway(self.own_out(), last, reason::NO_ERROR);
        self.goaway_sent = Some(last);
        last
    }

    // ---- stream bookkeeping ----

    /// Ends a stream the splice answers no more: its call failed with `code`, `origin`'s
    /// failure.
    fn end_stream(&mut self, id: u32, code: Code, origin: Origin, message: Option<String>) {
        if let Some(report) = self.streams.get_mut(&id).and_then(|s| s.report.as_mut()) {
            report.code = code;
            report.origin = Some(origin);
            if message.is_some() {
                report.message = message;
            }
        }
        self.remove(id);
    }

    fn remove(&mut self, id: u32) {
        if let Some(mut stream) = self.streams.remove(&id) {
            if stream.client_ended {
                self.remember_closed(id);
            }
            if let Some(at) = stream.deadline() {
                self.deadlines.remove(&(at, id));
            }
            if matches!(stream.side, Side::Service) {
                self.services.remove(id);
                self.count_services();
            }
            // What a local call still held of its request (reset before it ended), and of its
            // reply; what a translated call held of the plugin's reply.
            match &stream.side {
                Side::Local(local) => {
                    self.let_go(local.body.len());
                    self.let_go_reply(local.reply.as_ref().map_or(0, |r| r.data.len()));
                }
                Side::Translated(t) => self.let_go_reply(t.reply.len()),
                _ => {}
            }
            if matches!(stream.side, Side::Translated(_)) && !stream.reply_done {
                // Ended before the plugin's reply did (the client reset it, say).
                self.reset_on_upstream(id);
            }
            if let Some(report) = stream.report.take() {
                self.ended.push((report, stream.started));
            }
            if let Side::Translated(t) = stream.side {
                self.recycle(t);
            }
        }
    }

    /// Keeps an ended translated call's box and buffers for the next one: a translated call
    /// otherwise allocates and frees both (~700 instructions of ~9.4k; callgrind).
    fn recycle(&mut self, mut t: Box<Translated>) {
        let small = t.body.capacity() <= SPARE_BUFFER && t.reply.capacity() <= SPARE_BUFFER;
        if small && self.spare.len() < SPARE_TRANSLATED {
            // What a reset call left is freed now, not when the box is used again.
            t.asked = Asked::Not;
            t.early = None;
            self.spare.push(t);
        }
    }

    /// Logs and counts the relayed calls that ended. A spliced call's time is not split into
    /// upstream time and overhead: the splice never waits on the upstream for it, it only
    /// passes frames along.
    fn report_ended(&mut self) {
        if self.ended.is_empty() {
            return;
        }
        let now = Instant::now();
        for (report, started) in self.ended.drain(..) {
            observe::finish(&report, now - started, &self.shared.redactor);
        }
    }

    /// Reports every stream still open when the connection ends.
    fn finish_all(&mut self, code: Code, origin: Origin, why: &str) {
        let ids: Vec<u32> = self.streams.keys().copied().collect();
        for id in ids {
            self.end_stream(id, code, origin, Some(why.to_string()));
        }
    }
}

/// What the connection still holds of its requests is the gateway's again, however it ended:
/// also when the listener closed it for a new client (its task aborted, `finish_all` never run).
impl<C, U> Drop for Splice<C, U> {
    fn drop(&mut self) {
        let held = self.local_bodies + self.services_held + self.replies_held;
        self.shared.buffered.give(held);
    }
}

/// The decoding context of a client's request blocks, keeping apart the table of the plugin
/// they go on to where the splice rewrites a `:path` to one of another length.
/// The client's decoder; it follows the `:path`s the upstream's dialect renames, which only a
/// connection with an upstream of its own relays.
fn client_decoder(shared: &Shared, live: Option<&Live>) -> headers::Decoder {
    let mut decoder = headers::Decoder::default();
    if let Some(live) = live {
        let staging = live.session.requires_staging;
        decoder.follow_renames(shared.router.renames(live.detected.dialect, staging));
    }
    decoder
}

/// Why a request whose DATA does not add up to its `content-length` was reset.
const CONTENT_LENGTH: &str = "DATA other than the request's content-length";

/// A reply block's gRPC status as tonic's code.
fn code_of(code: Option<i32>) -> Option<Code> {
    code.map(Code::from_i32)
}

fn malformed() -> Broken {
    Broken::Client("malformed frame", reason::PROTOCOL_ERROR)
}

fn upstream_malformed(e: frame::Malformed) -> Broken {
    Broken::Upstream(e.to_string())
}

/// The plugin reset a stream: no status of its own, a call the gateway could not carry.
fn reset_by_upstream() -> Option<String> {
    Some("reset by the upstream".into())
}

fn bad_window_update() -> Option<String> {
    Some("bad WINDOW_UPDATE".into())
}

fn cancelled_by_client(code: Reason) -> Option<String> {
    Some(format!("the client reset the stream ({code})"))
}

/// Hands the whole frames at the front of `buf` to `handle` in order, until it leaves one
/// (`Ok(false)`) or fails, and drops those it took.
fn take_frames(
    buf: &mut BytesMut,
    mut handle: impl FnMut(Head, &[u8]) -> Result<bool, Broken>,
) -> Result<(), Broken> {
    let mut at = 0;
    let handled = loop {
        let Some(head) = frame::next(&buf[at..]) else {
            break Ok(());
        };
        let end = at + frame::HEAD_LEN + head.len;
        match handle(head, &buf[at..end]) {
            Ok(true) => at = end,
            Ok(false) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    buf.advance(at);
    handled
}

/// The frames of a reply the splice sends itself: the message with OK trailers, or the status
/// as a trailers-only reply. With `with_head` false (the client has the plugin's reply head
/// already) the same without its leading headers: a status alone then goes as trailers. The
/// first bytes of each block (a size update the client may wait for) are added when it is
/// written, in `send_replies`.
fn reply_frames(outcome: Result<Vec<u8>, Status>, with_head: bool) -> Reply {
    let mut head = Vec::with_capacity(64);
    if with_head {
        headers::reply_head(&mut head);
    }
    match outcome {
        Ok(message) => {
            let mut trailers = Vec::with_capacity(16);
            status_fields(&mut trailers, &Status::ok(""));
            Reply {
                head: with_head.then_some(head),
                data: grpc_frame::encode(&message),
                trailers: Some(trailers),
            }
        }
        Err(s) => {
            status_fields(&mut head, &s);
            let (head, trailers) = match with_head {
                true => (Some(head), None),
                false => (None, Some(head)),
            };
            Reply {
                head,
                data: Bytes::new(),
                trailers,
            }
        }
    }
}

/// A copy of the message inside a DATA payload that holds one whole gRPC frame.
fn first_message(data: &[u8]) -> Option<Bytes> {
    grpc_frame::first_message(data).map(Bytes::copy_from_slice)
}

fn noop_context() -> Context<'static> {
    Context::from_waker(std::task::Waker::noop())
}
