//! Starting real parts for a test: the gateway on port 0 with a fresh SQLite file, the Python bank
//! upstream (official `mcp` SDK), and scriptable Python MCP clients (2.x and 1.x).

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, OnceLock},
    time::Duration,
};

use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines},
    process::{Child, ChildStdin, ChildStdout, Command},
};
use undolog_gateway::{ConfigSource, Gateway, GatewayConfig};

use crate::issuer::TestIssuer;
use undolog_types::{OrgId, Role};

mod client;
pub(crate) use client::Client;

pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub(crate) fn fixture(name: &str) -> PathBuf {
    repo()
        .join("crates/undolog-gateway/tests/fixtures")
        .join(name)
}

/// The venvs and npm packages of tests/fixtures/setup.sh, installed once per test run.
pub(crate) fn fixtures() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = repo().join("target/fixtures");
        let status = std::process::Command::new("bash")
            .arg(fixture("setup.sh"))
            .arg(&dir)
            .stdout(Stdio::null())
            .status()
            .expect("bash runs");
        assert!(
            status.success(),
            "tests/fixtures/setup.sh failed; run it by hand to see why"
        );
        dir
    })
}

pub(crate) fn python(venv: &str) -> PathBuf {
    fixtures().join(venv).join("bin/python")
}

/// A child process killed when the test ends.
pub(crate) fn spawn(cmd: &mut Command) -> Child {
    cmd.kill_on_drop(true)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the fixture starts")
}

pub(crate) async fn first_line(out: &mut Lines<BufReader<ChildStdout>>) -> Value {
    let line = tokio::time::timeout(Duration::from_secs(60), out.next_line())
        .await
        .expect("the fixture prints its ready line within a minute")
        .expect("stdout readable")
        .expect("the fixture printed a line before exiting");
    serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"))
}

/// The Python bank upstream over Streamable HTTP.
pub(crate) struct Bank {
    pub(crate) url: String,
    _child: Child,
    _dir: tempfile::TempDir,
}

impl Bank {
    pub(crate) async fn start() -> Bank {
        Bank::start_with(&[]).await
    }

    /// The same with more of `bank_server.py`'s flags (`--log-requests FILE`...).
    pub(crate) async fn start_with(flags: &[&std::ffi::OsStr]) -> Bank {
        let dir = tempfile::tempdir().unwrap();
        let mut child = spawn(
            Command::new(python("mcp2"))
                .arg(fixture("bank_server.py"))
                .args(["--http", "0", "--state"])
                .arg(dir.path().join("bank.json"))
                .args(flags),
        );
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = first_line(&mut out).await;
        let url = ready["url"].as_str().expect("a url").to_owned();
        Bank {
            url,
            _child: child,
            _dir: dir,
        }
    }

    /// What really ran upstream, asked of the bank directly.
    pub(crate) async fn ledger(&self) -> Vec<Value> {
        let mut direct = Client::connect("mcp2", "legacy", &self.url, &[]).await;
        let result = direct.call("ledger", json!({})).await;
        result["structuredContent"]["operations"]
            .as_array()
            .expect("the ledger lists operations")
            .clone()
    }
}

/// The `bank_server.py --stdio` command line, for a stdio upstream in a config.
pub(crate) fn stdio_bank_toml(name: &str, state: &Path) -> String {
    format!(
        "[[upstreams]]\nname = \"{name}\"\ncommand = {:?}\nargs = [{:?}, \"--stdio\", \"--state\", {:?}]\n",
        python("mcp2").display().to_string(),
        fixture("bank_server.py").display().to_string(),
        state.display().to_string()
    )
}

/// Two banks, `source` and `sink`, every tool under its upstream's prefix, with the
/// cross-boundary guard: a secret read from the source may not go to the sink. `tools` is more
/// of the configuration.
pub(crate) async fn guarded(source: &Bank, sink: &Bank, tools: &str) -> TestGateway {
    TestGateway::start(&format!(
        "[[upstreams]]\nname = \"source\"\nurl = \"{}\"\nprefix = \"source\"\n\
         [[upstreams]]\nname = \"sink\"\nurl = \"{}\"\nprefix = \"sink\"\n\
         [tools.source__with_meta]\ntier = \"read_only\"\n{tools}\n\
         [[interceptors]]\nbuiltin = \"guard\"\n",
        source.url, sink.url
    ))
    .await
}

