//! The route table against the translation: what a route says the splice relays as it came is
//! what the translation would send (the translate crate's `identical` tests, for the routes).

use super::Router;
use crate::dialect::Dialect;
use crate::translate::identical::empty_request;
use crate::translate::FrontCall;

/// The calls whose request the splice relays as it came (`Asked::Relayed`): for each, the full
/// translation of the empty request is the one call the splice names, with an empty message,
/// for the request `empty_request` stands for; and which calls they are.
#[test]
fn requests_with_no_field_are_relayed_as_the_translation_would_send_them() {
    let router = Router::new(&[Dialect::V1, Dialect::V0_3])
        .unwrap()
        .serving_v0_2(false);
    let mut relayed = Vec::new();
    for front in [Dialect::V1, Dialect::V0_3] {
        for info in front.methods() {
            let route = router.route(info.path).unwrap();
            for upstream in [Dialect::V1, Dialect::V0_3] {
                let Some(inline) = route.inline_call(upstream, false) else {
                    continue;
                };
                let Some(method) = inline.empty_request else {
                    continue;
                };
                let what = format!("{} {front} -> {upstream}", info.path);
                let Ok(FrontCall::Hub(request)) =
                    crate::translate::front::decode_front_method(front, info, &[])
                else {
                    panic!("{what}: the empty request is not one hub request");
                };
                assert_eq!(*request, *empty_request(method), "{what}");
                let session = crate::translate::UpstreamSession::new(upstream, None);
                assert_eq!(
                    crate::translate::upstream::single_call(front, &session, &request),
                    Some((inline.path, Vec::new())),
                    "{what}"
                );
                // Wire-identical calls are relayed before this is asked.
                if route.identical_path(upstream).is_none() {
                    relayed.push(format!("{front} -> {upstream} {}", info.method));
                }
            }
        }
    }
    relayed.sort();
    assert_eq!(
        relayed,
        [
            "v0.3 -> v1 ControllerGetCapabilities",
            "v0.3 -> v1 GetPluginCapabilities",
            "v0.3 -> v1 NodeGetCapabilities",
            // v1 renamed it NodeGetInfo (`build/identical.rs`, `RENAMED`).
            "v0.3 -> v1 NodeGetId",
            "v1 -> v0.3 ControllerGetCapabilities",
            "v1 -> v0.3 GetPluginCapabilities",
            "v1 -> v0.3 NodeGetCapabilities",
        ]
    );
    // A v0.2 client's requests are read: the gateway may refuse them.
    let v0_2 = Router::new(&[Dialect::V1, Dialect::V0_3])
        .unwrap()
        .serving_v0_2(true);
    let caps = v0_2.route("/csi.v0.Node/NodeGetCapabilities").unwrap();
    assert_eq!(
        caps.inline_call(Dialect::V1, false).unwrap().empty_request,
        None
    );
}

/// The calls whose request the splice checks and relays carry their check on their routes;
/// a v0.2 client's requests are read, never relayed.
#[test]
fn routes_carry_the_request_checks_but_not_for_v0_2_clients() {
    // The routes carry it; a v0.2 client's requests are read, never relayed.
    let router = Router::new(&[Dialect::V1, Dialect::V0_3]).unwrap();
    let delete = "/csi.v0.Controller/DeleteVolume";
    let route = router.serving_v0_2(false).route(delete).unwrap();
    assert!(route
        .inline_call(Dialect::V1, false)
        .unwrap()
        .check
        .is_some());
    let v0_2 = Router::new(&[Dialect::V1, Dialect::V0_3])
        .unwrap()
        .serving_v0_2(true);
    assert!(v0_2
        .route(delete)
        .unwrap()
        .inline_call(Dialect::V1, false)
        .unwrap()
        .check
        .is_none());
}
