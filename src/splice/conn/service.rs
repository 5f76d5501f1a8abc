//! Streams the splice answers with one of the gateway's own services (`call::services`:
//! reflection, health, and any later one), served as streams: each request message reaches the
//! service as its DATA frames arrive, and the service's reply goes out as it is produced —
//! HEADERS, DATA as each message comes, trailers at the end. So a client can keep one
//! reflection stream open for request after request (as `grpcurl` does), and a health `Watch`
//! stays open, sending each change of status.
//!
//! Flow control runs both ways. The client's stream window is given back only once the service
//! has taken the bytes; the connection window as for the calls the splice answers itself
//! (`Splice::give_back`): at once while the connection and the gateway may hold more, else
//! once they may. What the services hold of the requests (`held`: bytes not taken, or taken
//! as part of a message not yet whole) is on the gateway's count, `max_buffered_bytes`.
//! Replies are sent within the client's windows, and taken from the service only while the
//! client's buffer has room. A reply waiting for the client's window is on the gateway's count
//! too, and a service is given a request (asked for a reply) only once the gateway has room
//! for that reply (`SERVICE_REPLY`): past it the request waits in the stream (`short`), and
//! past `BUDGET_WAIT` the stream ends RESOURCE_EXHAUSTED. So streams whose replies no client
//! reads hold about `max_buffered_bytes` of replies, not one per stream.
//!
//! Everything runs inside the splice's task, as its other local calls do. A stream has at most
//! one future in `running`: it owns the service's reply body while it waits for the body's next
//! frame, and hands the body back with the frame. A frame that cannot go yet (no window, no
//! room) parks the stream with its body until it can. Removing a stream (the client reset it,
//! it ended, the connection ended) drops its request sender and its body, and with them the
//! service's work: its future ends at once (its cancel sender is gone), reflection's own task
//! sees its requests end.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_util::future::BoxFuture;
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::task::AtomicWaker;
use http_body_util::BodyExt;
use hyper::body::Frame;
use tokio::sync::{mpsc, oneshot};
use tonic::body::Body;

use crate::call::services::{self, Handler};
use crate::call::Shared;
use crate::grpc::{status, Status, MAX_MESSAGE_BYTES};
use crate::splice::limits::{self, BUDGET_WAIT};

use crate::call::budget::Hold;

use csi_gateway_wire::flow::{Window, WindowError};
use csi_gateway_wire::frame::{self, Kind, StreamId};
use csi_gateway_wire::headers;

/// Request bytes the services of one connection may hold unread: past it, the stream that
/// would exceed it ends with RESOURCE_EXHAUSTED (its window, which the client obeys, is the
/// upstream's and may be large), so that a connection's memory stays bounded.
const MAX_UNREAD: usize = 4 * MAX_MESSAGE_BYTES;

/// Room in the gateway's budget a service's reply is expected to take, reserved before the
/// service is given the request it answers: a reflection reply (a file's descriptor and its
/// dependencies') is some 20 KB, a health reply a few bytes. An estimate, not a bound: the
/// reply is counted at its real size once it came and until it is written.
const SERVICE_REPLY: usize = 64 * 1024;

/// The gateway-service streams of one spliced connection.
pub struct ServiceStreams {
    shared: Arc<Shared>,
    entries: HashMap<StreamId, Entry>,
    /// Each stream's next step: its service's reply head, or its reply body's next frame.
    running: FuturesUnordered<StepFuture>,
    /// Streams whose next frame waits for the client's window or buffer, or that must end.
    parked: VecDeque<StreamId>,
    credit: Arc<Credit>,
    /// Request bytes handed to services and not yet taken, on all streams.
    unread: usize,
    /// Stream window given the client since the splice last looked (`drain_granted`): it
    /// counts what each client stream may send.
    granted: Vec<(StreamId, u32)>,
    /// Request bytes the services hold, and reply bytes waiting for the client, on all streams
    /// (`Entry::held`): on the gateway's count (`Shared::buffered`) through the splice.
    held: usize,
    /// Streams waiting for room for their service's next reply (`SERVICE_REPLY`), oldest
    /// first, with since when.
    short: VecDeque<(StreamId, Instant)>,
}