/// The bank's classification, as a user would write it.
pub(crate) const BANK_TOOLS: &str = r#"
[tools.get_balance]
tier = "read_only"
[tools.ledger]
tier = "read_only"
[tools.transfer]
tier = "compensable"
compensation = { tool = "transfer", args = { from_account = "{{args.to_account}}", to_account = "{{args.from_account}}", amount = "{{args.amount}}" } }
[tools.send_email]
tier = "irreversible"
"#;

/// The gateway, in this process, on 127.0.0.1 port 0 with a fresh store (split: see [`split`]).
pub(crate) struct TestGateway {
    pub(crate) base: String,
    /// The gateway with the engine and store (split: the engine's process, not the one at
    /// `base`).
    pub(crate) gateway: Arc<Gateway>,
    pub(crate) http: reqwest::Client,
    /// With [`TestGateway::with_tokens`]: the issuer whose tokens [`TestGateway::key`] mints.
    pub(crate) issuer: Option<TestIssuer>,
    /// Where `/metrics` is served, with `[metrics] listen`: the configured address, and in a
    /// split deployment also the engine's, on a port of its own.
    pub(crate) metrics: Vec<std::net::SocketAddr>,
    minted: std::sync::atomic::AtomicU32,
    _dir: tempfile::TempDir,
    _stops: Vec<tokio::sync::oneshot::Sender<()>>,
}

/// Whether the tests run against the split deployment: `UNDOLOG_TEST_ENGINE=grpc` puts a
/// gateway that owns no store in front of the engine served over gRPC.
pub(crate) fn split() -> bool {
    std::env::var("UNDOLOG_TEST_ENGINE").is_ok_and(|v| v == "grpc")
}

/// What a test authenticates with: an API key, or an access token of the test issuer. The
/// role tests run with both, and expect the same.
#[derive(Debug, Clone)]
pub(crate) struct Credential {
    /// The key's id, or the token's subject.
    pub(crate) id: String,
    /// What goes after `Bearer `.
    pub(crate) secret: String,
    /// How the gateway records who this is (`api-key:ID`, `oauth:SUBJECT`).
    pub(crate) actor: String,
}

/// The two kinds of [`Credential`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    ApiKey,
    Token,
}

impl Kind {
    pub(crate) const BOTH: [Kind; 2] = [Kind::ApiKey, Kind::Token];
}

impl TestGateway {
    /// Starts with this TOML (upstreams, tools...); the store and listen address are the test's.
    pub(crate) async fn start(toml: &str) -> TestGateway {
        TestGateway::start_on(toml, None).await
    }

    /// The same, with `[oauth]` taking the tokens of a fresh [`TestIssuer`] (API keys still
    /// work): [`TestGateway::key`] then mints tokens.
    pub(crate) async fn with_tokens(toml: &str) -> TestGateway {
        let issuer = TestIssuer::start().await;
        let toml = format!("{toml}\n{}", issuer.config("@GATEWAY@/mcp"));
        let mut gw = TestGateway::start_on(&toml, None).await;
        gw.issuer = Some(issuer);
        gw
    }

    /// [`TestGateway::start`] with API keys or [`TestGateway::with_tokens`].
    pub(crate) async fn start_for(kind: Kind, toml: &str) -> TestGateway {
        match kind {
            Kind::ApiKey => TestGateway::start(toml).await,
            Kind::Token => TestGateway::with_tokens(toml).await,
        }
    }

    /// The same on a given store URL (a fresh SQLite file when `None`). `@GATEWAY@` in the TOML
    /// stands for the gateway's base URL.
    pub(crate) async fn start_on(toml: &str, store: Option<String>) -> TestGateway {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        TestGateway::start_on_listener(listener, toml, store).await
    }

