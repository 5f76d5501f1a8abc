//! Header blocks: the splice's decoder must refuse what is broken (never panic), and what it
//! accepts must survive re-encoding unchanged.
#![no_main]

use csi_gateway::splice::headers::{self, Decoder};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut decoder = Decoder::default();
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
    }
});
