//! The plugin behind the gateway: one supervised connection, its detected dialect and
//! negotiated session. The supervisor reconnects with bounded, jittered backoff and re-detects
//! after every reconnect, so a driver upgraded in place is noticed; while the plugin is down
//! every call gets UNAVAILABLE naming it, and the gateway keeps serving. Whoever asks whether
//! the plugin is healthy (health Checks and Watches, `/healthz`) shares one Probe per
//! [`PROBE_SHARED_FOR`].

pub mod conn;
pub mod detect;

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::backoff::Backoff;
use crate::dialect::Dialect;
use crate::endpoint::Endpoint;
use crate::grpc::Status;
use crate::hub::{self, v1};
use crate::metrics;
use crate::translate::{self, UpstreamSession};

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
    /// `handle_encoding = "inline"` (see `translate::inline`).
    pub inline_handles: bool,
}

/// A connected plugin: the connection and what was learned on it.
pub struct Live {
    pub conn: Connection,
    pub session: Arc<UpstreamSession>,
    pub detected: Detected,
    /// The plugin's name from GetPluginInfo (the metrics' `driver_name`).
    pub driver_name: Arc<str>,
    /// `upstream.connect_timeout`: how long a connection to the plugin may take to open, its
    /// HTTP/2 handshake included (a splice's own connection too, `splice::conn`).
    pub connect_timeout: Duration,
}

#[derive(Clone)]
enum State {
    Connecting { last_error: Option<String> },
    Ready(Arc<Live>),
}

/// How long a Probe's answer stands for every caller of [`Upstream::probe`]: a thousand
/// health Watches and Checks cost the plugin one Probe per interval, not one each.
pub const PROBE_SHARED_FOR: Duration = Duration::from_secs(2);

/// Handle to the supervised upstream.
pub struct Upstream {
    endpoint: Endpoint,
    state: watch::Receiver<State>,
    supervisor: tokio::task::AbortHandle,
    /// How long a call that arrives before the first attempt ended waits for it.
    connect_timeout: Duration,
    /// The last Probe's answer; locked while a Probe is under way, so that callers wait for
    /// it rather than send their own.
    probed: Arc<tokio::sync::Mutex<Option<Probed>>>,
}

/// A Probe's answer: when it was asked, on which connection.
struct Probed {
    at: Instant,
    on: Weak<Live>,
    result: Result<(), String>,
}

impl Probed {
    /// Whether the answer still stands for a caller on `live` (a new connection asks anew).
    fn stands(&self, live: &Arc<Live>) -> bool {
        self.at.elapsed() < PROBE_SHARED_FOR && self.on.as_ptr() == Arc::as_ptr(live)
    }
}

impl Upstream {
    /// Starts the supervisor task.
    pub fn spawn(settings: Settings) -> Arc<Upstream> {
        let (tx, rx) = watch::channel(State::Connecting { last_error: None });
        let endpoint = settings.endpoint.clone();
        let connect_timeout = settings.connect_timeout;
        let supervisor = tokio::spawn(supervise(settings, tx)).abort_handle();
        Arc::new(Upstream {
            endpoint,
            state: rx,
            supervisor,
            connect_timeout,
            probed: Default::default(),
        })
    }

