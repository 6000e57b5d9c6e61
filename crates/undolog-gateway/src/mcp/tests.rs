use serde_json::json;

use super::*;

#[test]
fn a_calls_own_meta_goes_upstream_without_the_protocols_keys_or_undologs() {
    let cases = [
        (json!({}), None),
        (
            json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.undolog/wait_ms": 5}),
            None,
        ),
        (
            json!({"traceparent": "00-a-b-01", "io.modelcontextprotocol/clientInfo": {}, "vendor/x": [1]}),
            Some(json!({"traceparent": "00-a-b-01", "vendor/x": [1]})),
        ),
        (
            json!({"progressToken": 3, "io.undolog.other": true}),
            Some(json!({"progressToken": 3, "io.undolog.other": true})),
        ),
    ];
    for (meta, forwarded) in cases {
        let meta: RequestMetaObject = serde_json::from_value(meta.clone()).expect("a meta");
        let got = forwarded_meta(&meta).map(|m| serde_json::to_value(m).expect("serializes"));
        assert_eq!(got, forwarded, "{meta:?}");
    }
}
