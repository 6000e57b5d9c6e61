//! Answers that say what happened when parts are missing: an upstream down from the start, an
//! idempotent call whose answer was lost, and the gateway's own readiness.

use std::time::Duration;

use serde_json::json;

use crate::{faults::Dropping, harness::TestGateway};

fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port() // closed again when the listener drops here
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_down_from_the_start_answers_503_naming_it_never_404() {
    let port = closed_port();
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"late\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n\n\
         [tools.transfer]\ntier = \"compensable\"\n"
    ))
    .await;

    let (status, body) = gw
        .rest_call(None, "s1", "transfer", json!({"amount": 1}))
        .await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "upstream_unavailable", "{body}");
    assert_eq!(body["upstreams"], json!(["late"]), "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("`late`"),
        "names the upstream: {body}"
    );

    let (_, over_mcp) = gw
        .rpc(
            None,
            "tools/call",
            json!({"name": "transfer", "arguments": {"amount": 1}}),
            json!({}),
            Duration::from_secs(10),
        )
        .await;
    let error = &over_mcp["error"];
    assert_eq!(error["code"], -32603, "{over_mcp}");
    assert_eq!(error["data"]["upstreams"], json!(["late"]), "{over_mcp}");
    let sessions = gw.get("/v1/sessions").await;
    assert_eq!(sessions, json!([]), "nothing was recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_call_whose_answer_was_lost_is_sent_once_more_then_in_doubt() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.jsonl");
    let upstream = Dropping::start(&ledger).await;
    let toml = |idempotent: bool| {
        format!(
            "[[upstreams]]\nname = \"dropping\"\nurl = {:?}\n\n[limits]\nupstream_timeout_secs = 4\n\n\
             [tools.drop]\ntier = \"compensable\"\nidempotent = {idempotent}\n",
            upstream.url
        )
    };
    let ran = || {
        std::fs::read_to_string(&ledger)
            .unwrap_or_default()
            .lines()
            .count()
    };
    for (idempotent, sent) in [(false, 1), (true, 2)] {
        let before = ran();
        let gw = TestGateway::start(&toml(idempotent)).await;
        let (status, body) = gw.rest_call(None, "s1", "drop", json!({"n": 1})).await;
        assert_eq!(status, 502, "{body}");
        assert_eq!(body["in_doubt"], true, "{body}");
        assert_eq!(
            ran() - before,
            sent,
            "idempotent = {idempotent}: sent {sent} time(s)"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_says_whether_the_store_takes_this_gateways_heartbeats() {
    let gw = TestGateway::start("").await;
    let health = gw.get("/healthz").await;
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["store"]["backend"], "sqlite", "{health}");
    assert_eq!(health["store"]["ready"], true, "{health}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sdk_call_past_its_lease_is_in_doubt_and_its_retry_says_so_with_the_effect() {
    let gw = TestGateway::start("[limits]\nsdk_lease_secs = 1\n").await;
    let intercept = json!({
        "session_id": "sdk-doubt", "tool": "charge_card", "arguments": {"cents": 500},
        "step": 0, "tier": "compensable",
        "compensation": {"kind": "local", "function": "refund"}
    });
    let (status, first) = gw.post("/v1/effects", intercept.clone()).await;
    assert_eq!(
        (status, first["outcome"].as_str()),
        (200, Some("execute")),
        "{first}"
    );
    let lease_ms =
        first["lease_expires_at"].as_i64().unwrap() - undolog_types::Timestamp::now().as_millis();
    assert!(
        (0..=1_000).contains(&lease_ms),
        "the SDK's lease is the configured second: {first}"
    );
    // The SDK caller went away without committing or failing.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (status, retried) = gw.post("/v1/effects", intercept).await;
    assert_eq!(status, 200, "{retried}");
    assert_eq!(retried["outcome"], "rejected", "{retried}");
    assert_eq!(retried["in_doubt"], true, "{retried}");
    assert_eq!(retried["effect_id"], first["effect_id"], "{retried}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_says_how_long_it_waits_hears_still_running_within_that_time() {
    let bank = crate::harness::Bank::start().await;
    let gw = std::sync::Arc::new(
        TestGateway::start(&format!(
            "[[upstreams]]\nname = \"bank\"\nurl = {:?}\n\n[tools.hang]\ntier = \"compensable\"\n",
            bank.url
        ))
        .await,
    );
    // Both calls name no session: they are the same principal's run, so identical.
    let call = |meta: serde_json::Value| {
        let gw = gw.clone();
        async move {
            let params = json!({"name": "hang", "arguments": {"seconds": 3}, "_meta": meta});
            gw.rpc(
                None,
                "tools/call",
                params,
                json!({}),
                Duration::from_secs(10),
            )
            .await
        }
    };
    let first = tokio::spawn(call(json!({})));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = std::time::Instant::now();
    let (_, identical) = call(json!({"io.undolog/wait_ms": 1000})).await;
    let took = started.elapsed();
    let error = &identical["error"];
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("still running"),
        "{identical}"
    );
    assert!(error["data"]["effect_id"].is_string(), "{identical}");
    assert!(
        took < Duration::from_secs(2),
        "answered within the client's second: {took:?}"
    );
    let (_, done) = first.await.unwrap();
    assert!(done["result"].is_object(), "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outcome_the_full_disk_refused_is_recorded_once_space_returns() {
    let disk = undolog_store::SmallDisk::mount();
    let bank = crate::harness::Bank::start().await;
    let store = format!("sqlite://{}", disk.path().join("log.db").display());
    let gw = std::sync::Arc::new(
        TestGateway::start_on(
            &format!(
                "[[upstreams]]\nname = \"bank\"\nurl = {:?}\n\n[tools.hang]\ntier = \"compensable\"\n",
                bank.url
            ),
            Some(store),
        )
        .await,
    );
    // The intent is recorded, then the disk fills while the tool runs.
    let call = {
        let gw = gw.clone();
        tokio::spawn(async move {
            gw.rest_call(None, "disk", "hang", json!({"seconds": 1}))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let filler = disk.fill();
    let (status, body) = call.await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "outcome_not_recorded", "{body}");
    assert_eq!(body["in_doubt"], true, "{body}");
    let effect = body["effect_id"]
        .as_str()
        .expect("names its effect")
        .to_owned();

    std::fs::remove_file(filler).unwrap();
    let freed = std::time::Instant::now();
    loop {
        let recorded = gw.get(&format!("/v1/effects/{effect}")).await;
        if recorded["state"] == "committed" {
            assert_eq!(
                recorded["result"]["structuredContent"]["slept"], 1.0,
                "{recorded}"
            );
            break;
        }
        assert!(
            freed.elapsed() < Duration::from_secs(5),
            "not recorded 5 s after space returned: {recorded}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_its_upstream_could_not_be_sent_is_503_rejected_and_runs_afresh_when_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    // The bank's script in a place of its own, to take away and bring back.
    let script = dir.path().join("bank_server.py");
    std::fs::copy(crate::harness::fixture("bank_server.py"), &script).unwrap();
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\ncommand = {:?}\nargs = [{:?}, \"--stdio\", \"--state\", {:?}]\n\n\
         [tools.transfer]\ntier = \"compensable\"\n",
        crate::harness::python("mcp2").display().to_string(),
        script.display().to_string(),
        dir.path().join("bank.json").display().to_string(),
    ))
    .await;
    let transfer = json!({"from_account": "alice", "to_account": "bob", "amount": 5});

    // The bank dies and cannot be started again: the call is not sent.
    let hidden = dir.path().join("hidden.py");
    std::fs::rename(&script, &hidden).unwrap();
    let killed = std::process::Command::new("pkill")
        .args(["-9", "-f", &script.display().to_string()])
        .status()
        .unwrap();
    assert!(killed.success(), "the stdio bank was running");
    // The first call may meet the dead process's pipe before the gateway saw it die (then it may
    // have run, as far as anyone can tell: in doubt); the one after it finds no server to start.
    let probe = json!({"from_account": "alice", "to_account": "bob", "amount": 1});
    let (status, _) = gw.rest_call(None, "probe", "transfer", probe).await;
    assert!(matches!(status, 502 | 503), "the bank is gone: {status}");
    let (status, body) = gw.rest_call(None, "s1", "transfer", transfer.clone()).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "upstream_unavailable", "{body}");
    assert_eq!(body["upstreams"], json!(["bank"]), "{body}");
    assert_eq!(body["in_doubt"], false, "{body}");
    let effect = body["effect_id"]
        .as_str()
        .expect("names its effect")
        .to_owned();
    let recorded = gw.get(&format!("/v1/effects/{effect}")).await;
    assert_eq!(recorded["state"], "rejected", "never ran: {recorded}");

    // Back: the identical call runs now (a recorded failure would be replayed to it instead).
    std::fs::rename(&hidden, &script).unwrap();
    let (status, body) = gw.rest_call(None, "s1", "transfer", transfer).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], "executed", "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_follows_progress_hears_that_its_identical_call_waits_then_gets_the_replay() {
    let bank = crate::harness::Bank::start().await;
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = {:?}\n\n[tools.hang]\ntier = \"compensable\"\n",
        bank.url
    ))
    .await;
    let header = ["X-UndoLog-Session-Id: waiting"];
    let mut first = crate::harness::Client::connect("mcp2", "legacy", &gw.mcp_url(), &header).await;
    let mut second =
        crate::harness::Client::connect("mcp2", "legacy", &gw.mcp_url(), &header).await;
    let running = first.start_call("hang", json!({"seconds": 5})).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let identical = second
        .send(json!({"op": "call_tool", "name": "hang", "arguments": {"seconds": 5}, "progress": true}))
        .await;
    let answer = second.answer(identical).await;
    let progress = answer["progress"].as_array().cloned().unwrap_or_default();
    assert!(
        progress.iter().any(|p| p["message"]
            .as_str()
            .is_some_and(|m| m.contains("waiting for the identical call"))),
        "the waiting client heard why: {answer}"
    );
    assert_eq!(
        answer["ok"]["_meta"]["io.undolog/replayed"], true,
        "{answer}"
    );
    assert_eq!(answer["ok"]["structuredContent"]["slept"], 5.0, "{answer}");
    assert!(first.answer(running).await["ok"].is_object());
}