struct Entry {
    /// Request bytes on their way to the service; `None` once the client's half ended.
    requests: Option<mpsc::UnboundedSender<Bytes>>,
    /// Bytes handed to the service that it has not taken: stream credit still owed.
    unread: usize,
    /// Where the request's messages begin and end: a message's bytes are held (by the service's
    /// decoder, once taken) until it is whole.
    framing: Framing,
    /// What the stream counts in `ServiceStreams::held`: its unread bytes, or its unfinished
    /// message's, whichever is more (both are the tail of what came); and its reply's frame
    /// waiting for the client's window (`Reply::Parked`).
    held: usize,
    /// What the client still accepts on this stream.
    window: Window,
    /// Where the reply is.
    reply: Reply,
    /// Dropped with the entry: the running step ends.
    _cancel: oneshot::Sender<()>,
    /// Request bytes not yet given to the service: it is given them once there is room for
    /// its reply (`room`).
    pending: VecDeque<Bytes>,
    /// The client's half ended: `requests` is let go once `pending` went. Not a `Reply`
    /// state: the client ends its half whatever the reply is doing, and the reply goes on.
    closing: bool,
    /// Room reserved for the service's next reply (`SERVICE_REPLY`): given back when the
    /// reply comes (it is then counted at its real size) or with the entry.
    room: Option<Hold>,
    /// Reply messages the service gave, against the request messages it got
    /// (`Framing::whole`): one more of those is a reply still to come.
    replies: usize,
    /// The stream is in `ServiceStreams::short`, once. Not a `Reply` state: besides a reply
    /// `Asking`, request bytes (`pending`) wait there for room, whatever the reply is doing.
    short: bool,
}

type StepFuture = BoxFuture<'static, (StreamId, Step)>;

/// Where a stream's reply is: each state holds what only it needs, so that a stream is in
/// one, and a step in `running` is never also parked or asking.
enum Reply {
    /// The service's call, not started yet: it is once there is room for its first reply (a
    /// stream waiting for room costs its entry, not a running service), or the request ended.
    NotStarted(StepFuture),
    /// The call is in `running`: its head has not come.
    Calling,
    /// The head went; the body's next frame is read in `running`.
    Reading,
    /// The body, waiting for room before the service is asked for its next reply.
    Asking(Guard, Body),
    /// The next frame (what of it is left) and the body, waiting for the client's window or
    /// buffer.
    Parked(Bytes, Guard, Body),
    /// The stream ends with this status at its next unpark (the gateway shuts down, too
    /// much unread, no room): what it waited with is let go now. `head_sent` decides between
    /// trailers and a trailers-only reply.
    Ending { status: Status, head_sent: bool },
}

impl Reply {
    fn head_sent(&self) -> bool {
        match self {
            Reply::NotStarted(_) | Reply::Calling => false,
            Reply::Reading | Reply::Asking(..) | Reply::Parked(..) => true,
            Reply::Ending { head_sent, .. } => *head_sent,
        }
    }

    fn is_ending(&self) -> bool {
        matches!(self, Reply::Ending { .. })
    }
}

/// What a running stream's future yields.
enum Step {
    /// The reply's head, and the body to read on.
    Head(http::response::Parts, Guard, Body),
    Data(Bytes, Guard, Body),
    /// The reply's end: its status (from its trailers, or the failure that ended it).
    End(Status),
    /// The stream was removed meanwhile.
    Cancelled,
}

/// What a stream's every step waits on besides its work: removal, and its deadline.
struct Guard {
    cancelled: oneshot::Receiver<()>,
    deadline: Option<(Pin<Box<tokio::time::Sleep>>, Duration)>,
}

enum Stop {
    Cancelled,
    Deadline(Duration),
}

impl Guard {
    async fn run<F: Future>(&mut self, work: F) -> Result<F::Output, Stop> {
        let deadline = std::future::poll_fn(|cx| match &mut self.deadline {
            Some((sleep, d)) => sleep.as_mut().poll(cx).map(|()| *d),
            None => Poll::Pending,
        });
        tokio::select! {
            biased;
            _ = &mut self.cancelled => Err(Stop::Cancelled),
            d = deadline => Err(Stop::Deadline(d)),
            out = work => Ok(out),
        }
    }
}

fn stopped(stop: Stop) -> Step {
    match stop {
        Stop::Cancelled => Step::Cancelled,
        Stop::Deadline(d) => Step::End(Status::deadline_exceeded(format!(
            "the stream's deadline of {d:?} passed"
        ))),
    }
}

