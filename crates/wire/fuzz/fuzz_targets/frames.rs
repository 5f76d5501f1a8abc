//! Frame parsing: headers, padding, SETTINGS, WINDOW_UPDATE and RST_STREAM payloads, and the
//! per-kind checks, on arbitrary bytes; the windows they move stay within 2^31-1.
#![no_main]

use csi_gateway_wire::flow::Window;
use csi_gateway_wire::frame;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    let mut window = Window::DEFAULT;
    while let Some(head) = frame::next(rest) {
        let payload = &rest[frame::HEAD_LEN..frame::HEAD_LEN + head.len];
        let _ = frame::check(&head, payload);
        if let Ok(range) = frame::content(&head, payload) {
            assert!(range.end <= payload.len());
        }
        let _ = frame::check_settings(payload);
        let _ = frame::settings(payload).count();
        if let Ok(n) = frame::increment(payload) {
            let _ = window.increase(n);
        }
        if head.kind == frame::Kind::Data {
            let _ = window.consume(head.len);
        }
        assert!(window.get() <= frame::MAX_WINDOW && window.get() >= 0);
        let _ = frame::rst_reason(payload);
        rest = &rest[frame::HEAD_LEN + head.len..];
    }
});
