//! Header blocks: the splice's decoder must refuse what is broken (never panic), and what it
//! accepts must survive re-encoding unchanged — and, through a splice that renames a path to
//! a longer one, reach the upstream as the client's fields with that path renamed.
#![no_main]

use csi_gateway_wire::headers::{self, Decoder};
use libfuzzer_sys::fuzz_target;

/// The path the splice renames, and what to: 20 octets longer, so the tables part often.
const FROM: &str = "/a";
const TO: &str = "/csi.v1.Node/NodeGetInfo";

fuzz_target!(|data: &[u8]| {
    let mut decoder = Decoder::default();
    let mut client = Decoder::default();
    client.follow_renames(vec![(FROM, TO.len())]);
    let mut upstream = Decoder::default();
    // Several blocks in one context: the first byte splits the input.
    let split = data.first().map_or(0, |b| *b as usize).min(data.len());
    for block in [&data[..split], &data[split..]] {
        let Ok(request) = headers::request(&mut decoder, block, true) else {
            return;
        };
        let fields: Vec<_> = request.fields.iter().map(|(n, v, _)| (n.clone(), v.clone())).collect();
        let encoded = headers::encode(request.fields, None);
        let again = headers::request(&mut Decoder::default(), &encoded, true).expect("our own block decodes");
        let decoded: Vec<_> = again.fields.into_iter().map(|(n, v, _)| (n, v)).collect();
        assert_eq!(decoded, fields);
        // The splice rewrites in place only blocks with one `:path` (`Splice::rewrite_path`).
        let request = headers::request(&mut client, block, false).expect("decodes as above");
        if request.paths > 1 {
            return;
        }
        let renamed = request.path.as_deref() == Some(FROM);
        let rewrite = request.path_span.filter(|_| renamed).map(|span| (span, TO));
        let mut sent = Vec::new();
        headers::rebuild(block, &request.patches, rewrite, &mut sent);
        let got = headers::request(&mut upstream, &sent, true).expect("the upstream reads it");
        let got: Vec<_> = got.fields.into_iter().map(|(n, v, _)| (n, v)).collect();
        let expected: Vec<_> = fields
            .iter()
            .map(|(n, v)| match n.as_slice() == b":path" && renamed {
                true => (n.clone(), TO.as_bytes().to_vec()),
                false => (n.clone(), v.clone()),
            })
            .collect();
        assert_eq!(got, expected);
    }
});
