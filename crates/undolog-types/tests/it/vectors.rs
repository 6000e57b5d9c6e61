//! Replays `testdata/signature-vectors.json`, produced by independent implementations.

use serde::Deserialize;
use undolog_types::{Args, CallIdentity, Error, OrgId, SessionId, canonical};

#[derive(Deserialize)]
struct Vectors {
    canonical: Vec<CanonicalCase>,
    rejected: Vec<RejectedCase>,
    signatures: Vec<SignatureCase>,
}

#[derive(Deserialize)]
struct CanonicalCase {
    name: String,
    input: String,
    canonical: String,
}

#[derive(Deserialize)]
struct RejectedCase {
    name: String,
    input: String,
}

#[derive(Deserialize)]
struct SignatureCase {
    name: String,
    org: String,
    session: String,
    tool: String,
    args: String,
    step: Option<u64>,
    canonical: String,
    signature: String,
    lock_key: String,
}

fn vectors() -> Vectors {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/signature-vectors.json"
    );
    let text = std::fs::read_to_string(path).expect("the shared vectors file is in testdata/");
    serde_json::from_str(&text).expect("the vectors file is well-formed")
}

#[test]
fn the_vectors_file_has_at_least_thirty_cases() {
    let v = vectors();
    let total = v.canonical.len() + v.rejected.len() + v.signatures.len();
    assert!(total >= 30, "only {total} cases");
}

#[test]
fn canonical_text_matches_every_vector() {
    for case in vectors().canonical {
        let value = canonical::parse(&case.input).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let got = canonical::to_string(&value).unwrap();
        assert_eq!(got, case.canonical, "case {:?}", case.name);
    }
}

#[test]
fn inexact_numbers_are_refused_with_a_clear_error() {
    for case in vectors().rejected {
        match canonical::parse(&case.input) {
            Err(Error::InexactNumber(n)) => {
                let message = Error::InexactNumber(n).to_string();
                assert!(message.contains("send it as a string"), "{message}");
            }
            other => panic!("{}: expected InexactNumber, got {other:?}", case.name),
        }
    }
}

#[test]
fn signatures_and_lock_keys_match_every_vector() {
    for case in vectors().signatures {
        let org = OrgId::new(case.org).unwrap();
        let session = SessionId::new(case.session).unwrap();
        let args = Args::parse(&case.args).unwrap();
        let identity = CallIdentity {
            org: &org,
            session: &session,
            tool: &case.tool,
            args: &args,
            step: case.step,
        };
        assert_eq!(
            identity.canonical(),
            case.canonical,
            "canonical of {:?}",
            case.name
        );
        let signature = identity.signature();
        assert_eq!(
            signature.as_str(),
            case.signature,
            "signature of {:?}",
            case.name
        );
        assert_eq!(
            format!("{:016x}", signature.lock_key().0),
            case.lock_key,
            "lock key of {:?}",
            case.name
        );
    }
}

#[test]
fn non_object_arguments_are_refused() {
    for (text, kind) in [
        ("[]", "an array"),
        ("1", "a number"),
        ("\"x\"", "a string"),
        ("null", "null"),
    ] {
        assert_eq!(Args::parse(text), Err(Error::ArgumentsNotObject(kind)));
    }
}

#[test]
fn malformed_json_is_refused() {
    for text in ["{", "{\"a\":}", "nope", "{\"a\":1,}", ""] {
        assert!(
            matches!(canonical::parse(text), Err(Error::MalformedJson(_))),
            "{text:?}"
        );
    }
}

#[test]
fn numbers_inside_strings_are_not_checked() {
    let value =
        canonical::parse(r#"{"n":"18446744073709551617","e":"1e400 \" 99999999999999999999"}"#);
    assert!(value.is_ok());
}
