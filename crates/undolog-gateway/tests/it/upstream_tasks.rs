//! An upstream that serves the tasks extension itself (rmcp's `TaskManager`, the official Rust
//! SDK's, in this process over real Streamable HTTP): when it answers a call with a task, the
//! client gets a task of the gateway's, whose id is the call's effect, and which follows the
//! upstream's — its input requests and answers passed both ways, its cancellation passed on, and
//! its result recorded (and undone) like any call's.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
        CreateTaskResult, GetTaskParams, GetTaskResult, InputRequest, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, UpdateTaskParams,
    },
    service::RequestContext,
    task_manager::{TaskExit, TaskManager, TaskOptions},
};
use serde_json::{Value, json};

use crate::harness::{TestGateway, serve_mcp};

/// A tool server whose `render` runs as a task: it asks the client for a `title` (an
/// `elicitation/create` input request), works `seconds`, then answers with the title. Every
/// render that finished is in `rendered`.
#[derive(Clone, Default)]
struct Renderer {
    tasks: TaskManager,
    rendered: Arc<Mutex<Vec<String>>>,
}

impl ServerHandler for Renderer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object", "properties": {"seconds": {"type": "number"}}});
        let tool = Tool::new(
            "render",
            "Renders a document",
            Arc::new(schema.as_object().cloned().unwrap()),
        );
        Ok(ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks())
        {
            return Err(ErrorData::missing_required_client_capability(
                rmcp::model::ClientCapabilities::builder()
                    .enable_tasks()
                    .build(),
            ));
        }
        let seconds = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("seconds"))
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let rendered = self.rendered.clone();
        let options = TaskOptions::new().with_poll_interval_ms(100);
        let task = self.tasks.spawn(options, move |ctx| {
            Box::pin(async move {
                let ask = json!({"method": "elicitation/create", "params": {
                    "message": "Title?",
                    "requestedSchema": {"type": "object", "properties": {"title": {"type": "string"}}}
                }});
                let ask: InputRequest = serde_json::from_value(ask).expect("an input request");
                let answer = ctx.request_input("title", ask).await?;
                let title = answer["content"]["title"].as_str().unwrap_or("untitled").to_owned();
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs_f64(seconds)) => {}
                    () = ctx.cancelled() => return Err(TaskExit::Cancelled),
                }
                rendered.lock().unwrap().push(title.clone());
                Ok(CallToolResult::success(vec![ContentBlock::text(format!("rendered {title}"))]))
            })
        });
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.cancel_task(&request.task_id)
    }
}

fn tasks() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}})
}

async fn rpc(gw: &TestGateway, method: &str, params: Value) -> Value {
    let (status, answer) = gw
        .rpc(None, method, params, tasks(), Duration::from_secs(10))
        .await;
    assert_eq!(status, 200, "{method}: {answer}");
    answer
}

/// Polls `tasks/get` until the task's status is one of `wanted` (10 s at most).
async fn until(gw: &TestGateway, task: &str, wanted: &[&str]) -> Value {
    for _ in 0..100 {
        let seen = rpc(gw, "tasks/get", json!({"taskId": task})).await["result"].clone();
        if wanted.contains(&seen["status"].as_str().unwrap_or("")) {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("task {task} never became {wanted:?}");
}

async fn gateway(url: &str) -> TestGateway {
    TestGateway::start(&format!(
        "[[upstreams]]\nname = \"renderer\"\nurl = {url:?}\n\n[tools.render]\ntier = \"compensable\"\n"
    ))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_task_is_followed_through_its_input_request_to_its_recorded_result() {
    let renderer = Renderer::default();
    let gw = gateway(&serve_mcp(renderer.clone()).await).await;

    let created = rpc(
        &gw,
        "tools/call",
        json!({"name": "render", "arguments": {"seconds": 0.3}}),
    )
    .await;
    let created = &created["result"];
    assert_eq!(created["resultType"], "task", "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();
    assert_eq!(
        created["_meta"]["io.undolog/effect_id"], task,
        "the gateway's task is the call's effect, not the upstream's task id"
    );

    // The upstream's input request reaches the client through the gateway's task…
    let asked = until(&gw, &task, &["input_required"]).await;
    assert_eq!(
        asked["inputRequests"]["title"]["method"], "elicitation/create",
        "{asked}"
    );
    // …and the answer goes back to the upstream's.
    let answer = json!({"title": {"action": "accept", "content": {"title": "Q3 report"}}});
    let ack = rpc(
        &gw,
        "tasks/update",
        json!({"taskId": task, "inputResponses": answer}),
    )
    .await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");

    let done = until(&gw, &task, &["completed", "failed", "cancelled"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "rendered Q3 report",
        "{done}"
    );
    assert_eq!(*renderer.rendered.lock().unwrap(), ["Q3 report"]);
    let effect = gw.get(&format!("/v1/effects/{task}")).await;
    assert_eq!(
        effect["state"], "committed",
        "recorded like any call: {effect}"
    );
    assert_eq!(effect["result"]["content"][0]["text"], "rendered Q3 report");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_gateways_task_cancels_the_upstreams() {
    let renderer = Renderer::default();
    let gw = gateway(&serve_mcp(renderer.clone()).await).await;
    let created = rpc(
        &gw,
        "tools/call",
        json!({"name": "render", "arguments": {"seconds": 30}}),
    )
    .await;
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    until(&gw, &task, &["input_required"]).await;
    let answer = json!({"title": {"action": "accept", "content": {"title": "never"}}});
    rpc(
        &gw,
        "tasks/update",
        json!({"taskId": task, "inputResponses": answer}),
    )
    .await;
    until(&gw, &task, &["working"]).await;

    let ack = rpc(&gw, "tasks/cancel", json!({"taskId": task})).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let ended = until(&gw, &task, &["completed", "failed", "cancelled"]).await;
    assert_eq!(ended["status"], "cancelled", "{ended}");
    assert!(
        renderer.rendered.lock().unwrap().is_empty(),
        "the upstream stopped its work"
    );
    // The upstream may have done part of its work: the effect says so, never "failed".
    let effect = gw.get(&format!("/v1/effects/{task}")).await;
    assert_eq!(effect["state"], "pending", "{effect}");
    let doubtful = gw.get("/v1/effects/in_doubt").await;
    assert!(
        doubtful.as_array().unwrap().iter().any(|e| e["id"] == task),
        "in doubt for an operator: {doubtful}"
    );
}