    /// The same on a listener the test bound (to know the gateway's URL before it starts).
    pub(crate) async fn start_on_listener(
        listener: tokio::net::TcpListener,
        toml: &str,
        store: Option<String>,
    ) -> TestGateway {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("undolog.toml");
        let base = format!("http://{}", listener.local_addr().unwrap());
        std::fs::write(&file, toml.replace("@GATEWAY@", &base)).unwrap();
        let source = ConfigSource {
            file: Some(file),
            listen: Some("127.0.0.1:0".into()),
            store: Some(store.unwrap_or_else(|| {
                format!("sqlite://{}", dir.path().join("undolog.db").display())
            })),
            engine: None,
        };
        let mut config = GatewayConfig::load(&source).unwrap_or_else(|e| panic!("{e}"));
        let mut metrics: Vec<_> = config.metrics_listen.into_iter().collect();
        if split() && config.metrics_listen.is_some() {
            // The engine's series, scraped apart from its gateway's.
            let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            config.metrics_listen = Some(free.local_addr().unwrap());
            metrics.extend(config.metrics_listen);
        }
        let gateway = Gateway::build(config).await.unwrap();
        let mut stops = Vec::new();
        // Split (`UNDOLOG_TEST_ENGINE=grpc`): this gateway serves the engine alone over gRPC,
        // and the tests talk to a second one, in front of it, that owns no store.
        let front = match split() {
            false => gateway.clone(),
            true => {
                let engine_at = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let url = format!("grpc://{}", engine_at.local_addr().unwrap());
                let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                stops.push(stop);
                let engine = gateway.clone();
                tokio::spawn(async move {
                    let stopped = async move {
                        let _ = stopped.await;
                    };
                    undolog_gateway::serve_engine(engine, engine_at, stopped)
                        .await
                        .unwrap();
                });
                let config = GatewayConfig::load(&ConfigSource {
                    engine: Some(url),
                    ..source
                })
                .unwrap_or_else(|e| panic!("{e}"));
                Gateway::build(config).await.unwrap()
            }
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        stops.push(stop);
        tokio::spawn(async move {
            undolog_gateway::serve_http(front, listener, async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        TestGateway {
            base,
            gateway,
            http: reqwest::Client::new(),
            issuer: None,
            metrics,
            minted: Default::default(),
            _dir: dir,
            _stops: stops,
        }
    }

    pub(crate) fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// A new credential of `org` with `role`: an API key in this gateway's store, or, with
    /// [`TestGateway::with_tokens`], a token for a new subject with the role's scope.
    pub(crate) async fn key(&self, org: &str, role: Role) -> Credential {
        if let Some(issuer) = &self.issuer {
            let n = self
                .minted
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let subject = format!("person-{n}");
            let scope = match role {
                Role::Agent => "undolog:agent",
                Role::Approver => "undolog:approve",
                Role::Admin => "undolog:admin",
            };
            let claims = issuer.claims(&self.mcp_url(), &subject, org, scope);
            return Credential {
                secret: issuer.es256.sign(&claims),
                actor: format!("oauth:{subject}"),
                id: subject,
            };
        }
        let key = undolog_gateway::create_key(
            &**self
                .gateway
                .store()
                .expect("the engine's gateway has the store"),
            OrgId::new(org).unwrap(),
            role,
            None,
        )
        .await
        .unwrap();
        Credential {
            actor: format!("api-key:{}", key.id),
            id: key.id,
            secret: key.secret,
        }
    }

    /// `GET path` with `key` (none: open mode); the status and the JSON answer.
    pub(crate) async fn get_as(&self, key: Option<&Credential>, path: &str) -> (u16, Value) {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(key) = key {
            request = request.bearer_auth(&key.secret);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// `POST path` with a JSON body and `key`; the status and the JSON answer.
    pub(crate) async fn post_as(
        &self,
        key: Option<&Credential>,
        path: &str,
        body: Value,
    ) -> (u16, Value) {
        let mut request = self.http.post(format!("{}{path}", self.base)).json(&body);
        if let Some(key) = key {
            request = request.bearer_auth(&key.secret);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// A REST tool call in `session` with `key`; the status and the JSON answer.
    pub(crate) async fn rest_call(
        &self,
        key: Option<&Credential>,
        session: &str,
        tool: &str,
        arguments: Value,
    ) -> (u16, Value) {
        let mut request = self
            .http
            .post(format!("{}/mcp/tool_call", self.base))
            .header("x-undolog-session-id", session)
            .json(&json!({"name": tool, "arguments": arguments}));
        if let Some(key) = key {
            request = request.bearer_auth(&key.secret);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// One stateless `tools/call` with `params` (name, arguments, `_meta`), without a key or
    /// capabilities; its JSON-RPC response, which must come within 20 s with HTTP 200.
    pub(crate) async fn tools_call(&self, params: Value) -> Value {
        let limit = Duration::from_secs(20);
        let (status, answer) = self.rpc(None, "tools/call", params, json!({}), limit).await;
        assert_eq!(status, 200, "{answer}");
        answer
    }

    /// One stateless 2026-07-28 JSON-RPC request to `/mcp` with `key`, declaring
    /// `capabilities` in its `_meta` and the routing headers its method asks for; the HTTP status
    /// and the JSON-RPC response. No request may stay open longer than `limit`.
    pub(crate) async fn rpc(
        &self,
        key: Option<&Credential>,
        method: &str,
        mut params: Value,
        capabilities: Value,
        limit: Duration,
    ) -> (u16, Value) {
        const MODERN: &str = "2026-07-28";
        let meta = params["_meta"].as_object().cloned().unwrap_or_default();
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": capabilities
        });
        for (k, v) in meta {
            params["_meta"][k] = v;
        }
        let name = params["name"]
            .as_str()
            .or(params["taskId"].as_str())
            .map(str::to_owned);
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut request = self
            .http
            .post(self.mcp_url())
            .timeout(limit)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", method);
        if let Some(name) = name {
            request = request.header("mcp-name", name);
        }
        if let Some(key) = key {
            request = request.bearer_auth(&key.secret);
        }
        let response = request
            .body(body.to_string())
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method}: no answer within {limit:?}: {e}"));
        let status = response.status().as_u16();
        let text = response
            .text()
            .await
            .unwrap_or_else(|e| panic!("{method}: the answer did not end within {limit:?}: {e}"));
        (
            status,
            serde_json::from_str(last_message(&text))
                .unwrap_or_else(|_| panic!("not JSON-RPC: {text}")),
        )
    }

    pub(crate) async fn get(&self, path: &str) -> Value {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "GET {path}: {}",
            response.status()
        );
        response.json().await.unwrap()
    }

    pub(crate) async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Waits for the first pending approval (a held call asked for one).
    pub(crate) async fn pending_approval(&self) -> Value {
        for _ in 0..200 {
            let pending = self.get("/v1/approvals?status=pending").await;
            if let Some(first) = pending.as_array().and_then(|a| a.first()) {
                return first.clone();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no approval was requested within 10 s");
    }
}

/// The effect id and replay mark a gateway put on a tool result.
/// The message of a JSON body, or an event stream's last one (the response).
pub(crate) fn last_message(text: &str) -> &str {
    text.lines()
        .filter_map(|l| l.strip_prefix("data:").map(str::trim))
        .rfind(|l| !l.is_empty())
        .unwrap_or(text)
}

pub(crate) fn undolog_meta(result: &Value) -> (Option<String>, bool) {
    let meta = &result["_meta"];
    (
        meta["io.undolog/effect_id"].as_str().map(str::to_owned),
        meta["io.undolog/replayed"] == json!(true),
    )
}

pub(crate) fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Serves `server` (rmcp's own server, in this process) over Streamable HTTP; its URL,
/// `http://127.0.0.1:PORT/mcp`.
pub(crate) async fn serve_mcp<S>(server: S) -> String
where
    S: rmcp::ServerHandler + Clone + Send + Sync + 'static,
{
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().route_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    url
}
