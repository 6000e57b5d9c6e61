//! The `undolog` binary, run as a user runs it.

use std::process::Command;

use serde::Deserialize;

fn undolog(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_undolog"))
        .args(args)
        .output()
        .expect("the binary runs")
}

#[derive(Deserialize)]
struct Vectors {
    signatures: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    org: String,
    session: String,
    tool: String,
    args: String,
    step: Option<u64>,
    signature: String,
}

#[test]
fn signature_prints_what_the_shared_vectors_expect() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/signature-vectors.json"
    );
    let vectors: Vectors = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for case in vectors.signatures {
        let step = case.step.map(|s| s.to_string());
        let mut args = vec![
            "signature",
            "--org",
            &case.org,
            "--session",
            &case.session,
            "--tool",
            &case.tool,
            "--args",
            &case.args,
        ];
        if let Some(step) = &step {
            args.extend(["--step", step]);
        }
        let out = undolog(&args);
        assert!(
            out.status.success(),
            "{}: {}",
            case.name,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8(out.stdout).unwrap().trim(),
            case.signature,
            "{}",
            case.name
        );
    }
}

#[test]
fn signature_refuses_bad_arguments_with_a_clear_message() {
    for (args, says) in [
        ("[1]", "must be a JSON object"),
        ("{\"a\":", "malformed JSON"),
        ("{\"n\":9007199254740993}", "send it as a string"),
    ] {
        let out = undolog(&[
            "signature",
            "--org",
            "o",
            "--session",
            "s",
            "--tool",
            "t",
            "--args",
            args,
        ]);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("--args") && stderr.contains(says),
            "{args}: {stderr}"
        );
    }
}

#[test]
fn the_demo_shows_replay_approval_and_undo_and_survives_a_second_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("demo.db");
    for _ in 0..2 {
        let out = undolog(&["demo", "--store", store.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        for line in [
            "REPLAYED",
            "HELD      awaiting approval",
            "operator approved",
            "bank before undo: alice=85 bob=15",
            "session is now compensated; not undoable: 1 irreversible effect(s)",
            "bank after undo:  alice=100 bob=0",
            "snapshot kept: 4 effects",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
    }
}

mod admin;
mod engine;
mod faults;
mod gateway;
mod keys;
mod layers;
mod two_gateways;
