//! Prometheus metrics. The per-call histogram is exactly the one the Kubernetes CSI sidecars
//! export (`csi_sidecar_operations_seconds{driver_name, method_name, grpc_status_code}`, same
//! buckets, Go's code names), so existing dashboards work; the gateway's own series carry the
//! `csi_gateway_` prefix. The sidecar histogram counts CSI calls only (the gateway's own
//! reflection and health services have `csi_gateway_service_calls_total`), and
//! `csi_gateway_info` is exported by gateways alone: a Prometheus that scrapes the real
//! sidecars too tells the two apart by joining on it (`deploy/prometheus/alerts.yml`). Every
//! label value is bounded: method names come from the route table
//! (an unrouted path is `unknown`), dialects and codes from fixed sets.

use std::cell::RefCell;
use std::sync::OnceLock;
use std::time::Duration;

use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Counter,
    Gauge, Histogram, Unit,
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::grpc::Code;

pub const OPERATIONS: &str = "csi_sidecar_operations_seconds";
pub const TRANSLATIONS: &str = "csi_gateway_translations_total";
pub const UPSTREAM_SECONDS: &str = "csi_gateway_upstream_seconds";
pub const OVERHEAD_SECONDS: &str = "csi_gateway_overhead_seconds";
pub const IN_FLIGHT: &str = "csi_gateway_calls_in_flight";
pub const UPSTREAM_CONNECTED: &str = "csi_gateway_upstream_connected";
pub const UPSTREAM_RECONNECTS: &str = "csi_gateway_upstream_reconnects_total";
pub const UPSTREAM_DIALECT: &str = "csi_gateway_upstream_dialect_info";
/// Recorded by the TLS crate (the bridge), described and exported here with the others.
pub use csi_gateway_tls::metrics::{
    certificate_expiry, tls_handshake_failure, CERT_EXPIRY, TLS_HANDSHAKE_FAILURES,
};
pub const STORE_OPERATIONS: &str = "csi_gateway_store_operations_total";
pub const STAGING_REFERENCES: &str = "csi_gateway_staging_references";
pub const STORE_DAMAGED: &str = "csi_gateway_store_damaged_values";
pub const CONNECTIONS: &str = "csi_gateway_connections_total";
pub const SERVICE_CALLS: &str = "csi_gateway_service_calls_total";
pub const INFO: &str = "csi_gateway_info";
/// Single flight (`call::guard`), per method.
pub const SINGLE_FLIGHT_CALLS: &str = "csi_gateway_single_flight_calls";
pub const SINGLE_FLIGHT_OLDEST: &str = "csi_gateway_single_flight_oldest_seconds";
pub const SINGLE_FLIGHT_JOINED: &str = "csi_gateway_single_flight_joined_total";
pub const SINGLE_FLIGHT_KEPT: &str = "csi_gateway_single_flight_kept_total";
/// The queues of `max_in_flight` and `qps` (`call::protect`), per method.
pub const PROTECTION_QUEUED: &str = "csi_gateway_protection_queued";
pub const PROTECTION_OLDEST: &str = "csi_gateway_protection_oldest_seconds";
pub const PROTECTION_QUEUE_WAIT: &str = "csi_gateway_protection_queue_wait_seconds";

/// The CSI sidecars' buckets (csi-lib-utils `operationsLatencyBuckets`).
const SIDECAR_BUCKETS: &[f64] = &[
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 25.0, 50.0, 120.0, 300.0, 600.0,
];
/// The gateway's own latency split lives well below a millisecond.
const FINE_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1.0, 5.0, 30.0,
];

/// The driver name before the upstream told it (the sidecars' placeholder).
pub const UNKNOWN_DRIVER: &str = "unknown-driver";

/// Installs the process-wide recorder once and returns the handle that renders `/metrics`.
pub fn install() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let handle = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(OPERATIONS.into()), SIDECAR_BUCKETS)
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Prefix("csi_gateway_".into()), FINE_BUCKETS)
                })
                .expect("bucket lists are non-empty")
                .install_recorder()
                .expect("the metrics recorder is installed once per process");
            describe();
            handle
        })
        .clone()
}