/// Where a poll writes, and what it may use: the client's connection window and the frame
/// size it accepts, and the splice's debt for the connection window its own replies take
/// (see `conn`).
pub struct Out<'a> {
    pub frames: &'a mut BytesMut,
    /// The context of the client's HPACK decoder, for the gateway's own header blocks.
    pub encoder: &'a mut headers::Decoder,
    pub window: &'a mut Window,
    pub debt: &'a mut u64,
    pub max_frame: usize,
    /// False while the client's buffer is full: no more is taken from the services.
    pub room: bool,
}

/// A stream that ended: the status it ended with (sent to the client).
pub struct Finished {
    pub id: StreamId,
    pub status: Status,
}

impl ServiceStreams {
    pub fn new(shared: Arc<Shared>) -> ServiceStreams {
        ServiceStreams {
            shared,
            entries: HashMap::new(),
            running: FuturesUnordered::new(),
            parked: VecDeque::new(),
            credit: Arc::default(),
            unread: 0,
            granted: Vec::new(),
            held: 0,
            short: VecDeque::new(),
        }
    }

    /// Some stream waits for room in the gateway's budget: the splice polls again every
    /// `BUDGET_RETRY`, as room another connection makes is not announced.
    pub fn short_of_room(&self) -> bool {
        !self.short.is_empty()
    }

