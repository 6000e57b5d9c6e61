//! Calls as tasks (the 2026-07-28 tasks extension, SEP-2663). A client that declares the
//! extension gets a task at once for a call that waits for a person, follows it with
//! `tasks/get`, and never keeps a request open while the person takes their time. Only its
//! caller may cancel or answer for a task, and cancelling takes the approval request back.
//!
//! The real client is rmcp's (the official Rust SDK, which implements the extension); the
//! wire-level client is plain HTTP, every request bounded so that none may stay open.

use std::time::{Duration, Instant};

use rmcp::{
    model::{
        CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, GetTaskParams,
        Implementation, ProtocolVersion, TaskPayload,
    },
    service::{ClientLifecycleMode, ClientServiceExt},
    transport::StreamableHttpClientTransport,
};
use serde_json::{Value, json};
use undolog_types::Role;

use crate::harness::Credential;

use crate::harness::TestGateway;

/// How long any one request may take: the shortest timeout of a common client (the OpenAI
/// Agents SDK's 5 s). A held call must answer well within it.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the person takes to decide.
const DECISION_AFTER: Duration = Duration::from_secs(30);

fn tasks() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
}

fn email(to: &str) -> Value {
    json!({"to": to, "subject": "quarterly numbers"})
}

/// The task a held call answered with (wire level).
async fn held_task(gw: &TestGateway, key: Option<&Credential>, to: &str) -> String {
    let (status, created) = gw
        .rpc(
            key,
            "tools/call",
            json!({"name": "send_email", "arguments": email(to)}),
            tasks(),
            CLIENT_TIMEOUT,
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let created = &created["result"];
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working", "{created}");
    assert_eq!(
        created["taskId"], created["_meta"]["io.undolog/effect_id"],
        "the task is the call's effect: {created}"
    );
    created["taskId"].as_str().unwrap().to_owned()
}

/// `tasks/get` at the wire level: the task, or the JSON-RPC error.
async fn get_task(gw: &TestGateway, key: Option<&Credential>, task: &str) -> Value {
    gw.rpc(
        key,
        "tasks/get",
        json!({"taskId": task}),
        tasks(),
        CLIENT_TIMEOUT,
    )
    .await
    .1
}

/// `tasks/cancel` by `key`: the JSON-RPC answer.
async fn cancel(gw: &TestGateway, key: &Credential, task: &str) -> Value {
    gw.rpc(
        Some(key),
        "tasks/cancel",
        json!({"taskId": task}),
        tasks(),
        CLIENT_TIMEOUT,
    )
    .await
    .1
}

/// The pending approval of the call that is `task`.
async fn approval_for(gw: &TestGateway, key: Option<&Credential>, task: &str) -> String {
    for _ in 0..100 {
        let (_, pending) = gw.get_as(key, "/v1/approvals?status=pending").await;
        if let Some(found) = pending
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["effect"] == task)
        {
            return found["id"].as_str().unwrap().to_owned();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no approval pending for task {task}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_becomes_a_task_that_completes_after_a_decision_made_30_s_later() {
    let gw = TestGateway::start("").await;

    // The real client: rmcp, stateless 2026-07-28, declaring the tasks extension.
    let info = ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::new("undolog-tasks-test", "1"),
    );
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = info
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(gw.mcp_url()),
            lifecycle,
        )
        .await
        .expect("rmcp connects");
    let asked = Instant::now();
    let mut params = CallToolRequestParams::new("send_email");
    params.arguments = email("ceo@example.com").as_object().cloned();
    let answer = tokio::time::timeout(CLIENT_TIMEOUT, client.call_tool_once(params))
        .await
        .expect("the held call answers at once")
        .expect("a tools/call answer");
    let CallToolResponse::Task(created) = answer else {
        panic!("a held call answers a task-declaring client with a task: {answer:?}");
    };
    let answered_in = asked.elapsed();
    let sdk_task = created.task.task_id.clone();

    // The wire-level client, beside it: this call will be denied.
    let wire_task = held_task(&gw, None, "all@example.com").await;

    let approve = approval_for(&gw, None, &sdk_task).await;
    let deny = approval_for(&gw, None, &wire_task).await;

    // The person takes their time; both tasks say what they wait for, every poll at once.
    let deadline = Instant::now() + DECISION_AFTER;
    let mut polls = 0;
    while Instant::now() < deadline {
        let seen = tokio::time::timeout(
            CLIENT_TIMEOUT,
            client.get_task(GetTaskParams::new(sdk_task.clone())),
        )
        .await
        .expect("tasks/get answers at once")
        .expect("tasks/get");
        assert!(
            matches!(seen.task.payload, TaskPayload::Working),
            "{seen:?}"
        );
        let message = seen.task.task.status_message.unwrap_or_default();
        assert!(message.contains(&approve), "names the approval: {message}");
        let wire = get_task(&gw, None, &wire_task).await;
        assert_eq!(wire["result"]["status"], "working", "{wire}");
        polls += 1;
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    let (status, _) = gw
        .post(&format!("/v1/approvals/{approve}/approve"), json!({}))
        .await;
    assert_eq!(status, 200);
    let (status, _) = gw
        .post(
            &format!("/v1/approvals/{deny}/deny"),
            json!({"reason": "not to everyone"}),
        )
        .await;
    assert_eq!(status, 200);

    let done = wait_for_terminal(|| async {
        let seen = client
            .get_task(GetTaskParams::new(sdk_task.clone()))
            .await
            .expect("tasks/get");
        serde_json::to_value(&seen).unwrap()
    })
    .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["sent"], true,
        "the email's own result, sent after the approval: {done}"
    );
    assert_eq!(done["result"]["_meta"]["io.undolog/effect_id"], sdk_task);

    let denied =
        wait_for_terminal(|| async { get_task(&gw, None, &wire_task).await["result"].clone() })
            .await;
    assert_eq!(denied["status"], "failed", "{denied}");
    let message = denied["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("not to everyone"),
        "the denial's reason: {denied}"
    );
    assert!(denied.get("result").is_none(), "{denied}");

    let effect = gw.get(&format!("/v1/effects/{sdk_task}")).await;
    assert_eq!(effect["state"], "committed", "{effect}");
    eprintln!(
        "held call answered with a task in {answered_in:?}; {polls} polls over {DECISION_AFTER:?} \
         each answered within {CLIENT_TIMEOUT:?}"
    );
    client.cancel().await.ok();
}

/// In `approvals.mode = "defer"` a request answers at once, but a task is already that answer:
/// it waits for the decision as in the default mode. (It used to fail within half a second,
/// "nobody decided on the call in time", and the approved call never ran.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_defer_mode_a_held_call_s_task_waits_for_the_decision_and_completes_once_approved() {
    let gw = TestGateway::start("[approvals]\nmode = \"defer\"\n").await;
    let task = held_task(&gw, None, "cfo@example.com").await;
    let approval = approval_for(&gw, None, &task).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let waiting = get_task(&gw, None, &task).await;
    assert_eq!(waiting["result"]["status"], "working", "{waiting}");

    let (status, answer) = gw
        .post(&format!("/v1/approvals/{approval}/approve"), json!({}))
        .await;
    assert_eq!(status, 200, "{answer}");
    let done =
        wait_for_terminal(|| async { get_task(&gw, None, &task).await["result"].clone() }).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["structuredContent"]["sent"], true, "{done}");
    let effect = gw.get(&format!("/v1/effects/{task}")).await;
    assert_eq!(effect["state"], "committed", "{effect}");
}

