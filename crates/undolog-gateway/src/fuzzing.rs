//! Entry points for the fuzz targets in `undolog-fuzz`: the gateway's readers of outside bytes,
//! reached exactly as the gateway calls them. Thin wrappers, hidden from the docs; not an API.

use serde::de::DeserializeOwned;

pub use rmcp::model::ClientJsonRpcMessage;

use crate::{Error, GatewayConfig, config};

/// A REST or SDK request body as `JsonBody` reads it: UTF-8, blank as `{}`, UndoLog's number
/// rules, then the shape `T`.
pub fn parse_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    crate::http::parse_body(bytes)
}

/// What `/mcp`'s parse guard checks before a POST body reaches the MCP transport: that it is JSON.
pub fn check_mcp_body(bytes: &[u8]) -> Result<(), serde_json::Error> {
    crate::http::check_mcp_body(bytes)
}

/// A POST body as rmcp's Streamable HTTP transport reads it after the guard.
pub fn mcp_message(bytes: &[u8]) -> Result<ClientJsonRpcMessage, serde_json::Error> {
    serde_json::from_slice(bytes)
}

/// A configuration file's text alone (no environment, no flags), loaded and validated.
pub fn config_from_toml(text: &str) -> Result<GatewayConfig, config::Error> {
    GatewayConfig::from_toml(text)
}
