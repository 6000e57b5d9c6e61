//! A Python MCP client (tests/fixtures/client.py) driven line by line.

use super::*;

/// A Python MCP client (tests/fixtures/client.py) driven line by line.
pub(crate) struct Client {
    stdin: ChildStdin,
    out: Lines<BufReader<ChildStdout>>,
    answers: HashMap<u64, Value>,
    next: u64,
    pub(crate) protocol: String,
    _child: Child,
}

impl Client {
    /// `venv` is `mcp2` or `mcp1`; `mode` is `modern` or `legacy`.
    pub(crate) async fn connect(venv: &str, mode: &str, url: &str, headers: &[&str]) -> Client {
        Client::connect_with(venv, mode, url, headers, &[]).await
    }

    /// The same with more of client.py's options (`--elicit-reply`, `--sampling-reply`…).
    pub(crate) async fn connect_with(
        venv: &str,
        mode: &str,
        url: &str,
        headers: &[&str],
        options: &[&str],
    ) -> Client {
        let mut cmd = Command::new(python(venv));
        cmd.arg(fixture("client.py"))
            .args(["--url", url, "--mode", mode])
            .args(options);
        for header in headers {
            cmd.args(["--header", header]);
        }
        Client::start(cmd).await
    }

    /// What the server said to this client alone: `{"logs": [...], "asked": [...]}`.
    pub(crate) async fn heard(&mut self) -> Value {
        let id = self.send(json!({"op": "heard"})).await;
        self.answer(id).await["ok"].clone()
    }

    pub(crate) async fn start(mut cmd: Command) -> Client {
        let mut child = spawn(&mut cmd);
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = first_line(&mut out).await;
        assert_eq!(ready["ready"], true, "the client did not connect: {ready}");
        Client {
            stdin: child.stdin.take().unwrap(),
            out,
            answers: HashMap::new(),
            next: 1,
            protocol: ready["protocol"].as_str().unwrap_or_default().to_owned(),
            _child: child,
        }
    }

    /// Sends a command without waiting; returns its id.
    pub(crate) async fn send(&mut self, mut command: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        command["id"] = json!(id);
        let line = format!("{command}\n");
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
        id
    }

    /// The answer to command `id`: `{"ok": ...}` or `{"error": ...}`.
    pub(crate) async fn answer(&mut self, id: u64) -> Value {
        loop {
            if let Some(answer) = self.answers.remove(&id) {
                return answer;
            }
            let line = tokio::time::timeout(Duration::from_secs(90), self.out.next_line())
                .await
                .expect("an answer within 90 s")
                .unwrap()
                .expect("the client is still running");
            let value: Value = serde_json::from_str(&line).unwrap();
            if let Some(n) = value["id"].as_u64()
                && value.get("progress").is_none_or(|p| p.is_array())
            {
                self.answers.insert(n, value);
            }
        }
    }

    pub(crate) async fn list_tools(&mut self) -> Vec<String> {
        let id = self.send(json!({"op": "list_tools"})).await;
        let answer = self.answer(id).await;
        serde_json::from_value(answer["ok"].clone()).unwrap_or_else(|_| panic!("{answer}"))
    }

    /// Calls a tool and returns the `CallToolResult`, panicking on a protocol error.
    pub(crate) async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let answer = self.try_call(tool, arguments).await;
        answer
            .get("ok")
            .cloned()
            .unwrap_or_else(|| panic!("{tool} failed at the protocol level: {answer}"))
    }

    pub(crate) async fn try_call(&mut self, tool: &str, arguments: Value) -> Value {
        let id = self.start_call(tool, arguments).await;
        self.answer(id).await
    }

    pub(crate) async fn start_call(&mut self, tool: &str, arguments: Value) -> u64 {
        self.send(json!({"op": "call_tool", "name": tool, "arguments": arguments}))
            .await
    }
}