    /// No stream, and no step of a removed one left to drop (a removed stream's step ends at
    /// its next poll, dropping the service's body).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.running.is_empty()
    }

    /// Starts `handler` on stream `id`, whose request may still be streaming in (unless
    /// `request_done`). `window` is what the client accepts on the stream now.
    pub fn open(
        &mut self,
        id: StreamId,
        handler: &Handler,
        path: &str,
        timeout: Option<Duration>,
        window: Window,
        request_done: bool,
    ) {
        let (requests, receiver) = mpsc::unbounded_channel();
        let body = RequestBody {
            id,
            messages: receiver,
            credit: self.credit.clone(),
        };
        let (cancel, cancelled) = oneshot::channel();
        let mut guard = Guard {
            cancelled,
            deadline: timeout.map(|d| (Box::pin(tokio::time::sleep(d)), d)),
        };
        let reply = services::request(path, Body::new(body)).map(|r| handler(r));
        let start: StepFuture = Box::pin(async move {
            let step = match reply {
                Err(s) => Step::End(s),
                Ok(reply) => match guard.run(reply).await {
                    Ok(response) => {
                        let (parts, body) = response.into_parts();
                        Step::Head(parts, guard, body)
                    }
                    Err(stop) => stopped(stop),
                },
            };
            (id, step)
        });
        // With no request to come, the service answers at once (an error); else it starts
        // with the request's first bytes, once there is room for its reply (`hand_over`).
        let reply = match request_done {
            true => {
                self.running.push(start);
                Reply::Calling
            }
            false => Reply::NotStarted(start),
        };
        self.entries.insert(
            id,
            Entry {
                requests: (!request_done).then_some(requests),
                unread: 0,
                framing: Framing::default(),
                held: 0,
                window,
                reply,
                _cancel: cancel,
                pending: VecDeque::new(),
                closing: request_done,
                room: None,
                replies: 0,
                short: false,
            },
        );
    }

    /// A DATA frame of `frame_len` bytes on stream `id`, `content` without its padding. The
    /// stream's credit goes back (into `out`) once the service took the bytes; the connection's
    /// is the splice's to give (`Splice::give_back`), as what the services hold allows.
    pub fn data(
        &mut self,
        id: StreamId,
        content: &[u8],
        frame_len: usize,
        end: bool,
        out: &mut BytesMut,
    ) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        // Padding is never read by anyone: its stream credit is due now.
        let mut due = frame_len - content.len();
        if entry.reply.is_ending() {
            due = frame_len;
        } else if !content.is_empty() {
            let open = entry.requests.as_ref().is_some_and(|r| !r.is_closed());
            if open {
                entry.pending.push_back(Bytes::copy_from_slice(content));
                entry.unread += content.len();
                self.unread += content.len();
                entry.framing.feed(content);
                recount(&mut self.held, entry);
                if self.unread > MAX_UNREAD {
                    entry.end(Status::resource_exhausted(format!(
                        "the gateway's services hold {MAX_UNREAD} unread request bytes of this connection already"
                    )));
                    self.parked.push_back(id);
                }
            } else {
                // The service reads no more: nothing will take these bytes.
                due = frame_len;
            }
        }
        if end {
            entry.closing = true;
        } else if due > 0 {
            frame::put_window_update(out, id, due as u32);
            self.granted.push((id, due as u32));
        }
        self.hand_over(id);
    }

    /// Gives the service the request bytes that came, once there is room for its reply;
    /// else the stream waits for room (`short`).
    fn hand_over(&mut self, id: StreamId) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        if entry.reply.is_ending() {
            return;
        }
        let asks = !entry.pending.is_empty();
        if asks && entry.room.is_none() {
            entry.room = self.shared.buffered.reserve(SERVICE_REPLY);
            if entry.room.is_none() {
                return self.wait_for_room(id);
            }
        }
        if asks || entry.closing {
            entry.start(&self.running);
        }
        while let Some(bytes) = entry.pending.pop_front() {
            let len = bytes.len();
            let sent = entry
                .requests
                .as_ref()
                .is_some_and(|r| r.send(bytes).is_ok());
            if !sent {
                // The service reads no more: nothing will take these bytes.
                entry.unread -= len;
                self.unread -= len;
                recount(&mut self.held, entry);
            }
        }
        if entry.closing {
            entry.requests = None;
        }
    }

    fn wait_for_room(&mut self, id: StreamId) {
        if let Some(entry) = self.entries.get_mut(&id) {
            if !std::mem::replace(&mut entry.short, true) {
                self.short.push_back((id, Instant::now()));
            }
        }
    }

    /// Gives the streams waiting for room what they wait for, oldest first, while the gateway
    /// has room; ends those that waited `BUDGET_WAIT` (RESOURCE_EXHAUSTED). Returns whether
    /// anything moved.
    fn retry_short(&mut self) -> bool {
        let mut moved = false;
        while let Some(&(id, since)) = self.short.front() {
            let Some(entry) = self.entries.get_mut(&id) else {
                self.short.pop_front();
                continue;
            };
            if entry.reply.is_ending() {
                entry.short = false;
                self.short.pop_front();
                continue;
            }
            if since.elapsed() >= BUDGET_WAIT {
                tracing::debug!(stream = %id, "service stream ended: no room for its reply");
                entry.short = false;
                entry.end(limits::no_reply_room());
                self.short.pop_front();
                self.parked.push_back(id);
                moved = true;
                continue;
            }
            if entry.room.is_none() {
                entry.room = self.shared.buffered.reserve(SERVICE_REPLY);
                if entry.room.is_none() {
                    break;
                }
            }
            entry.short = false;
            self.short.pop_front();
            moved = true;
            if let Some((guard, body)) = entry.take_asking() {
                self.read_on(id, guard, body);
            }
            self.hand_over(id);
        }
        moved
    }

    /// The stream window given the client since the last call, per stream.
    pub fn drain_granted(&mut self) -> std::vec::Drain<'_, (StreamId, u32)> {
        self.granted.drain(..)
    }

    /// The client's half of stream `id` ended (with trailers or an empty END_STREAM DATA).
    pub fn end_requests(&mut self, id: StreamId) {
        if let Some(entry) = self.entries.get_mut(&id) {
            entry.closing = true;
            self.hand_over(id);
        }
    }

    /// A WINDOW_UPDATE for stream `id`; false when it makes the window overflow (RFC 9113 §6.9.1).
    pub fn window_update(&mut self, id: StreamId, n: u32) -> bool {
        match self.entries.get_mut(&id) {
            Some(entry) => entry.window.increase(n).is_ok(),
            None => true,
        }
    }

    /// The client changed SETTINGS_INITIAL_WINDOW_SIZE by `delta` (RFC 9113 §6.9.2): an
    /// error when it takes a window past 2^31-1.
    pub fn adjust_windows(&mut self, delta: i64) -> Result<(), WindowError> {
        self.entries
            .values_mut()
            .try_for_each(|entry| entry.window.adjust(delta))
    }

    /// The gateway shuts down: every stream ends now with UNAVAILABLE, which clients take as
    /// the cue to call again elsewhere (a health Watch would otherwise hold the connection open
    /// through the whole grace period).
    pub fn shut_down(&mut self) {
        for (id, entry) in &mut self.entries {
            entry.end(Status::unavailable("the gateway is shutting down"));
            self.parked.push_back(*id);
        }
    }

    /// Forgets stream `id`: its service's work ends (see the module's comment).
    pub fn remove(&mut self, id: StreamId) {
        if let Some(entry) = self.entries.remove(&id) {
            self.unread -= entry.unread;
            self.held -= entry.held;
        }
    }

    /// Request bytes the services hold now, on all streams: handed to them and not taken, or
    /// taken as part of a message not yet whole.
    pub fn held(&self) -> usize {
        self.held
    }

    /// The stream whose unfinished request holds the most, with what it holds.
    pub fn largest_unfinished(&self) -> Option<(usize, StreamId)> {
        self.entries
            .iter()
            .filter(|(_, e)| e.requests.is_some() && !e.reply.is_ending() && e.held > 0)
            .map(|(id, e)| (e.held, *id))
            .max()
    }

    /// Ends stream `id` with `status` at the next poll; what it held is let go then.
    pub fn refuse(&mut self, id: StreamId, status: Status) {
        if let Some(entry) = self.entries.get_mut(&id) {
            entry.end(status);
            self.parked.push_back(id);
        }
    }

    /// Moves the streams on: gives back the stream credit the services took, and writes what
    /// they produced as far as the client's windows allow. Returns whether anything moved, and
    /// the streams that ended (the caller ends them and removes them).
    pub fn poll(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut Out<'_>,
        ended: &mut Vec<Finished>,
    ) -> bool {
        let mut progress = self.give_credit(cx, out.frames);
        if !self.short.is_empty() {
            progress |= self.retry_short();
        }
        for _ in 0..self.parked.len() {
            let Some(id) = self.parked.pop_front() else {
                break;
            };
            progress |= self.unpark(id, out, ended);
        }
        while out.room {
            let Poll::Ready(Some((id, step))) = self.running.poll_next_unpin(cx) else {
                break;
            };
            progress = true;
            self.step(id, step, out, ended);
        }
        progress
    }

    /// Stream WINDOW_UPDATEs for what the services took since the last poll.
    fn give_credit(&mut self, cx: &mut Context<'_>, frames: &mut BytesMut) -> bool {
        if self.unread == 0 {
            return false;
        }
        self.credit.waker.register(cx.waker());
        let taken = std::mem::take(&mut *self.credit.taken.lock().expect("never poisoned"));
        for &(id, n) in &taken {
            let Some(entry) = self.entries.get_mut(&id) else {
                continue;
            };
            entry.unread -= n;
            self.unread -= n;
            recount(&mut self.held, entry);
            if entry.requests.is_some() && !entry.closing && !entry.reply.is_ending() {
                frame::put_window_update(frames, id, n as u32);
                self.granted.push((id, n as u32));
            }
        }
        !taken.is_empty()
    }

    /// A parked stream: ends it, or sends what waits and, once all of it went, reads on;
    /// else it stays parked (tried again at each poll: only streams the client does not read
    /// fast enough are ever parked). Returns whether anything moved.
    fn unpark(&mut self, id: StreamId, out: &mut Out<'_>, ended: &mut Vec<Finished>) -> bool {
        let Some(entry) = self.entries.get_mut(&id) else {
            return false;
        };
        // `Reading` only while the frame is out of the entry (not counted as waiting).
        let (mut data, guard, body) = match std::mem::replace(&mut entry.reply, Reply::Reading) {
            Reply::Ending { status, head_sent } => {
                self.finish(id, head_sent, status, out, ended);
                return true;
            }
            Reply::Parked(data, guard, body) => (data, guard, body),
            other => {
                entry.reply = other;
                return false;
            }
        };
        recount(&mut self.held, entry);
        let before = data.len();
        send_data(id, &mut data, &mut entry.window, out);
        if data.is_empty() && out.room {
            self.ask_next(id, guard, body);
            return true;
        }
        let moved = data.len() < before;
        self.park(id, data, guard, body);
        moved
    }

    /// Parks stream `id` with what is left of its reply's frame, until the client's window
    /// and buffer take it.
    fn park(&mut self, id: StreamId, data: Bytes, guard: Guard, body: Body) {
        if let Some(entry) = self.entries.get_mut(&id) {
            entry.reply = Reply::Parked(data, guard, body);
            recount(&mut self.held, entry);
            self.parked.push_back(id);
        }
    }

    fn step(&mut self, id: StreamId, step: Step, out: &mut Out<'_>, ended: &mut Vec<Finished>) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return; // removed meanwhile: its step was only ending
        };
        if entry.reply.is_ending() {
            return; // it ends with its own status at its unpark, already queued
        }
        match step {
            Step::Cancelled => {}
            Step::End(status) => {
                let head_sent = entry.reply.head_sent();
                self.finish(id, head_sent, status, out, ended);
            }
            // A reply whose head carries its status is trailers-only (RFC 9113 §8.1, gRPC).
            Step::Head(parts, _, _) if status::from_headers(&parts.headers).is_some() => {
                let status = status::from_headers(&parts.headers).expect("checked");
                self.finish(id, false, status, out, ended);
            }
            Step::Head(_, guard, body) => {
                let mut block = Vec::with_capacity(64);
                out.encoder.own_block(&mut block);
                headers::reply_head(&mut block);
                frame::put_headers(out.frames, id, &block, false, out.max_frame);
                self.read_on(id, guard, body);
            }
            Step::Data(mut data, guard, body) => {
                // The room reserved for this reply is exchanged for its real size, counted
                // while it waits for the client (`park`).
                entry.replies += 1;
                entry.room = None;
                send_data(id, &mut data, &mut entry.window, out);
                if data.is_empty() && out.room {
                    self.ask_next(id, guard, body);
                } else {
                    self.park(id, data, guard, body);
                }
            }
        }
    }

    /// Asks the service for its next reply once the last went out: once there is room for it
    /// when a request it has not answered yet went to it (the next request reaches a service
    /// only when its last reply was taken, `services::bounded`).
    fn ask_next(&mut self, id: StreamId, guard: Guard, body: Body) {
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        if entry.framing.whole > entry.replies && entry.room.is_none() {
            entry.room = self.shared.buffered.reserve(SERVICE_REPLY);
            if entry.room.is_none() {
                entry.reply = Reply::Asking(guard, body);
                return self.wait_for_room(id);
            }
        }
        self.read_on(id, guard, body);
    }

    /// Waits for the reply body's next frame.
    fn read_on(&mut self, id: StreamId, mut guard: Guard, mut body: Body) {
        if let Some(entry) = self.entries.get_mut(&id) {
            entry.reply = Reply::Reading;
        }
        self.running.push(Box::pin(async move {
            let step = match guard.run(body.frame()).await {
                Err(stop) => stopped(stop),
                Ok(None) => Step::End(Status::internal(
                    "the gateway service's reply ended without a status",
                )),
                Ok(Some(Err(e))) => Step::End(Status::internal(format!("gateway service: {e}"))),
                Ok(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => Step::Data(data, guard, body),
                    Err(frame) => Step::End(
                        frame
                            .trailers_ref()
                            .and_then(status::from_headers)
                            .unwrap_or_else(|| {
                                Status::internal("the gateway service's trailers carry no status")
                            }),
                    ),
                },
            };
            (id, step)
        }));
    }

    /// Sends the reply's end: trailers, or a trailers-only reply if no head went yet.
    fn finish(
        &mut self,
        id: StreamId,
        head_sent: bool,
        status: Status,
        out: &mut Out<'_>,
        ended: &mut Vec<Finished>,
    ) {
        let mut block = Vec::with_capacity(64);
        out.encoder.own_block(&mut block);
        if !head_sent {
            headers::reply_head(&mut block);
        }
        crate::grpc::status::status_fields(&mut block, &status);
        frame::put_headers(out.frames, id, &block, true, out.max_frame);
        self.remove(id);
        ended.push(Finished { id, status });
    }
}

