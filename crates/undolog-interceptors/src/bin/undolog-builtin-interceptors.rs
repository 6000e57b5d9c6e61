//! Serves the built-in interceptors (secret redactor, cross-boundary guard) as an MCP interceptor
//! server on stdio, for hosts that run interceptors out of process.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::ServiceExt;
use undolog_interceptors::builtin::{CrossBoundaryGuard, SecretRedactor};
use undolog_interceptors::{InterceptorServer, Registry};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut registry = Registry::new();
    registry.register(Arc::new(SecretRedactor::new()))?;
    registry.register(Arc::new(CrossBoundaryGuard::new(BTreeMap::new())))?;
    let server = InterceptorServer::new(registry, "undolog-builtin-interceptors");
    server
        .serve(rmcp::transport::stdio())
        .await?
        .waiting()
        .await?;
    Ok(())
}
