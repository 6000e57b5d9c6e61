//! The admin commands' connection to a running gateway: its URL, the API key, and one request
//! helper that turns the gateway's `{"error": ...}` answers into messages.

use anyhow::{Context, anyhow};
use serde_json::Value;

/// Where the gateway is and how to prove who we are.
#[derive(Debug, clap::Args)]
pub(crate) struct Remote {
    /// The gateway's base URL.
    #[arg(long, env = "UNDOLOG_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
    /// An API key (`undolog keys create --org NAME`); not needed in open mode.
    #[arg(long, env = "UNDOLOG_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Print the gateway's JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

impl Remote {
    /// Where the gateway is, for messages.
    pub(crate) fn base(&self) -> &str {
        self.url.trim_end_matches('/')
    }

    /// `GET path` as a stream (Server-Sent Events): the response once the gateway accepted it.
    pub(crate) async fn open_stream(&self, path: &str) -> anyhow::Result<reqwest::Response> {
        let base = self.base();
        let mut request = reqwest::Client::new()
            .get(format!("{base}{path}"))
            .header("accept", "text/event-stream");
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.with_context(|| {
            format!(
                "cannot reach the gateway at {base}; start it with `undolog serve` or pass --url"
            )
        })?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        Err(self.refusal(&reqwest::Method::GET, path, status, text))
    }

    pub(crate) async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.send(reqwest::Method::GET, path, None).await
    }

    pub(crate) async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        let base = self.url.trim_end_matches('/');
        let mut request = reqwest::Client::new().request(method.clone(), format!("{base}{path}"));
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.with_context(|| {
            format!(
                "cannot reach the gateway at {base}; start it with `undolog serve` or pass --url"
            )
        })?;
        let status = response.status();
        let text = response
            .text()
            .await
            .context("reading the gateway's answer")?;
        if status.is_success() {
            return Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)));
        }
        Err(self.refusal(&method, path, status, text))
    }

    /// The gateway's refusal as a message: its `error`, and what to do about a missing key.
    fn refusal(
        &self,
        method: &reqwest::Method,
        path: &str,
        status: reqwest::StatusCode,
        text: String,
    ) -> anyhow::Error {
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        let message = value["error"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| value.to_string());
        let hint = if status == reqwest::StatusCode::UNAUTHORIZED && self.api_key.is_none() {
            " (pass --api-key or set UNDOLOG_API_KEY)"
        } else {
            ""
        };
        anyhow!("{method} {path}: {status}: {message}{hint}")
    }
}

/// A path segment, percent-encoded (session ids are free text).
pub(crate) fn segment(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
