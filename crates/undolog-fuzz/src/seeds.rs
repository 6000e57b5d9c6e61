//! The seed corpus replayed: every file in `seeds/<target>/` through its target, `ok-*` accepted
//! and `err-*` refused. The fuzzer starts from the same files.

use std::{fs, path::Path};

use crate::{TARGETS, Verdict};

fn check(name: &str) {
    let (_, target) = TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .expect("a target of that name");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(name);
    let (mut accepted, mut refused) = (0, 0);
    for entry in fs::read_dir(&dir).expect("the target's seed folder") {
        let path = entry.expect("a seed").path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let expected = if file.starts_with("ok-") {
            accepted += 1;
            Verdict::Accepted
        } else if file.starts_with("err-") {
            refused += 1;
            Verdict::Refused
        } else {
            panic!("{name}/{file}: name seeds ok-* or err-*");
        };
        let bytes = fs::read(&path).expect("a readable seed");
        assert_eq!(target(&bytes), expected, "{name}/{file}");
    }
    assert!(
        accepted > 0 && refused > 0,
        "{name}: seeds of both kinds ({accepted} ok, {refused} err)"
    );
}

#[test]
fn http_body() {
    check("http_body");
}

#[test]
fn mcp_message() {
    check("mcp_message");
}

#[test]
fn canonical() {
    check("canonical");
}

#[test]
fn config() {
    check("config");
}

#[test]
fn descriptor() {
    check("descriptor");
}

#[test]
fn interceptor_wire() {
    check("interceptor_wire");
}

#[test]
fn every_target_has_seeds() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let mut folders: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    folders.sort();
    let mut names: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
    names.sort();
    assert_eq!(folders, names);
}
