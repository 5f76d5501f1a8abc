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
//! timer (`Streams::deadlines`). The upstream's SETTINGS must come within `upstream.connect_timeout` of
//! the client's preface, and its first frame must be SETTINGS: else (a plugin stopped, or not
//! speaking HTTP/2) the upstream connection is given up as if it had closed, and the gateway's
//! own SETTINGS open the client's side, whose calls it then answers itself.
//!
//! One struct, `Splice`, and its poll loop here; each concern owns its state and the methods
//! that need nothing else, as h2's `proto/` objects do (`Settings`, `Ping`, `GoAway`, `Flow`,
//! `Timers`, `Streams`, `Blocks`, `Env`, `LocalCalls`, the writer `ToClient`). `Splice` keeps
//! the connection's own work (its sockets, SETTINGS, PING, GOAWAY, the timer, a new stream's
//! decision); a stream's work, whatever its kind, is a method of `Calls`, the borrow bundle of
//! the parts a stream may touch (as h2's `DynStreams`), and the calls the gateway answers
//! itself work through a narrower one (`Answering`). A new stream's
//! kind is decided once (`call::plan::decide`, with the connection's `View`); every byte the
//! connection holds of the gateway's buffer budget is a `call::budget::Hold`, given back when
//! dropped.
//!
//! | file | concern |
//! | --- | --- |
//! | `env.rs` | what the connection serves and for whom: the gateway, its plugin, the client's limits and rule, the reset budget |
//! | `calls.rs` | `Calls`: what a stream's work may touch, whatever the stream's kind |
//! | `client_side.rs` | the client's frames read, checked and handed to their owners; a new stream's decision and its state |
//! | `upstream_side.rs` | the upstream's frames read, passed on or kept; reply blocks read whole |
//! | `blocks.rs` | header blocks: both sides' decoding contexts, blocks midway, `:authority` and `:path` made the upstream's |
//! | `settings.rs` | SETTINGS per hop, and the gateway's own preface |
//! | `flow.rs` | the client's windows enforced, window granted or withheld on the buffer budget |
//! | `streams.rs` | the streams (`Streams`: the map and what is remembered of ended ones), a stream's state (`Stream`, one `State`, its `Side`) and its end |
//! | `relayed.rs` | calls relayed as they came: request blocks forwarded, replies read for the status |
//! | `translated.rs` | calls translated on the connection's own upstream connection |
//! | `local.rs` | calls the splice answers itself (`Answering`), their replies, and the connection's own work each turn |
//! | `service.rs`, `service_streams.rs` | streams of the gateway's own services, and the connection's side of them |
//! | `ping.rs` | PING per hop, and the keepalive PINGs to a bridged upstream |
//! | `timers.rs` | the one timer: timeouts, keepalive, deadlines |
//! | `go_away.rs` | GOAWAY per hop, shutdown, the upstream lost |
//! | `writer.rs` | what goes to the client: frames passed on, and the gateway's own where they may go |
//! | `tests/` | the connection in-process through scripted I/O: the client, and the plugin |

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

use crate::call::answer::Identical;
use crate::call::budget::{Budget, Hold, Rate};
use crate::call::plan;
use crate::call::router::{Inline, Route};
use crate::call::services;
use crate::call::Shared;
use crate::call::{answer as call, rescue as reply};
use crate::grpc::status::status_fields;
use crate::grpc::{frame as grpc_frame, Code, Status, MAX_MESSAGE_BYTES};
use crate::metrics::{InFlight, Origin};
use crate::observe::{self, Report};
use crate::tls::{Authorization, Keepalive};
use crate::translate::identical::Verdict;
use crate::translate::CallError;
use crate::upstream::Live;

use crate::splice::limits::{self, Limits};

use super::io::{write, Io, Unattached};
use csi_gateway_wire::flow::{Window, WindowError};
use csi_gateway_wire::frame::{self, reason, Head, Kind, Reason, StreamId};
use csi_gateway_wire::headers;

