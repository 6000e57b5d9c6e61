//! The demo upstream: a tiny bank, an MCP tool server shipped in the binary and served in-process,
//! so `undolog serve` with no configuration has real tools to put the engine in front of.
//!
//! Tools: `get_balance` (read only), `transfer` (compensable: the reverse transfer undoes it) and
//! `send_email` (irreversible: it only records that a mail went out).
//!
//! It holds the bank and nothing else: the upstream layer serves it through its
//! [`InProcess`] hook, as if it were any other MCP server.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
        ToolAnnotations,
    },
    service::RequestContext,
};
use serde_json::{Value, json};
use undolog_config::{UpstreamConfig, UpstreamTransport};
use undolog_upstream::InProcess;

/// The bank: balances in whole units, and the mails it sent.
#[derive(Debug, Clone)]
pub struct DemoBank {
    state: Arc<Mutex<BankState>>,
}

#[derive(Debug)]
struct BankState {
    balances: BTreeMap<String, i64>,
    sent: usize,
}

impl Default for DemoBank {
    fn default() -> DemoBank {
        DemoBank {
            state: Arc::new(Mutex::new(BankState {
                balances: BTreeMap::from([("alice".into(), 100), ("bob".into(), 0)]),
                sent: 0,
            })),
        }
    }
}

impl DemoBank {
    /// The in-process server of an upstream whose transport is the demo (a bank of its own for
    /// each such upstream); `None` for any other.
    pub fn for_upstream(config: &UpstreamConfig) -> Option<Arc<dyn InProcess>> {
        matches!(config.transport, UpstreamTransport::Demo)
            .then(|| Arc::new(DemoBank::default()) as Arc<dyn InProcess>)
    }

    fn tools() -> Vec<Tool> {
        let schema = |value: Value| -> Arc<JsonObject> {
            match value {
                Value::Object(map) => Arc::new(map),
                _ => unreachable!("schemas are objects"),
            }
        };
        let account = json!({"type": "string", "description": "an account name, such as alice"});
        vec![
            Tool::new(
                "get_balance",
                "Read an account's balance.",
                schema(json!({
                    "type": "object",
                    "properties": {"account": account},
                    "required": ["account"]
                })),
            )
            .with_annotations(ToolAnnotations::new().read_only(true)),
            Tool::new(
                "transfer",
                "Move money between two accounts. Undone by the reverse transfer.",
                schema(json!({
                    "type": "object",
                    "properties": {
                        "from_account": account,
                        "to_account": account,
                        "amount": {"type": "integer", "minimum": 1}
                    },
                    "required": ["from_account", "to_account", "amount"]
                })),
            ),
            Tool::new(
                "send_email",
                "Send an email. Cannot be unsent.",
                schema(json!({
                    "type": "object",
                    "properties": {
                        "to": {"type": "string"},
                        "subject": {"type": "string"}
                    },
                    "required": ["to", "subject"]
                })),
            )
            .with_annotations(ToolAnnotations::new().destructive(true)),
        ]
    }

    fn run(&self, tool: &str, args: &JsonObject) -> Result<Value, String> {
        let text = |key: &str| {
            args.get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("`{key}` must be a string"))
        };
        let mut state = self.state.lock().expect("bank lock");
        match tool {
            "get_balance" => {
                let account = text("account")?;
                let balance = state.balances.get(&account).copied().unwrap_or(0);
                Ok(json!({"account": account, "balance": balance}))
            }
            "transfer" => {
                let (from, to) = (text("from_account")?, text("to_account")?);
                let amount = args
                    .get("amount")
                    .and_then(Value::as_i64)
                    .filter(|a| *a > 0)
                    .ok_or("`amount` must be a positive integer")?;
                *state.balances.entry(from.clone()).or_default() -= amount;
                *state.balances.entry(to.clone()).or_default() += amount;
                Ok(json!({"moved": amount, "from_account": from, "to_account": to}))
            }
            "send_email" => {
                let to = text("to")?;
                text("subject")?;
                state.sent += 1;
                Ok(json!({"sent": true, "to": to}))
            }
            other => Err(format!("the demo bank has no tool {other:?}")),
        }
    }
}

impl ServerHandler for DemoBank {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info = Implementation::new("undolog-demo-bank", env!("CARGO_PKG_VERSION"));
        info.instructions = Some("A demo bank: get_balance, transfer, send_email.".into());
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(DemoBank::tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        Ok(match self.run(&request.name, &args) {
            Ok(value) => CallToolResult::structured(value),
            Err(message) => CallToolResult::error(vec![rmcp::model::ContentBlock::text(message)]),
        }
        .into())
    }
}

impl DemoBank {
    /// Serves the bank alone, as an ordinary Streamable HTTP MCP server at `/mcp` (a standalone
    /// upstream for benchmarks and experiments).
    pub async fn serve_http(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        use axum::serve::ListenerExt;
        use rmcp::transport::streamable_http_server::{
            StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
        };
        let service = StreamableHttpService::new(
            move || Ok(self.clone()),
            LocalSessionManager::default().into(),
            StreamableHttpServerConfig::default(),
        );
        let router = axum::Router::new().route_service("/mcp", service);
        let listener = listener.tap_io(|tcp| drop(tcp.set_nodelay(true)));
        axum::serve(listener, router).await
    }

    /// Serves the bank alone on stdin/stdout.
    pub async fn serve_stdio(self) -> std::io::Result<()> {
        use rmcp::ServiceExt;
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(std::io::Error::other)?;
        running.waiting().await.map_err(std::io::Error::other)?;
        Ok(())
    }
}

impl InProcess for DemoBank {
    fn serve(&self, io: tokio::io::DuplexStream) {
        let bank = self.clone();
        tokio::spawn(async move {
            match rmcp::ServiceExt::serve(bank, io).await {
                Ok(server) => drop(server.waiting().await),
                Err(e) => tracing::error!(error = %e, "demo bank did not start"),
            }
        });
    }
}