impl Entry {
    /// Its requests' bytes held, and its reply's next frame waiting for the client.
    fn now_held(&self) -> usize {
        let waiting = match &self.reply {
            Reply::Parked(data, ..) => data.len(),
            _ => 0,
        };
        self.unread.max(self.framing.partial) + waiting
    }

    /// Starts the service's call, if it was not: into `running`.
    fn start(&mut self, running: &FuturesUnordered<StepFuture>) {
        match std::mem::replace(&mut self.reply, Reply::Calling) {
            Reply::NotStarted(call) => running.push(call),
            other => self.reply = other,
        }
    }

    /// The reply body, if it waited for room to ask for the next reply.
    fn take_asking(&mut self) -> Option<(Guard, Body)> {
        match std::mem::replace(&mut self.reply, Reply::Reading) {
            Reply::Asking(guard, body) => Some((guard, body)),
            other => {
                self.reply = other;
                None
            }
        }
    }

    /// The stream ends with `status` at its next unpark (the caller parks it): its service
    /// is given no more of the request.
    fn end(&mut self, status: Status) {
        let head_sent = self.reply.head_sent();
        self.reply = Reply::Ending { status, head_sent };
        self.requests = None;
    }
}

/// Brings `entry`'s share of the services' `held` up to date.
fn recount(held: &mut usize, entry: &mut Entry) {
    let now = entry.now_held();
    *held = *held - entry.held + now;
    entry.held = now;
}

