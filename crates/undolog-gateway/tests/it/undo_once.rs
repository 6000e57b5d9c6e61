//! An undo runs each compensation exactly once, however many undo requests arrive together and
//! at however many gateways: the bank's own ledger counts what really ran.

use serde_json::{Value, json};

use crate::{
    harness::{BANK_TOOLS, Bank, TestGateway},
    postgres::fresh_database,
};

const EFFECTS: usize = 4;
const UNDOS: usize = 4;

fn bank_toml(bank: &Bank) -> String {
    format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n{BANK_TOOLS}",
        bank.url
    )
}

/// `EFFECTS` transfers of distinct amounts in session `u-1`, through `gw`.
async fn transfers(gw: &TestGateway) {
    for amount in 1..=EFFECTS {
        let (status, answer) = gw
            .rest_call(
                None,
                "u-1",
                "transfer",
                json!({"from_account": "alice", "to_account": "bob", "amount": amount}),
            )
            .await;
        assert_eq!(
            (status, answer["outcome"].as_str()),
            (200, Some("executed")),
            "{answer}"
        );
    }
}

/// `UNDOS` undo requests at once, spread over `gateways`; the answers.
async fn undo_at_once(gateways: &[&TestGateway]) -> Vec<(u16, Value)> {
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(UNDOS));
    let undos: Vec<_> = (0..UNDOS)
        .map(|i| {
            let gw = gateways[i % gateways.len()];
            let (http, url) = (gw.http.clone(), format!("{}/v1/sessions/u-1/undo", gw.base));
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                let response = http.post(url).json(&json!({})).send().await.unwrap();
                let status = response.status().as_u16();
                (
                    status,
                    response.json::<Value>().await.unwrap_or(Value::Null),
                )
            })
        })
        .collect();
    let mut answers = Vec::new();
    for undo in undos {
        answers.push(undo.await.unwrap());
    }
    answers
}

/// One undo did the work; the others were told it was running (or already done), and the
/// ledger holds exactly one reverse transfer per transfer.
async fn exactly_once(bank: &Bank, answers: &[(u16, Value)]) {
    let done: Vec<_> = answers.iter().filter(|(s, _)| *s == 200).collect();
    assert_eq!(done.len(), 1, "{answers:?}");
    assert_eq!(done[0].1["state"], "compensated", "{answers:?}");
    for (status, answer) in answers.iter().filter(|(s, _)| *s != 200) {
        assert_eq!(*status, 409, "{answer}");
        let code = answer["code"].as_str().unwrap_or_default();
        assert!(
            code == "undo_running" || code == "nothing_to_undo",
            "{answer}"
        );
        if code == "undo_running" {
            assert!(
                answer["error"].as_str().unwrap().contains("GET /events"),
                "{answer}"
            );
        }
    }
    let ledger = bank.ledger().await;
    let reversed: Vec<&Value> = ledger
        .iter()
        .filter(|op| op["from_account"] == "bob" && op["to_account"] == "alice")
        .collect();
    assert_eq!(
        reversed.len(),
        EFFECTS,
        "each compensation ran once: {ledger:?}"
    );
    let mut amounts: Vec<i64> = reversed
        .iter()
        .map(|op| op["amount"].as_i64().unwrap())
        .collect();
    amounts.sort_unstable();
    assert_eq!(amounts, (1..=EFFECTS as i64).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_undos_at_once_run_four_compensations_on_sqlite() {
    let bank = Bank::start().await;
    let gw = TestGateway::start(&bank_toml(&bank)).await;
    transfers(&gw).await;
    let answers = undo_at_once(&[&gw]).await;
    exactly_once(&bank, &answers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_undos_at_once_at_two_gateways_run_four_compensations_on_postgres() {
    let db = fresh_database();
    let bank = Bank::start().await;
    let a = TestGateway::start_on(&bank_toml(&bank), Some(db.url())).await;
    let b = TestGateway::start_on(&bank_toml(&bank), Some(db.url())).await;
    transfers(&a).await;
    let answers = undo_at_once(&[&a, &b]).await;
    exactly_once(&bank, &answers).await;
}

/// A refund that outlasts the gateway's upstream timeout (it refunds, then takes 4 s more to
/// answer) may have run: one undo refunds once and leaves the step in doubt, and a second undo
/// runs nothing until an admin records what happened. (Both used to retry it: 3 refunds after
/// one undo, 6 after two.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_that_timed_out_runs_once_after_one_undo_and_after_a_second() {
    let bank = Bank::start().await;
    let gw = TestGateway::start(&format!(
        "[[upstreams]]\nname = \"bank\"\nurl = \"{}\"\n\
         [limits]\nupstream_timeout_secs = 2\n\
         [tools.transfer]\ntier = \"compensable\"\n\
         compensation = {{ tool = \"transfer_slowly\", args = {{ from_account = \"{{{{args.to_account}}}}\", \
         to_account = \"{{{{args.from_account}}}}\", amount = \"{{{{args.amount}}}}\", seconds = 4 }} }}\n\
         [tools.transfer_slowly]\ntier = \"compensable\"\n",
        bank.url
    ))
    .await;
    let (status, paid) = gw
        .rest_call(
            None,
            "slow-1",
            "transfer",
            json!({"from_account": "alice", "to_account": "bob", "amount": 30}),
        )
        .await;
    assert_eq!(status, 200, "{paid}");
    let effect = paid["effect_id"].as_str().unwrap().to_owned();
    let refunds = |ledger: Vec<Value>| {
        (ledger.iter())
            .filter(|op| op["from_account"] == "bob" && op["to_account"] == "alice")
            .count()
    };

    let (status, report) = gw.post("/v1/sessions/slow-1/undo", json!({})).await;
    assert_eq!(
        (status, report["state"].as_str()),
        (200, Some("compensation_failed")),
        "{report}"
    );
    let step = &report["steps"][0];
    assert_eq!(
        (step["attempts"].as_u64(), step["outcome"]["kind"].as_str()),
        (Some(1), Some("in_doubt")),
        "{report}"
    );
    assert_eq!(refunds(bank.ledger().await), 1, "one refund after one undo");
    let listed = gw.get("/v1/effects/in_doubt").await;
    assert!(listed.to_string().contains(&effect), "{listed}");

    let (status, again) = gw.post("/v1/sessions/slow-1/undo", json!({})).await;
    assert_eq!(
        (status, again["code"].as_str()),
        (409, Some("compensation_in_doubt")),
        "{again}"
    );
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert_eq!(
        refunds(bank.ledger().await),
        1,
        "one refund after a second undo"
    );

    let resolve = format!("/v1/effects/{effect}/resolve");
    let (status, wrong) = gw
        .post(&resolve, json!({"outcome": "committed", "result": {}}))
        .await;
    assert_eq!(
        (status, wrong["code"].as_str()),
        (422, Some("wrong_verdict")),
        "{wrong}"
    );
    let (status, resolved) = gw.post(&resolve, json!({"outcome": "compensated"})).await;
    assert_eq!(status, 200, "{resolved}");
    let (status, finished) = gw.post("/v1/sessions/slow-1/undo", json!({})).await;
    assert_eq!(
        (status, finished["state"].as_str()),
        (200, Some("compensated")),
        "{finished}"
    );
    assert_eq!(refunds(bank.ledger().await), 1, "never refunded again");
}