fn describe() {
    describe_histogram!(
        OPERATIONS,
        Unit::Seconds,
        "Container Storage Interface operation duration with gRPC error code status total"
    );
    describe_counter!(
        TRANSLATIONS,
        "Calls translated between dialects, by front dialect, upstream dialect, method and outcome"
    );
    describe_histogram!(
        UPSTREAM_SECONDS,
        Unit::Seconds,
        "Time spent waiting for the upstream plugin, per call"
    );
    describe_histogram!(
        OVERHEAD_SECONDS,
        Unit::Seconds,
        "Time the gateway itself added to a call (total minus upstream)"
    );
    describe_gauge!(IN_FLIGHT, "Calls being served now");
    describe_gauge!(
        UPSTREAM_CONNECTED,
        "1 while the upstream plugin is connected and its dialect known"
    );
    describe_counter!(
        UPSTREAM_RECONNECTS,
        "Times the upstream connection was lost and re-established"
    );
    describe_gauge!(
        UPSTREAM_DIALECT,
        "The upstream's detected dialect (value 1 on the current one)"
    );
    describe_counter!(
        TLS_HANDSHAKE_FAILURES,
        "TLS handshakes refused or failed, by reason"
    );
    describe_gauge!(
        CERT_EXPIRY,
        Unit::Seconds,
        "Expiry time of each loaded certificate (Unix seconds)"
    );
    describe_counter!(
        STORE_OPERATIONS,
        "Durable store operations by kind and outcome"
    );
    describe_counter!(
        CONNECTIONS,
        "Client connections accepted, by path (spliced, or unattached: no upstream connection of its own), client side (unix, tls: the appliance listener) and upstream side (unix, tls, none: down)"
    );
    describe_counter!(
        SERVICE_CALLS,
        "Calls of the gateway's own services (gRPC reflection and health), by method and code"
    );
    describe_gauge!(
        SINGLE_FLIGHT_CALLS,
        "Single-flight calls running at the plugin, by method (calls.methods.NAME.single_flight)"
    );
    describe_gauge!(
        SINGLE_FLIGHT_OLDEST,
        Unit::Seconds,
        "Age of the oldest single-flight call running at the plugin, by method (0: none)"
    );
    describe_counter!(
        SINGLE_FLIGHT_JOINED,
        "Retries joined to the identical call running at the plugin instead of reaching it again"
    );
    describe_counter!(
        SINGLE_FLIGHT_KEPT,
        "Single-flight calls that finished after all their callers had left, by final code"
    );
    describe_gauge!(
        PROTECTION_OLDEST,
        Unit::Seconds,
        "Age of the oldest call of a guarded method that is not single flight, by method (0: none)"
    );
    describe_gauge!(
        PROTECTION_QUEUED,
        "Calls waiting in a method's queue for max_in_flight or qps (calls.methods.NAME.queue)"
    );
    describe_histogram!(
        PROTECTION_QUEUE_WAIT,
        Unit::Seconds,
        "Time calls of a queueing method waited for their turn"
    );
    describe_gauge!(
        INFO,
        "1 on every csi-gateway: its version, the dialects it serves and its upstream endpoint (join on job and instance to select gateways)"
    );
    describe_gauge!(
        STORE_DAMAGED,
        "Values in the durable store found damaged (checksum mismatch), until written or deleted again; calls that need one fail with DATA_LOSS"
    );
    describe_gauge!(
        STAGING_REFERENCES,
        "Published targets holding an emulated staging, all volumes together"
    );
}

/// Go's names for gRPC codes (what the sidecars put in `grpc_status_code`).
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

pub use csi_gateway_translate::Origin;

/// One finished call, as the metrics see it.
pub struct CallMetrics<'a> {
    pub driver: &'a str,
    /// The routed gRPC path, or `unknown`.
    pub method: &'static str,
    pub code: Code,
    pub total: Duration,
    pub upstream: Option<Duration>,
    /// Front and upstream dialect, for translated calls.
    pub translation: Option<(&'static str, &'static str)>,
    /// Whose failure the call is; `None` if it succeeded.
    pub origin: Option<Origin>,
    /// A call of the gateway's own services (reflection, health), not a CSI operation.
    pub service: bool,
}

pub fn record_call(c: &CallMetrics<'_>) {
    if c.service {
        let code = code_name(c.code);
        return counter!(SERVICE_CALLS, "method_name" => c.method, "grpc_status_code" => code)
            .increment(1);
    }
    record_operation(c.driver, c.method, c.code, c.total);
    if let Some(up) = c.upstream {
        record_split(c.method, c.total, up);
    }
    if let Some((front, upstream)) = c.translation {
        let outcome = c.origin.map_or("ok", Origin::name);
        count_translation((front, upstream, c.method, outcome));
    }
}

/// A label that is one of the gateway's own `&'static str` constants (method, dialect and
/// outcome names), keyed by where it lives: the per-call lookups below hash and compare two
/// words instead of the text (hashing and comparing four label strings was ~250 instructions of
/// a translated call; callgrind). Two constants with equal text get two entries for the same
/// series, which the registry merges.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Label(usize, usize);

impl Label {
    fn of(s: &'static str) -> Label {
        Label(s.as_ptr() as usize, s.len())
    }
}

/// Sidecar histogram handles by (method, code), each with the driver it was made for.
type OperationHandles = foldhash::HashMap<(Label, i32), (String, Histogram)>;

/// The translation counter's labels: front dialect, upstream dialect, method, outcome. Every
/// one comes from a fixed set, so the handles kept per thread are bounded.
type TranslationKey = (&'static str, &'static str, &'static str, &'static str);