/// Follows a request's gRPC messages (a 5-byte prefix with the length, then the message) as
/// its bytes come, in pieces of any size.
#[derive(Default)]
struct Framing {
    prefix: [u8; 5],
    /// Bytes of the prefix read (5: in the message).
    have: usize,
    /// Bytes of the message still to come.
    left: usize,
    /// Bytes of the message not yet whole, its prefix included.
    partial: usize,
    /// Messages whole so far.
    whole: usize,
}

impl Framing {
    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let take = if self.have < 5 {
                let take = (5 - self.have).min(bytes.len());
                self.prefix[self.have..self.have + take].copy_from_slice(&bytes[..take]);
                self.have += take;
                if self.have == 5 {
                    let len = [
                        self.prefix[1],
                        self.prefix[2],
                        self.prefix[3],
                        self.prefix[4],
                    ];
                    self.left = u32::from_be_bytes(len) as usize;
                }
                take
            } else {
                let take = self.left.min(bytes.len());
                self.left -= take;
                take
            };
            self.partial += take;
            bytes = &bytes[take..];
            if self.have == 5 && self.left == 0 {
                self.have = 0;
                self.partial = 0;
                self.whole += 1;
            }
        }
    }
}

/// Sends as much of `data` as the windows and frame size allow.
fn send_data(id: StreamId, data: &mut Bytes, window: &mut Window, out: &mut Out<'_>) {
    while !data.is_empty() {
        let room = out
            .window
            .available()
            .min(window.available())
            .min(out.max_frame);
        if room == 0 {
            return;
        }
        let piece = data.split_to(room.min(data.len()));
        frame::put(out.frames, Kind::Data, 0, id, &piece);
        // Within both windows: `room` is at most what each has.
        let spent = out.window.consume(piece.len());
        let spent_too = window.consume(piece.len());
        debug_assert!(spent.is_ok() && spent_too.is_ok());
        *out.debt += piece.len() as u64;
    }
}

