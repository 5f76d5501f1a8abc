//! The one place a failed call becomes its reply, whichever path served it (spliced,
//! answered by the splice itself, relayed or translated), so that a client reads the same reply
//! for the same failure on every path. Each failure is tagged with its origin — the client, the
//! gateway or the upstream — where it is made, never guessed from its code: a failed upstream
//! call says whose it is ([`crate::translate::CallError`]). The call's log line and the
//! metrics' `outcome` label show it.
//!
//! Per front dialect: v1, v0.3 and v0.1 answer an error with its gRPC status; the draft
//! (`v0.1-oneof`) answers it inside an OK reply, in the `Error` branch the RPC's table gives
//! (`translate::errors`) — the gateway's own failures as a retryable `GeneralError`. An upstream
//! error on a relayed call is never re-encoded: the call is not decoded, so its reply reaches
//! the client as the upstream sent it.

use crate::grpc::Status;
use crate::metrics::Origin;
use crate::observe::{Called, Report};
use crate::translate;

/// `status`, a failure of `origin`, as the reply `route`'s front dialect gives, noted in
/// `report`. Returns the reply message (the draft's `Error` branch in an OK reply), or the
/// status to send as the whole reply (other dialects, and calls that matched no route).
pub fn error_reply(
    called: Option<Called>,
    origin: Origin,
    status: Status,
    report: &mut Report,
) -> Result<Vec<u8>, Status> {
    report.fail(origin, &status);
    match called {
        Some(r) => translate::front::encode_front_method(r.dialect, r.method, Err(status)),
        None => Err(status),
    }
}

/// A request whose header list is over SETTINGS_MAX_HEADER_LIST_SIZE (`limit`), on every path:
/// RESOURCE_EXHAUSTED, as gRPC names a request over a size limit (a client may shrink its
/// metadata), rather than the HTTP 431 that h2 sends by itself, which gRPC clients read as
/// UNKNOWN (the gRPC spec's HTTP-to-status table maps no 4xx but 400, 401, 403, 404 and 429).
/// The message names no size of the request's: the count stops at the limit.
pub fn header_list_too_large(limit: u32) -> Status {
    Status::resource_exhausted(format!(
        "request headers over the limit of {limit} bytes (SETTINGS_MAX_HEADER_LIST_SIZE)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::proto::v0_1_oneof as draft;
    use crate::dialect::Dialect;
    use crate::grpc::Code;
    use prost::Message;

    fn route(dialect: Dialect, path: &str) -> Option<Called> {
        let method = dialect.methods().iter().find(|m| m.path == path).unwrap();
        Some(Called { dialect, method })
    }

    #[test]
    fn the_gateway_failing_is_a_retryable_general_error_to_a_draft_client() {
        let path = "/csi.Controller/CreateVolume";
        let mut report = Report::new(path.into());
        let down = Status::unavailable("upstream unix:///p.sock: connection lost");
        let reply = error_reply(
            route(Dialect::V0_1Oneof, path),
            Origin::Gateway,
            down,
            &mut report,
        )
        .expect("the draft answers errors inside an OK reply");
        let reply = draft::CreateVolumeResponse::decode(reply.as_slice()).unwrap();
        let Some(draft::create_volume_response::Reply::Error(e)) = reply.reply else {
            panic!("{reply:?}");
        };
        let Some(draft::error::Value::GeneralError(g)) = e.value else {
            panic!("{e:?}");
        };
        assert!(!g.caller_must_not_retry, "{g:?}");
        assert!(g.error_description.contains("unix:///p.sock"), "{g:?}");
        assert_eq!(
            (report.code, report.origin()),
            (Code::Unavailable, Some(Origin::Gateway))
        );
    }

    #[test]
    fn other_dialects_answer_with_the_status() {
        for (dialect, path) in [
            (Dialect::V1, "/csi.v1.Controller/CreateVolume"),
            (Dialect::V0_3, "/csi.v0.Controller/CreateVolume"),
            (Dialect::V0_1, "/csi.Controller/CreateVolume"),
        ] {
            let mut report = Report::new(path.into());
            let s = Status::invalid_argument("name missing");
            let got = error_reply(route(dialect, path), Origin::Client, s, &mut report);
            assert_eq!(got.unwrap_err().code(), Code::InvalidArgument, "{dialect}");
            assert_eq!(report.origin(), Some(Origin::Client));
        }
        let mut report = Report::new("/x.Y/Z".into());
        let got = error_reply(
            None,
            Origin::Client,
            Status::unimplemented("?"),
            &mut report,
        );
        assert_eq!(got.unwrap_err().code(), Code::Unimplemented);
    }

    #[test]
    fn a_failure_is_whoever_noted_it_never_its_codes() {
        let mut report = Report::new("/csi.v1.Identity/Probe".into());
        assert_eq!(report.origin(), None);
        // UNAVAILABLE answered by the plugin itself is its own, NOT_FOUND made by the
        // gateway its own: the code says nothing of who.
        report.fail(Origin::Upstream, &Status::unavailable("plugin busy"));
        assert_eq!(report.origin(), Some(Origin::Upstream));
        report.fail(Origin::Gateway, &Status::not_found("no such record"));
        assert_eq!(report.origin(), Some(Origin::Gateway));
    }
}
