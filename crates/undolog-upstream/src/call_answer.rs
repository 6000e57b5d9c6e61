//! An upstream's answer to a `tools/call`, read without trying every kind of message first.
//!
//! rmcp reads a server's message as an untagged union: a request, then a response whose result
//! is tried as each of its twenty kinds in turn (a tool's result is the sixteenth), then a
//! notification, then an error. Every miss builds an error, so on the call path that reading was
//! a twentieth of the gateway's CPU. Almost every answer to a call is the plain one: a response
//! whose result holds nothing but a tool result's own fields. That one is read straight as a
//! tool result; anything else (an error, a task, an input request, a field a tool result does
//! not have) is read by rmcp as before. Both readings agree on the plain answer (see the tests):
//! no kind before the tool result in rmcp's union takes an object made of those fields alone.

use rmcp::model::{
    CallToolResult, JsonRpcResponse, JsonRpcVersion2_0, RequestId, ServerJsonRpcMessage,
    ServerResult,
};
use serde::{Deserialize, de::IgnoredAny};
use serde_json::value::RawValue;

/// The upstream's message in `json`, as rmcp reads it.
pub(super) fn read(json: &[u8]) -> serde_json::Result<ServerJsonRpcMessage> {
    match plain(json) {
        Some(message) => Ok(message),
        None => serde_json::from_slice(json),
    }
}

/// The message when it is a response whose result is a tool's result and nothing else. A field
/// twice, anywhere, is refused here as rmcp's reading refuses it.
fn plain(json: &[u8]) -> Option<ServerJsonRpcMessage> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Response<'a> {
        jsonrpc: JsonRpcVersion2_0,
        id: RequestId,
        #[serde(borrow)]
        result: &'a RawValue,
    }
    /// The fields of a tool's result (MCP `CallToolResult`), and no other.
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[expect(dead_code, reason = "only which fields are present is read")]
    struct ToolResultFields {
        content: Option<IgnoredAny>,
        structured_content: Option<IgnoredAny>,
        is_error: Option<IgnoredAny>,
        #[serde(rename = "_meta")]
        meta: Option<IgnoredAny>,
        result_type: Option<IgnoredAny>,
    }
    let Response {
        jsonrpc,
        id,
        result,
    } = serde_json::from_slice(json).ok()?;
    serde_json::from_str::<ToolResultFields>(result.get()).ok()?;
    // Refused here (no known field, a result type other than `complete`): rmcp decides.
    let result = serde_json::from_str::<CallToolResult>(result.get()).ok()?;
    Some(ServerJsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc,
        id,
        result: ServerResult::CallToolResult(result),
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// Answers and whether they are plain. Each must read as rmcp reads it.
    const ANSWERS: &[(&str, bool)] = &[
        (
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"42"}],"isError":false}}"#,
            true,
        ),
        (
            r#"{"jsonrpc":"2.0","id":"a","result":{"content":[{"type":"text","text":"no"}],"isError":true}}"#,
            true,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"balance":3},"resultType":"complete"}}"#,
            true,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"structuredContent":null}}"#,
            true,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"isError":false,"_meta":{"x":1}}}"#,
            true,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"},{"type":"resource_link","uri":"file:///a","name":"a"}]}}"#,
            true,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"t","annotations":{"audience":["user"],"priority":0.5}}]}}"#,
            true,
        ),
        // Not plain: rmcp reads them.
        (r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, false),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"isError":false,"isError":true}}"#,
            false,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a","text":"b"}]}}"#,
            false,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"id":2,"result":{"content":[]}}"#,
            false,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"_meta":{"x":1}}}"#,
            false,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"input_required"}}"#,
            false,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t1","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":null}}}"#,
            false,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"extra":1}}"#,
            false,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":"not a list"}}"#,
            false,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}"#,
            false,
        ),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#,
            false,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]},"extra":1}"#,
            false,
        ),
        (r#"{"jsonrpc":"1.0","id":1,"result":{"content":[]}}"#, false),
    ];

    fn as_value(message: serde_json::Result<ServerJsonRpcMessage>) -> Value {
        match message {
            Ok(message) => serde_json::to_value(message).expect("a message serializes"),
            Err(_) => json!("unreadable"),
        }
    }

    #[test]
    fn an_answer_reads_as_rmcp_reads_it_and_plain_ones_are_read_directly() {
        for (answer, is_plain) in ANSWERS {
            let rmcp = as_value(serde_json::from_str(answer));
            assert_eq!(as_value(read(answer.as_bytes())), rmcp, "{answer}");
            assert_eq!(plain(answer.as_bytes()).is_some(), *is_plain, "{answer}");
            if *is_plain {
                assert!(
                    matches!(
                        serde_json::from_str(answer),
                        Ok(ServerJsonRpcMessage::Response(JsonRpcResponse {
                            result: ServerResult::CallToolResult(_),
                            ..
                        }))
                    ),
                    "rmcp reads a plain answer as a tool result too: {answer}"
                );
            }
        }
    }
}