/// Request bytes the services took, per stream, since the splice last looked; and the
/// splice's waker, so that it looks.
#[derive(Default)]
struct Credit {
    taken: Mutex<Vec<(StreamId, usize)>>,
    waker: AtomicWaker,
}

/// A stream's request as its service reads it: the bytes of its DATA frames, in order, each
/// noted as taken when the service reads it.
struct RequestBody {
    id: StreamId,
    messages: mpsc::UnboundedReceiver<Bytes>,
    credit: Arc<Credit>,
}

impl hyper::body::Body for RequestBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match std::task::ready!(self.messages.poll_recv(cx)) {
            Some(bytes) => {
                self.credit
                    .taken
                    .lock()
                    .expect("never poisoned")
                    .push((self.id, bytes.len()));
                self.credit.waker.wake();
                Poll::Ready(Some(Ok(Frame::data(bytes))))
            }
            None => Poll::Ready(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Framing;

    #[test]
    fn framing_holds_the_unfinished_message() {
        let mut f = Framing::default();
        let mut one = vec![0, 0, 0, 0, 3, b'a', b'b', b'c'];
        let two = [0, 0, 0, 0, 10, b'x', b'y'];
        one.extend_from_slice(&two);
        for piece in one.chunks(3) {
            f.feed(piece);
        }
        assert_eq!(f.partial, 7, "the second message, 7 of its 15 bytes");
        f.feed(&[b'z'; 8]);
        assert_eq!(f.partial, 0, "whole");
        f.feed(&[0, 0, 0]);
        assert_eq!(f.partial, 3, "a prefix begun");
        f.feed(&[0, 0]);
        assert_eq!(f.partial, 0, "an empty message is whole at once");
        assert_eq!(f.whole, 3);
    }
}
