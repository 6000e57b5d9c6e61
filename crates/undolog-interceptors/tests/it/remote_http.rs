//! Interceptor servers over Streamable HTTP: discovery, invoke errors, config passthrough, and a
//! chain that mixes a remote interceptor with a local one.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use undolog_interceptors::builtin::{ArgumentValidator, CrossBoundaryGuard, SecretRedactor};
use undolog_interceptors::wire::{InvokeParams, ListParams};
use undolog_interceptors::{
    Chain, ChainRequest, InterceptorClient, InterceptorServer, Phase, Registry,
};

async fn spawn_interceptor_server() -> String {
    let mut registry = Registry::new();
    registry.register(Arc::new(SecretRedactor::new())).unwrap();
    registry
        .register(Arc::new(CrossBoundaryGuard::new(BTreeMap::new())))
        .unwrap();
    let server = InterceptorServer::new(registry, "http-interceptors");
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().route_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}/mcp")
}

#[tokio::test]
async fn remote_interceptors_over_streamable_http() {
    let url = spawn_interceptor_server().await;
    let client = InterceptorClient::connect_http(&url)
        .await
        .expect("connects over Streamable HTTP");
    assert!(client.advertises_interceptors());

    let listed = client
        .list(&ListParams {
            event: Some("resources/read".into()),
            phase: None,
        })
        .await
        .unwrap();
    let names: Vec<&str> = listed
        .interceptors
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(names, [CrossBoundaryGuard::NAME]);
    assert!(
        listed.interceptors[0].config_schema.is_some(),
        "configSchema is advertised"
    );

    let bad_config = InvokeParams {
        name: CrossBoundaryGuard::NAME.into(),
        event: "tools/call".into(),
        phase: Phase::Request,
        payload: json!({"name": "x"}),
        config: Some(json!({"toolServers": 5})),
        context: None,
        timeout_ms: None,
    };
    let err = client.invoke(&bad_config).await.unwrap_err();
    assert_eq!(err.code(), -32602, "{err}");

    let schema = json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]});
    let local =
        ArgumentValidator::new(BTreeMap::from([("write_query".to_string(), schema)])).unwrap();
    let mut chain = Chain::new().with(Arc::new(local)).unwrap();
    for remote in client.interceptors().await.unwrap() {
        chain = chain.with(remote).unwrap();
    }
    let secret = "sk_live_4eC7aRm9Kx2bNw5pQj8sYd";
    let payload =
        json!({"name": "write_query", "arguments": {"query": format!("INSERT '{secret}'")}});
    let r = chain
        .execute(ChainRequest::new("tools/call", Phase::Request, payload))
        .await;
    assert!(r.is_allowed(), "{r:?}");
    let out = r.final_payload.unwrap().to_string();
    assert!(
        !out.contains(secret) && out.contains("[redacted:stripe_secret_live]"),
        "{out}"
    );
    let r = chain
        .execute(ChainRequest::new(
            "tools/call",
            Phase::Request,
            json!({"name": "write_query", "arguments": {}}),
        ))
        .await;
    assert_eq!(
        r.to_error().unwrap().code.0,
        -32602,
        "the local argument validator blocks"
    );
}
