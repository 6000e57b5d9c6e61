//! POST bodies of `/mcp`, as the parse guard and then rmcp's transport read them.

use undolog_gateway::fuzzing;

use crate::Verdict;

/// A `/mcp` POST body read as a `ClientJsonRpcMessage`. Asserts: the transport never takes a body
/// the guard refuses; a message serializes, reads back, and serializes to the same bytes again.
pub fn mcp_message(data: &[u8]) -> Verdict {
    let guard = fuzzing::check_mcp_body(data).is_ok();
    let Ok(message) = fuzzing::mcp_message(data) else {
        return Verdict::Refused;
    };
    assert!(guard, "the transport took a body the /mcp guard refuses");
    let bytes = serde_json::to_vec(&message).expect("a message serializes");
    let again = fuzzing::mcp_message(&bytes).expect("a serialized message reads back");
    let bytes_again = serde_json::to_vec(&again).expect("a message serializes");
    assert_eq!(
        String::from_utf8_lossy(&bytes_again),
        String::from_utf8_lossy(&bytes),
        "a message's serialization is not stable"
    );
    Verdict::Accepted
}
