//! `--log-format=json` in the shape of Kubernetes' structured logging (component-base's JSON
//! format), so log pipelines keyed on its field names read the gateway as they read the
//! sidecars: one flat object per line,
//!
//! `{"ts":1712345678901.234,"caller":"call/answer.rs:120","msg":"rpc","v":0,"method":"…",…}`
//!
//! - `ts`: milliseconds since the epoch as a float, as component-base writes it;
//! - `caller`: the last two parts of the source path and the line (zap's short caller);
//! - `msg`: the event's message;
//! - `v`: the verbosity the event would have under klog — 0 for info, 4 for debug, 5 for trace;
//!   warnings and errors carry none, as klog's `ErrorS` writes none;
//! - every field of the event at the top level beside them; tracing's `error` field is written
//!   `err`, Kubernetes' name for it.
//!
//! The gateway opens no spans, so there are no span fields to flatten.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The event formatter: see the module's documentation.
pub struct KlogJson;

impl<S, N> FormatEvent<S, N> for KlogJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        writeln!(writer, "{}", line(event, SystemTime::now()))
    }
}

/// The event as one flat JSON object, stamped `now`: written field by field, so `ts`,
/// `caller`, `msg` and `v` lead every line in that order and the event's fields follow in
/// theirs.
fn line(event: &Event<'_>, now: SystemTime) -> String {
    let meta = event.metadata();
    let millis = now
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    let mut fields = Fields::default();
    event.record(&mut fields);
    let mut head: Vec<(&str, Value)> = vec![("ts", Value::from(millis))];
    if let (Some(file), Some(line)) = (meta.file(), meta.line()) {
        head.push(("caller", format!("{}:{line}", short(file)).into()));
    }
    head.push(("msg", fields.message.take().unwrap_or_default().into()));
    if let Some(v) = verbosity(*meta.level()) {
        head.push(("v", v.into()));
    }
    let all = head
        .into_iter()
        .chain(fields.rest.iter().map(|(k, v)| (k.as_str(), v.clone())));
    let members: Vec<String> = all
        .map(|(k, v)| format!("{}:{v}", Value::from(k)))
        .collect();
    format!("{{{}}}", members.join(","))
}

/// klog's verbosity for a tracing level; `None` where klog would write an error.
pub fn verbosity(level: Level) -> Option<u8> {
    match level {
        Level::ERROR | Level::WARN => None,
        Level::INFO => Some(0),
        Level::DEBUG => Some(4),
        Level::TRACE => Some(5),
    }
}

/// `call/plan.rs` for `src/call/plan.rs`: the file and its directory.
fn short(file: &str) -> &str {
    let mut cuts = file.rmatch_indices('/').map(|(i, _)| i);
    match (cuts.next(), cuts.next()) {
        (Some(_), Some(i)) => &file[i + 1..],
        _ => file,
    }
}

/// The event's message, and its other fields in order.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    rest: Vec<(String, Value)>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        let name = match field.name() {
            "message" => {
                self.message = Some(value.as_str().map_or(value.to_string(), String::from));
                return;
            }
            "error" => "err",
            name => name,
        };
        self.rest.push((name.to_string(), value));
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::from(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::from(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::from(value.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_are_short() {
        assert_eq!(short("src/call/plan.rs"), "call/plan.rs");
        assert_eq!(short("/x/y/h2-0.4/src/proto.rs"), "src/proto.rs");
        assert_eq!(short("lib.rs"), "lib.rs");
    }

    #[test]
    fn levels_map_onto_klog_verbosity() {
        assert_eq!(verbosity(Level::INFO), Some(0));
        assert_eq!(verbosity(Level::DEBUG), Some(4));
        assert_eq!(verbosity(Level::TRACE), Some(5));
        assert_eq!(verbosity(Level::ERROR), None);
    }
}
