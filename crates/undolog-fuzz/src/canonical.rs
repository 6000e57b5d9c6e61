//! RFC 8785 canonical JSON and the call signature (`undolog_types`).

use serde_json::{Value, json};
use undolog_types::{Args, CallIdentity, OrgId, SessionId, Signature, canonical};

use crate::Verdict;

/// Any text (invalid UTF-8 replaced) through `canonical::parse`. Asserts: what parses
/// canonicalizes; canonical text parses back and canonicalizes to itself; the value, as the
/// arguments of a call, gives a signature whose canonical text holds the arguments' own.
pub fn canonical(data: &[u8]) -> Verdict {
    let text = String::from_utf8_lossy(data);
    let Ok(value) = canonical::parse(&text) else {
        return Verdict::Refused;
    };
    let once = canonical::to_string(&value).expect("a parsed value canonicalizes");
    let reparsed = canonical::parse(&once).expect("canonical text parses");
    let twice = canonical::to_string(&reparsed).expect("canonical text canonicalizes");
    assert_eq!(twice, once, "canonicalization is not idempotent");

    let args = match value {
        Value::Object(_) => value,
        other => json!({ "value": other }),
    };
    let args = Args::try_from(args).expect("a parsed object is valid arguments");
    let org = OrgId::new("fuzz").expect("a valid org");
    let session = SessionId::new("session").expect("a valid session");
    let identity = CallIdentity {
        org: &org,
        session: &session,
        tool: "tool",
        args: &args,
        step: Some(data.len() as u64),
    };
    let signed = identity.canonical();
    assert!(
        signed.contains(&format!("\"args\":{}", args.canonical())),
        "the signed object does not hold the arguments' canonical text"
    );
    let signature = identity.signature();
    assert_eq!(signature, Signature::of_canonical(&signed));
    assert_eq!(
        signature.as_str().len(),
        64,
        "a signature is 32 bytes of hex"
    );
    let _ = signature.lock_key().as_i64();
    Verdict::Accepted
}
