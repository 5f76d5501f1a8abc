//! The terminated path's share of the request-bytes budget (`Shared::buffered`), by the rule the
//! splice keeps (`crate::splice`): a call that reads its request whole counts what it read, on
//! the gateway's total and its connection's, and gives the client window back for it (h2's flow
//! control is manual: `release_capacity`) only while both may hold more. A client obeying flow
//! control then sends nothing more meanwhile, so the gateway never buffers past what it granted:
//! the budget plus, per connection, the window h2 grants at connect time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::RecvStream;

use crate::grpc::body::{h2_status, Gathered};
use crate::grpc::Status;

use super::limits::{no_room, Budget, BUDGET_WAIT, CONNECTION_BUFFERED};

/// How often a request waiting for room looks again. The budget keeps no waiters (the splice
/// gives bytes back on its hot path, where waking anyone would cost): only a request already
/// held back polls, and only while it is.
const ROOM_POLL: Duration = Duration::from_millis(20);

/// The request bytes one terminated connection's calls hold, against [`CONNECTION_BUFFERED`]:
/// made by the connection, carried to each call as a request extension.
#[derive(Clone, Debug, Default)]
pub struct ConnectionHeld(Arc<Connection>);

#[derive(Debug, Default)]
struct Connection {
    used: AtomicUsize,
    /// When a request of the connection was last refused for room.
    refused: std::sync::Mutex<Option<tokio::time::Instant>>,
}

impl ConnectionHeld {
    fn used(&self) -> usize {
        self.0.used.load(Ordering::Relaxed)
    }

    /// Whether a request that waited [`BUDGET_WAIT`] for room is the one to refuse: one per
    /// connection per [`BUDGET_WAIT`], so that requests that began waiting together (each
    /// for another's room) are not all refused together; the room one refusal makes lets the
    /// others go on.
    fn refuse_one(&self, now: tokio::time::Instant) -> bool {
        let mut refused = self.0.refused.lock().unwrap_or_else(|e| e.into_inner());
        if refused.is_some_and(|at| now < at + BUDGET_WAIT) {
            return false;
        }
        *refused = Some(now);
        true
    }
}

/// One call's request body and the bytes read from it, on the counts until the call ends,
/// however it ends (dropped: given back, and the window withheld for them granted).
pub struct Held<'a> {
    budget: &'a Budget,
    connection: ConnectionHeld,
    body: RecvStream,
    held: usize,
    /// Read, and not yet given back to the client as window.
    withheld: usize,
}

impl<'a> Held<'a> {
    /// `connection`: `None` for a call that came without one (counted on the budget only).
    pub fn new(budget: &'a Budget, connection: Option<ConnectionHeld>, body: RecvStream) -> Self {
        Held {
            budget,
            connection: connection.unwrap_or_default(),
            body,
            held: 0,
            withheld: 0,
        }
    }

    /// Reads the body to its end. Past [`BUDGET_WAIT`] without room to grant window, the
    /// request is refused RESOURCE_EXHAUSTED (one a connection at a time, see
    /// [`ConnectionHeld::refuse_one`]).
    pub async fn read_to_end(&mut self) -> Result<Bytes, Status> {
        let mut message = Gathered::default();
        let mut waiting = None;
        loop {
            let next = if self.grant_withheld() {
                waiting = None;
                self.body.data().await
            } else {
                let since = *waiting.get_or_insert_with(tokio::time::Instant::now);
                let now = tokio::time::Instant::now();
                if now >= since + BUDGET_WAIT {
                    if self.connection.refuse_one(now) {
                        return Err(no_room());
                    }
                    waiting = Some(now);
                }
                // `data()` is cancel-safe: what h2 holds stays there until taken.
                tokio::select! {
                    next = self.body.data() => next,
                    () = tokio::time::sleep(ROOM_POLL) => continue,
                }
            };
            let Some(chunk) = next else {
                return Ok(message.whole());
            };
            let chunk = chunk.map_err(|e| h2_status(&e, "reading the message"))?;
            self.hold(chunk.len());
            message.push(chunk)?;
        }
    }

    fn hold(&mut self, n: usize) {
        self.held += n;
        self.withheld += n;
        self.budget.take(n);
        self.connection.0.used.fetch_add(n, Ordering::Relaxed);
    }

    /// Gives the client back the window withheld if the gateway and the connection may hold
    /// more; whether nothing is withheld now.
    fn grant_withheld(&mut self) -> bool {
        if self.withheld > 0 && self.budget.room() && self.connection.used() < CONNECTION_BUFFERED {
            let n = std::mem::take(&mut self.withheld);
            let _ = self.body.flow_control().release_capacity(n);
        }
        self.withheld == 0
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.budget.give(self.held);
        self.connection
            .0
            .used
            .fetch_sub(self.held, Ordering::Relaxed);
        if self.withheld > 0 {
            // The call is over: its window goes back to the connection (h2 would only once
            // the stream is gone).
            let _ = self.body.flow_control().release_capacity(self.withheld);
        }
    }
}