mod blocks;
mod calls;
mod client_side;
mod env;
mod flow;
mod go_away;
mod local;
mod ping;
mod relayed;
mod service;
mod service_streams;
mod settings;
mod streams;
#[cfg(test)]
mod tests;
mod timers;
mod translated;
mod upstream_side;
mod writer;

use blocks::{Block, Blocks};
use calls::Calls;
use client_side::RequestBlock;
use env::Env;
use flow::Flow;
use go_away::GoAway;
use local::{Answering, Local, LocalCalls};
use ping::Ping;
use service::ServiceStreams;
use settings::{upstream_acked, Settings};
use streams::{Side, State, Stream, Streams};
use timers::Timers;
use translated::{Asked, Translated, SPARE_BUFFER, SPARE_TRANSLATED};
use writer::ToClient;

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
/// The largest frame the splice lets either side send (SETTINGS_MAX_FRAME_SIZE is capped at
/// this): bounds the buffer one frame needs.
const MAX_FRAME: u32 = 64 * 1024;

pub struct Splice<C, U> {
    /// The client's side: its socket and what was read from it (`Peer`).
    client: Peer<C>,
    /// The upstream's side (nothing to read once it is gone, `go_away`).
    upstream: Peer<U>,
    /// What the connection serves and for whom: the gateway, its plugin, the client's limits
    /// and rule (`env`).
    env: Env,
    /// What goes to the client: frames passed on, and the gateway's own (`writer`).
    to_client: ToClient,
    to_upstream: BytesMut,
    /// SETTINGS per hop (`settings`).
    settings: Settings,
    /// The connection cannot go on (a header block cut off midway).
    dead: bool,
    /// Since when each timeout counts, and the calls' deadlines (`timers`).
    timers: Timers,
    /// Header blocks: both sides' decoding contexts, blocks midway, and how the client's go on
    /// (`blocks`).
    blocks: Blocks,
    /// The streams, and what the connection remembers of those that ended (`streams`).
    streams: Streams,
    /// Flow control, and what the connection holds of the buffer budget (`flow`).
    flow: Flow,
    /// GOAWAY per hop and shutdown (`go_away`).
    go_away: GoAway,
    /// The calls the splice answers itself (`local`).
    local: LocalCalls,
    /// Streams served by the gateway's own services (`service`).
    services: ServiceStreams,
    /// When the bytes being handled were read.
    now: Instant,
    shutdown: watch::Receiver<bool>,
    /// PINGs per hop and the upstream keepalive (`ping`).
    ping: Ping,
}

/// One side of the connection: its socket, and what was read from it.
struct Peer<T> {
    io: T,
    read: BytesMut,
    /// Frames read and not handled yet: handling stopped to write a piece (`PIECE`).
    unhandled: bool,
    /// The side's connection preface came (the client's: RFC 9113 §3.4).
    preface: bool,
}

impl<T> Peer<T> {
    fn new(io: T) -> Peer<T> {
        Peer {
            io,
            read: BytesMut::with_capacity(64 * 1024),
            unhandled: false,
            preface: false,
        }
    }
}

