//! What the connection's streams work on, whatever their kind: a borrow bundle of the parts a
//! stream may read and write (as h2's `DynStreams` is of its `Streams`), made by
//! `Splice::calls` for one frame or one piece of the connection's own work. The connection's
//! own frames (SETTINGS, PING, GOAWAY), its sockets and its timer are not in it: a stream's
//! work never reaches them.
//!
//! Each kind of stream has its methods on `Calls` in its own file: `relayed.rs`,
//! `translated.rs`, `local.rs` (answered by the gateway) and `service.rs`; what every kind
//! shares (a stream's end, its windows, the client's RST_STREAM, PRIORITY and DATA, handed to
//! the stream's kind with one `match`) is in `streams.rs`, `flow.rs` and `client_side.rs`.

use super::*;

pub(super) struct Calls<'a> {
    pub(super) streams: &'a mut Streams,
    pub(super) flow: &'a mut Flow,
    pub(super) local: &'a mut LocalCalls,
    pub(super) services: &'a mut ServiceStreams,
    pub(super) to_client: &'a mut ToClient,
    pub(super) to_upstream: &'a mut BytesMut,
    pub(super) blocks: &'a mut Blocks,
    pub(super) settings: &'a mut Settings,
    pub(super) env: &'a mut Env,
    /// Nothing goes to the upstream any more (`GoAway::upstream_gone`).
    pub(super) upstream_gone: bool,
    /// When the bytes being handled were read.
    pub(super) now: Instant,
}

impl<C: Io, U: Io> Splice<C, U> {
    /// The parts of the connection its streams work on.
    pub(super) fn calls(&mut self) -> Calls<'_> {
        Calls {
            streams: &mut self.streams,
            flow: &mut self.flow,
            local: &mut self.local,
            services: &mut self.services,
            to_client: &mut self.to_client,
            to_upstream: &mut self.to_upstream,
            blocks: &mut self.blocks,
            settings: &mut self.settings,
            env: &mut self.env,
            upstream_gone: self.go_away.upstream_gone,
            now: self.now,
        }
    }
}

impl Calls<'_> {
    /// The parts the calls the splice answers itself work on.
    pub(super) fn answering(&mut self) -> Answering<'_> {
        Answering {
            calls: self.local,
            streams: self.streams,
            flow: self.flow,
            env: self.env,
        }
    }
}