thread_local! {
    /// Handles already looked up in the registry: the hot path records into a handle instead
    /// of building and hashing its labels on every call (a registry lookup with four labels
    /// was ~2.5k instructions, a quarter of a relayed call; callgrind, `csi-gateway-load`).
    static OPERATION_HANDLES: RefCell<OperationHandles> = RefCell::new(foldhash::HashMap::default());
    static SPLIT_HANDLES: RefCell<foldhash::HashMap<Label, (Histogram, Histogram)>> =
        RefCell::new(foldhash::HashMap::default());
    static TRANSLATION_HANDLES: RefCell<foldhash::HashMap<[Label; 4], Counter>> =
        RefCell::new(foldhash::HashMap::default());
    /// The translation series counted last, and its handle.
    static LAST_TRANSLATION: RefCell<Option<([Label; 4], Counter)>> = const { RefCell::new(None) };
    static IN_FLIGHT_GAUGE: Gauge = gauge!(IN_FLIGHT);
}

/// Records a call's time with the upstream and the rest in its method's histograms.
fn record_split(method: &'static str, total: Duration, upstream: Duration) {
    SPLIT_HANDLES.with_borrow_mut(|handles| {
        let (up, overhead) = handles.entry(Label::of(method)).or_insert_with(|| {
            (
                histogram!(UPSTREAM_SECONDS, "method_name" => method),
                histogram!(OVERHEAD_SECONDS, "method_name" => method),
            )
        });
        up.record(upstream.as_secs_f64());
        overhead.record(total.saturating_sub(upstream).as_secs_f64());
    })
}

/// Counts one translated call in the series of its dialect pair, method and outcome.
fn count_translation(key: TranslationKey) {
    let (front, upstream, method, outcome) = key;
    let labels = [front, upstream, method, outcome].map(Label::of);
    LAST_TRANSLATION.with_borrow_mut(|last| {
        // Calls come in runs of one method: the previous call's handle is usually this one's,
        // which spares hashing the four labels (~110 instructions a call; callgrind).
        if let Some((_, counter)) = last.as_ref().filter(|(seen, _)| *seen == labels) {
            return counter.increment(1);
        }
        let counter = TRANSLATION_HANDLES.with_borrow_mut(|handles| {
            handles
                .entry(labels)
                .or_insert_with(|| {
                    counter!(TRANSLATIONS, "front_dialect" => front, "upstream_dialect" => upstream, "method_name" => method, "outcome" => outcome)
                })
                .clone()
        });
        counter.increment(1);
        *last = Some((labels, counter));
    })
}

/// Records a call's duration in the sidecar histogram's series for its driver, method and code.
fn record_operation(driver: &str, method: &'static str, code: Code, total: Duration) {
    OPERATION_HANDLES.with_borrow_mut(|handles| {
        let key = (Label::of(method), code as i32);
        match handles.get(&key) {
            Some((made_for, h)) if made_for == driver => h.record(total.as_secs_f64()),
            _ => {
                let h = histogram!(OPERATIONS, "driver_name" => driver.to_string(), "method_name" => method, "grpc_status_code" => code_name(code));
                h.record(total.as_secs_f64());
                handles.insert(key, (driver.to_string(), h));
            }
        }
    })
}

/// Counts a call in flight until dropped.
pub struct InFlight(());

impl InFlight {
    pub fn start() -> InFlight {
        IN_FLIGHT_GAUGE.with(|g| g.increment(1.0));
        InFlight(())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT_GAUGE.with(|g| g.decrement(1.0));
    }
}

/// The upstream connected (with its dialect and driver) or lost.
pub fn upstream_state(connected: bool) {
    gauge!(UPSTREAM_CONNECTED).set(if connected { 1.0 } else { 0.0 });
}

pub fn upstream_reconnected() {
    counter!(UPSTREAM_RECONNECTS).increment(1);
}

/// Marks `dialect` as the upstream's, clearing a previous one.
pub fn upstream_dialect(previous: Option<&str>, dialect: &str, driver: &str) {
    if let Some(p) = previous.filter(|p| *p != dialect) {
        gauge!(UPSTREAM_DIALECT, "dialect" => p.to_string(), "driver_name" => driver.to_string())
            .set(0.0);
    }
    gauge!(UPSTREAM_DIALECT, "dialect" => dialect.to_string(), "driver_name" => driver.to_string())
        .set(1.0);
}

/// The gateway's identity: `csi_gateway_info{version, dialects, upstream} 1`.
pub fn gateway_info(version: &'static str, dialects: String, upstream: String) {
    gauge!(INFO, "version" => version, "dialects" => dialects, "upstream" => upstream).set(1.0);
}

/// One durable store operation and whether it succeeded.
pub fn store_operation(op: &'static str, ok: bool) {
    counter!(STORE_OPERATIONS, "operation" => op, "outcome" => if ok { "ok" } else { "error" })
        .increment(1);
}

/// How many values of the durable store are damaged now.
pub fn store_damaged_values(n: usize) {
    gauge!(STORE_DAMAGED).set(n as f64);
}

/// A TLS handshake or peer admission refused, by a bounded reason.
pub fn front_connection(path: &'static str, client: &'static str, upstream: &'static str) {
    counter!(CONNECTIONS, "path" => path, "client" => client, "upstream" => upstream).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_names_are_go_names() {
        assert_eq!(code_name(Code::Cancelled), "Canceled");
        assert_eq!(code_name(Code::InvalidArgument), "InvalidArgument");
        assert_eq!(code_name(Code::Ok), "OK");
    }
}
