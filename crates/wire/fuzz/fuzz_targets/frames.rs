//! Frame parsing: headers, padding, SETTINGS, WINDOW_UPDATE and RST_STREAM payloads, and the
//! per-kind checks, on arbitrary bytes.
#![no_main]

use csi_gateway_wire::frame;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Some(head) = frame::next(rest) {
        let payload = &rest[frame::HEAD_LEN..frame::HEAD_LEN + head.len];
        let _ = frame::check(&head, payload);
        if let Ok(range) = frame::content(&head, payload) {
            assert!(range.end <= payload.len());
        }
        let _ = frame::check_settings(payload);
        let _ = frame::settings(payload).count();
        let _ = frame::increment(payload);
        let _ = frame::rst_reason(payload);
        rest = &rest[frame::HEAD_LEN + head.len..];
    }
});
