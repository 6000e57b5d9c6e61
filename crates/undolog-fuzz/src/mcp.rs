//! POST bodies of `/mcp`, as the parse guard and then rmcp's transport read them.

use undolog_gateway::fuzzing;

use crate::Verdict;

/// A `/mcp` POST body read as a `ClientJsonRpcMessage`. Asserts: the transport never takes a body
/// the guard refuses; a message serializes and reads back; and after one such round its
/// serialization is stable.
///
/// The first round may change a message: rmcp reads a request it cannot type (a duplicate key, a
/// field of the wrong type) as a `CustomRequest` that keeps every field, and once serialized the
/// duplicate is gone, so it reads back as the typed request, which drops unknown fields. The
/// gateway answers every custom request but `interceptors/list` with method-not-found, so such a
/// `tools/call` is refused, never forwarded.
pub fn mcp_message(data: &[u8]) -> Verdict {
    let guard = fuzzing::check_mcp_body(data).is_ok();
    let Ok(message) = fuzzing::mcp_message(data) else {
        return Verdict::Refused;
    };
    assert!(guard, "the transport took a body the /mcp guard refuses");
    let once = serde_json::to_vec(&message).expect("a message serializes");
    let twice = round(&once);
    let thrice = round(&twice);
    assert_eq!(
        String::from_utf8_lossy(&thrice),
        String::from_utf8_lossy(&twice),
        "a message's serialization is not stable"
    );
    Verdict::Accepted
}

/// Serialized message text read and serialized again.
fn round(bytes: &[u8]) -> Vec<u8> {
    let message = fuzzing::mcp_message(bytes).expect("a serialized message reads back");
    serde_json::to_vec(&message).expect("a message serializes")
}