/// Polls until the task is terminal (10 s at most after the decision).
async fn wait_for_terminal<F, Fut>(mut get: F) -> Value
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    for _ in 0..100 {
        let task = get().await;
        if ["completed", "failed", "cancelled"].contains(&task["status"].as_str().unwrap_or("")) {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the task did not end within 10 s of the decision");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_its_caller_may_cancel_a_task_and_cancelling_withdraws_the_approval_request() {
    let gw = TestGateway::start("").await;
    let agent = gw.key("acme", Role::Agent).await;
    let colleague = gw.key("acme", Role::Agent).await;
    let stranger = gw.key("globex", Role::Admin).await;
    let approver = gw.key("acme", Role::Approver).await;

    let task = held_task(&gw, Some(&agent), "ceo@example.com").await;
    let approval = approval_for(&gw, Some(&approver), &task).await;

    // Another org does not see it at all.
    let unseen = get_task(&gw, Some(&stranger), &task).await;
    assert_eq!(unseen["error"]["code"], -32602, "{unseen}");
    // A colleague in the org may read it, but neither cancel it nor answer for it.
    let seen = get_task(&gw, Some(&colleague), &task).await;
    assert_eq!(seen["result"]["status"], "working", "{seen}");
    for (method, params) in [
        ("tasks/cancel", json!({"taskId": task})),
        (
            "tasks/update",
            json!({"taskId": task, "inputResponses": {"x": {"action": "accept"}}}),
        ),
    ] {
        let (_, refused) = gw
            .rpc(Some(&colleague), method, params, tasks(), CLIENT_TIMEOUT)
            .await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("only it"),
            "{method} by another caller is refused: {refused}"
        );
    }
    let (_, pending) = gw
        .get_as(Some(&approver), "/v1/approvals?status=pending")
        .await;
    assert_eq!(pending.as_array().map(Vec::len), Some(1), "{pending}");

    // Its caller cancels: the request is taken back, nobody can approve it any more.
    let ack = cancel(&gw, &agent, &task).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let cancelled =
        wait_for_terminal(|| async { get_task(&gw, Some(&agent), &task).await["result"].clone() })
            .await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let (_, withdrawn) = gw
        .get_as(Some(&approver), &format!("/v1/approvals/{approval}"))
        .await;
    assert_eq!(withdrawn["state"], "withdrawn", "{withdrawn}");
    let (status, late) = gw
        .post_as(
            Some(&approver),
            &format!("/v1/approvals/{approval}/approve"),
            json!({}),
        )
        .await;
    assert_eq!(
        status, 409,
        "a withdrawn request cannot be approved: {late}"
    );
    let (_, effect) = gw
        .get_as(Some(&approver), &format!("/v1/effects/{task}"))
        .await;
    assert_eq!(effect["state"], "denied", "the call never ran: {effect}");

    // Cancelling again is acknowledged and changes nothing; a retry asks a person again.
    let again = cancel(&gw, &agent, &task).await;
    assert_eq!(
        again["result"],
        json!({"resultType": "complete"}),
        "{again}"
    );
    let retried = held_task(&gw, Some(&agent), "ceo@example.com").await;
    assert_ne!(
        retried, task,
        "a new request, not the withdrawn one replayed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_the_tasks_extension_gets_no_task_and_no_tasks_methods() {
    let gw = TestGateway::start("[approvals]\nmode = \"defer\"\n").await;
    let (_, deferred) = gw
        .rpc(
            None,
            "tools/call",
            json!({"name": "send_email", "arguments": email("ceo@example.com")}),
            json!({}),
            CLIENT_TIMEOUT,
        )
        .await;
    let result = &deferred["result"];
    assert_ne!(result["resultType"], "task", "{deferred}");
    assert!(result.get("taskId").is_none(), "{deferred}");
    let effect = result["_meta"]["io.undolog/effect_id"].as_str().unwrap();
    // The methods of the extension are refused to it (−32021, the capability it lacks).
    let (_, refused) = gw
        .rpc(
            None,
            "tasks/get",
            json!({"taskId": effect}),
            json!({}),
            CLIENT_TIMEOUT,
        )
        .await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
}