/// Connection window owed to the upstream, kept until this much (see `Flow::owed_upstream`).
const OWED_UPSTREAM_FLUSH: u64 = 16 * 1024;
/// How many streams reset on the upstream are remembered (see `reset_upstream`).
const RESET_REMEMBERED: usize = 256;

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
        splice.go_away.upstream_gone = true;
        splice.env.identical = Identical::PassedOn;
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
        let env = Env::new(shared, live);
        let services = ServiceStreams::new(env.shared.clone());
        Splice {
            client: Peer::new(client),
            upstream: Peer::new(upstream),
            to_client: ToClient::new(),
            to_upstream: BytesMut::with_capacity(64 * 1024),
            dead: false,
            blocks: Blocks::new(env.client_decoder()),
            streams: Streams::default(),
            services,
            now: Instant::now(),
            settings: Settings::default(),
            go_away: GoAway::default(),
            ping: Ping::default(),
            flow: Flow::new(&env.shared.buffered),
            local: LocalCalls::default(),
            timers: Timers::new(),
            shutdown,
            env,
        }
    }

    /// Lets the client call only what `authorization` allows: a stream to another CSI service
    /// is answered by the splice with PERMISSION_DENIED (`call::plan::admit`).
    pub fn authorized(mut self, authorization: Option<Arc<Authorization>>) -> Self {
        self.env.authorization = authorization;
        self
    }

    /// Marks `served` once the client finished a request: the listener keeps such a
    /// connection's slot when every slot is taken.
    pub fn served(mut self, served: crate::splice::listener::Served) -> Self {
        self.env.served = served;
        self
    }

    /// Pings the upstream every `keepalive.interval` and drops it when a PING goes unanswered
    /// for `keepalive.timeout` (its calls then get UNAVAILABLE, as when it closes).
    pub fn keepalive(mut self, keepalive: Option<Keepalive>) -> Self {
        self.ping.keepalive = keepalive;
        self.ping.next_in_an_interval();
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
        self.streams.report_ended(&self.env.shared.redactor);
        // What a TLS side still holds (its last records) goes out before the connection is
        // dropped; a UNIX socket holds nothing.
        let _ = tokio::time::timeout(Duration::from_secs(1), self.client.io.flush()).await;
    }

    /// Moves bytes until nothing more can move, then waits; `Ready` once the connection ends.
    fn poll_run(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            let Some(mut progress) = self.read_client(cx) else {
                return Poll::Ready(()); // the client hung up, or broke the protocol
            };
            // Requests go on before replies are looked at: the upstream has the longer way to go.
            progress |= self.flush_upstream(cx);
            progress |= self.read_upstream(cx);
            progress |= self.own_work(cx);
            if let Some(out) = self.to_client.writable() {
                match write(&mut self.client.io, out, cx, "client") {
                    Ok(moved) => progress |= moved,
                    Err(_) => return Poll::Ready(()),
                }
            }
            progress |= self.flush_upstream(cx);
            self.streams.report_ended(&self.env.shared.redactor);
            if self.finished() || self.dead {
                return Poll::Ready(());
            }
            if !progress {
                return Poll::Pending;
            }
        }
    }

    fn flush_upstream(&mut self, cx: &mut Context<'_>) -> bool {
        if self.go_away.upstream_gone {
            self.to_upstream.clear();
            return false;
        }
        match write(&mut self.upstream.io, &mut self.to_upstream, cx, "upstream") {
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
        self.go_away.going_away.is_some()
            && self.streams.map.is_empty()
            && self.local.calls.is_empty()
            && self.to_client.is_empty()
    }

    fn fail(&mut self, e: Broken) -> Poll<()> {
        match e {
            Broken::Client(what, code) => {
                tracing::debug!(error = what, "client broke the HTTP/2 protocol");
                if self.blocks.reply_block.is_none() {
                    let last = self
                        .go_away
                        .last_sent
                        .map_or(self.streams.last, |s| s.min(self.streams.last));
                    // The upstream's settings never came: the connection ends anyway, so the
                    // gateway's own SETTINGS opens it, and GOAWAY closes it.
                    let settings = self.env.own_settings();
                    let out = self.to_client.closing(last, code, &settings);
                    // Best effort: the connection is over either way.
                    let _ = write(&mut self.client.io, out, &mut noop_context(), "client");
                }
            }
            Broken::Upstream(why) => self.upstream_lost(&why),
        }
        Poll::Ready(())
    }

    // ---- client to upstream ----
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

/// A copy of the message inside a DATA payload that holds one whole gRPC frame.
fn first_message(data: &[u8]) -> Option<Bytes> {
    grpc_frame::first_message(data).map(Bytes::copy_from_slice)
}

fn noop_context() -> Context<'static> {
    Context::from_waker(std::task::Waker::noop())
}