    /// Stops watching and redialling the plugin, for a gateway that is shutting down: the
    /// plugin going away then (the embedded one is stopped next) is no cause for alarm.
    pub fn stop(&self) {
        self.supervisor.abort();
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

    /// [`Upstream::live`], once the plugin is known: a call that arrives while the first
    /// attempt to reach it is still under way (the ~25 ms a start takes to dial and detect it)
    /// waits for that attempt, at most `deadline` (the call's) and `upstream.connect_timeout`,
    /// rather than fail. Once an attempt has failed, a call is answered at once.
    pub async fn known(&self, deadline: Option<Duration>) -> Result<Arc<Live>, Status> {
        let first = |s: &State| matches!(s, State::Connecting { last_error: None });
        if first(&self.state.borrow()) {
            let limit = deadline.map_or(self.connect_timeout, |d| d.min(self.connect_timeout));
            let mut state = self.state.clone();
            let _ = tokio::time::timeout(limit, state.wait_for(|s| !first(s))).await;
        }
        self.live()
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
    /// Whether the plugin answers Probe ready within `timeout` (over the existing connection,
    /// through the hub, so the answer means the same whatever the dialect); else the reason.
    /// Shared: an answer asked for less than [`PROBE_SHARED_FOR`] ago on the same connection is
    /// everyone's, and a caller that finds a Probe under way waits for its answer. The Probe
    /// runs in a task of its own, so a caller that goes away (a cancelled Check) neither stops
    /// it nor makes the next caller send another.
    pub async fn probe(&self, timeout: Duration) -> Result<(), String> {
        let live = self.live().map_err(|s| s.message().to_string())?;
        let mut last = self.probed.clone().lock_owned().await;
        if let Some(probed) = last.as_ref().filter(|p| p.stands(&live)) {
            return probed.result.clone();
        }
        let task = tokio::spawn(async move {
            let at = Instant::now();
            let result = probe(&live, timeout).await;
            *last = Some(Probed {
                at,
                on: Arc::downgrade(&live),
                result: result.clone(),
            });
            result
        });
        task.await
            .unwrap_or_else(|e| Err(format!("the Probe of the upstream failed: {e}")))
    }
}

/// One Probe on `live`, answered within `timeout`.
async fn probe(live: &Live, timeout: Duration) -> Result<(), String> {
    let probe = translate::call_upstream(
        &live.session,
        &live.conn,
        None,
        hub::Request::Probe(Default::default()),
    );
    match tokio::time::timeout(timeout, probe).await {
        Err(_) => Err(format!(
            "upstream {} did not answer Probe within {timeout:?}",
            live.conn.endpoint()
        )),
        Ok(Err(s)) => Err(format!(
            "upstream {} Probe failed: {:?}: {}",
            live.conn.endpoint(),
            s.code(),
            s.status.message()
        )),
        // An absent `ready` means ready (v1 spec).
        Ok(Ok(hub::Response::Probe(p))) if p.ready == Some(false) => {
            Err(format!("upstream {} is not ready", live.conn.endpoint()))
        }
        Ok(Ok(_)) => Ok(()),
    }
}

async fn supervise(settings: Settings, state: watch::Sender<State>) {
    let endpoints: Vec<Endpoint> = std::iter::once(settings.endpoint.clone())
        .chain(settings.failover.iter().cloned())
        .collect();
    // The endpoint to try next: the one that last worked, else the next in the list.
    let mut at = 0;
    // Full jitter: node gateways that lost one plugin or appliance together do not all
    // reconnect in lockstep (crate::backoff).
    let mut backoff = Backoff::new(settings.backoff_initial, settings.backoff_max);
    let mut previous: Option<Dialect> = None;
    metrics::upstream_state(false);
    loop {
        let endpoint = &endpoints[at];
        match establish(&settings, endpoint).await {
            Ok(live) => {
                backoff.reset();
                announce(endpoint, &live, previous);
                if previous.is_some() {
                    metrics::upstream_reconnected();
                }
                metrics::upstream_dialect(
                    previous.map(Dialect::name),
                    live.detected.dialect.name(),
                    &live.driver_name,
                );
                metrics::upstream_state(true);
                previous = Some(live.detected.dialect);
                let conn = live.conn.clone();
                if state.send(State::Ready(Arc::new(live))).is_err() {
                    return; // nobody is listening any more
                }
                conn.closed().await;
                metrics::upstream_state(false);
                tracing::warn!(upstream = %endpoint, "upstream connection lost; reconnecting");
                let _ = state.send(State::Connecting {
                    last_error: Some("connection lost".into()),
                });
            }
            Err(error) => {
                let pause = backoff.next_pause();
                tracing::warn!(upstream = %endpoint, %error, retry_in = ?pause, "upstream not reachable");
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
                tokio::time::sleep(pause).await;
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
    let mut session = detected.session();
    session.inline_handles = settings.inline_handles;
    let (driver_name, requires_staging) = learn(&session, &conn, settings.connect_timeout).await;
    session.requires_staging = requires_staging;
    Ok(Live {
        conn,
        session: Arc::new(session),
        detected,
        driver_name: driver_name.into(),
        connect_timeout: settings.connect_timeout,
    })
}

/// The plugin's name and whether it requires NodeStageVolume, asked through the hub so it reads
/// the same in every dialect. A plugin without a node service simply does not stage.
async fn learn(session: &UpstreamSession, conn: &Connection, timeout: Duration) -> (String, bool) {
    let ask = |request| {
        tokio::time::timeout(
            timeout,
            translate::call_upstream(session, conn, None, request),
        )
    };
    let name = match ask(hub::Request::GetPluginInfo(Default::default())).await {
        Ok(Ok(hub::Response::GetPluginInfo(info))) if !info.name.is_empty() => info.name,
        _ => metrics::UNKNOWN_DRIVER.to_string(),
    };
    let stages = match ask(hub::Request::NodeGetCapabilities(Default::default())).await {
        Ok(Ok(hub::Response::NodeGetCapabilities(caps))) => caps.capabilities.iter().any(|c| {
            matches!(&c.r#type, Some(v1::node_service_capability::Type::Rpc(rpc))
                if rpc.r#type == v1::node_service_capability::rpc::Type::StageUnstageVolume as i32)
        }),
        _ => false,
    };
    (name, stages)
}

fn announce(endpoint: &Endpoint, live: &Live, previous: Option<Dialect>) {
    let detected = &live.detected;
    let dialect = if detected.v0_2 {
        "v0.2".to_string()
    } else {
        detected.dialect.to_string()
    };
    let version = detected
        .version
        .map(|v| format!("{}.{}.{}", v.major, v.minor, v.patch));
    let (driver, staging) = (&*live.driver_name, live.session.requires_staging);
    match previous {
        Some(p) if p != detected.dialect => tracing::warn!(
            upstream = %endpoint, from = %p, to = %dialect, ?version, driver, staging,
            "upstream dialect changed across a reconnect (driver upgraded?); re-negotiated"
        ),
        _ => {
            tracing::info!(upstream = %endpoint, %dialect, ?version, driver, staging, "upstream connected")
        }
    }
}
