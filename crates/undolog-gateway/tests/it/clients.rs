//! Real MCP clients list and call tools through the gateway to real upstreams.

use serde_json::json;

use crate::harness::{BANK_TOOLS, Bank, Client, TestGateway, fixtures, undolog_meta};

async fn gateway_for(bank: &Bank, memory_file: &std::path::Path) -> TestGateway {
    let node_server =
        fixtures().join("npm/node_modules/@modelcontextprotocol/server-memory/dist/index.js");
    TestGateway::start(&format!(
        r#"
[[upstreams]]
name = "bank"
url = "{}"

[[upstreams]]
name = "memory"
command = "node"
args = [{:?}]
env = {{ MEMORY_FILE_PATH = {:?} }}

[tools.read_graph]
tier = "read_only"
[tools.create_entities]
tier = "compensable"
compensation = {{ tool = "delete_entities", args = {{ entityNames = ["{{{{args.entities.0.name}}}}"] }} }}
{BANK_TOOLS}"#,
        bank.url,
        node_server.display().to_string(),
        memory_file.display().to_string(),
    ))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_clients_of_both_generations_reach_an_http_and_a_stdio_upstream() {
    let bank = Bank::start().await;
    let memory = tempfile::NamedTempFile::new().unwrap();
    let gw = gateway_for(&bank, memory.path()).await;
    for (venv, mode, protocol) in [
        ("mcp2", "modern", "2026-07-28"),
        ("mcp2", "legacy", "2025-11-25"),
        ("mcp1", "legacy", "2025-11-25"),
    ] {
        let who = format!("{venv}-{mode}");
        let mut client = Client::connect(venv, mode, &gw.mcp_url(), &[]).await;
        assert_eq!(client.protocol, protocol, "{who}");
        let tools = client.list_tools().await;
        for expected in ["transfer", "get_balance", "create_entities", "read_graph"] {
            assert!(
                tools.iter().any(|t| t == expected),
                "{who}: {expected} missing from {tools:?}"
            );
        }

        let balance = client
            .call("get_balance", json!({"account": "alice"}))
            .await;
        assert_eq!(
            balance["structuredContent"]["balance"], 100,
            "{who}: {balance}"
        );
        assert!(
            undolog_meta(&balance).0.is_some(),
            "{who}: no effect id on {balance}"
        );

        let entity = format!("entity-{who}");
        let created = client
            .call(
                "create_entities",
                json!({"entities": [{"name": entity, "entityType": "test", "observations": ["seen"]}]}),
            )
            .await;
        assert_ne!(created["isError"], true, "{who}: {created}");
        let graph = client.call("read_graph", json!({})).await;
        assert!(graph.to_string().contains(&entity), "{who}: {graph}");
    }
    // server-memory kept what the clients created through the gateway.
    let stored = std::fs::read_to_string(memory.path()).unwrap();
    assert!(stored.contains("entity-mcp1-legacy"), "{stored}");
}
