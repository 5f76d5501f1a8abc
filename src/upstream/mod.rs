//! The plugin behind the gateway: one supervised connection, its detected dialect and
//! negotiated session. The supervisor reconnects with bounded backoff and re-detects after every
//! reconnect, so a driver upgraded in place is noticed; while the plugin is down every call gets
//! UNAVAILABLE naming it, and the gateway keeps serving.

pub mod conn;
pub mod detect;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::dialect::Dialect;
use crate::endpoint::Endpoint;
use crate::grpc::Status;
use crate::translate::UpstreamSession;

pub use conn::Connection;
pub use detect::Detected;

/// How to reach and treat the plugin.
#[derive(Clone, Debug)]
pub struct Settings {
    pub endpoint: Endpoint,
    /// `None` detects the dialect at every (re)connect.
    pub dialect: Option<Dialect>,
    pub connect_timeout: Duration,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// Further endpoints tried in turn when the current one cannot be reached.
    pub failover: Vec<Endpoint>,
    /// Client TLS for `tcp://` endpoints (which are never dialed in plaintext).
    pub tls: Option<Arc<crate::tls::Dialer>>,
}

/// A connected plugin: the connection and what was learned on it.
pub struct Live {
    pub conn: Connection,
    pub session: Arc<UpstreamSession>,
    pub detected: Detected,
}

#[derive(Clone)]
enum State {
    Connecting { last_error: Option<String> },
    Ready(Arc<Live>),
}

/// Handle to the supervised upstream.
pub struct Upstream {
    endpoint: Endpoint,
    state: watch::Receiver<State>,
}

impl Upstream {
    /// Starts the supervisor task.
    pub fn spawn(settings: Settings) -> Arc<Upstream> {
        let (tx, rx) = watch::channel(State::Connecting { last_error: None });
        let endpoint = settings.endpoint.clone();
        tokio::spawn(supervise(settings, tx));
        Arc::new(Upstream {
            endpoint,
            state: rx,
        })
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The live connection, or UNAVAILABLE naming the upstream and why.
    pub fn live(&self) -> Result<Arc<Live>, Status> {
        match &*self.state.borrow() {
            State::Ready(live) => Ok(live.clone()),
            State::Connecting { last_error } => Err(Status::unavailable(match last_error {
                Some(e) => format!("upstream {} is not connected: {e}", self.endpoint),
                None => format!("upstream {} is not connected yet", self.endpoint),
            })),
        }
    }

    /// Waits up to `timeout` for a live connection.
    pub async fn ready(&self, timeout: Duration) -> Result<Arc<Live>, Status> {
        let mut state = self.state.clone();
        let ready = async move {
            let _ = state.wait_for(|s| matches!(s, State::Ready(_))).await;
        };
        let _ = tokio::time::timeout(timeout, ready).await;
        self.live()
    }
}

async fn supervise(settings: Settings, state: watch::Sender<State>) {
    let endpoints: Vec<Endpoint> = std::iter::once(settings.endpoint.clone())
        .chain(settings.failover.iter().cloned())
        .collect();
    // The endpoint to try next: the one that last worked, else the next in the list.
    let mut at = 0;
    let mut backoff = settings.backoff_initial;
    let mut previous: Option<Dialect> = None;
    loop {
        let endpoint = &endpoints[at];
        match establish(&settings, endpoint).await {
            Ok(live) => {
                backoff = settings.backoff_initial;
                announce(endpoint, &live.detected, previous);
                previous = Some(live.detected.dialect);
                let conn = live.conn.clone();
                if state.send(State::Ready(Arc::new(live))).is_err() {
                    return; // nobody is listening any more
                }
                conn.closed().await;
                tracing::warn!(upstream = %endpoint, "upstream connection lost; reconnecting");
                let _ = state.send(State::Connecting {
                    last_error: Some("connection lost".into()),
                });
            }
            Err(error) => {
                tracing::warn!(upstream = %endpoint, %error, retry_in = ?backoff, "upstream not reachable");
                if state
                    .send(State::Connecting {
                        last_error: Some(error),
                    })
                    .is_err()
                {
                    return;
                }
                if endpoints.len() > 1 {
                    at = (at + 1) % endpoints.len();
                    tracing::info!(next = %endpoints[at], "failing over to the next upstream");
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(settings.backoff_max);
            }
        }
    }
}

async fn establish(settings: &Settings, endpoint: &Endpoint) -> Result<Live, String> {
    let conn = Connection::dial(endpoint, settings.tls.as_ref(), settings.connect_timeout)
        .await
        .map_err(|e| e.to_string())?;
    let detected = tokio::time::timeout(
        settings.connect_timeout,
        detect::detect(&conn, settings.dialect),
    )
    .await
    .map_err(|_| format!("dialect detection on {endpoint} timed out"))?
    .map_err(|s| format!("dialect detection on {endpoint} failed: {}", s.message()))?;
    let session = UpstreamSession::new(detected.dialect, detected.version);
    if detected.v0_2 {
        session
            .node_get_id_fallback
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(Live {
        conn,
        session: Arc::new(session),
        detected,
    })
}

fn announce(endpoint: &Endpoint, detected: &Detected, previous: Option<Dialect>) {
    let dialect = if detected.v0_2 {
        "v0.2".to_string()
    } else {
        detected.dialect.to_string()
    };
    let version = detected
        .version
        .map(|v| format!("{}.{}.{}", v.major, v.minor, v.patch));
    match previous {
        Some(p) if p != detected.dialect => tracing::warn!(
            upstream = %endpoint, from = %p, to = %dialect, ?version,
            "upstream dialect changed across a reconnect (driver upgraded?); re-negotiated"
        ),
        _ => tracing::info!(upstream = %endpoint, %dialect, ?version, "upstream connected"),
    }
}
