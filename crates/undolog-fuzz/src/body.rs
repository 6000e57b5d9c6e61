//! REST and SDK request bodies (`JsonBody`), beside `/mcp`'s parse guard.

use serde_json::Value;
use undolog_gateway::{Error, fuzzing};
use undolog_types::{Args, canonical};

use crate::Verdict;

/// A request body as the REST tool call and the SDK effect API read it. Asserts: the `/mcp` guard
/// accepts whatever serde_json reads as a value; a refused body is a 400 (`BadRequest`); an accepted
/// body canonicalizes (its numbers were checked), passes the guard unless blank, and reads as
/// `Args` exactly when it is an object, with the same canonical text.
pub fn http_body(data: &[u8]) -> Verdict {
    // The guard checks the grammar only: it lets through numbers past a double's range, lone
    // surrogate escapes and nesting past 128, which a `Value` refuses (the transport then answers
    // 415, not −32700).
    let guard = fuzzing::check_mcp_body(data).is_ok();
    let json = serde_json::from_slice::<Value>(data).is_ok();
    assert!(guard || !json, "the /mcp guard refuses JSON");

    let body = match fuzzing::parse_body::<Value>(data) {
        Ok(body) => body,
        Err(e) => {
            assert!(matches!(e, Error::BadRequest(_)), "not a 400: {e:?}");
            return Verdict::Refused;
        }
    };
    let text = canonical::to_string(&body).expect("an accepted body canonicalizes");
    let blank = data
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    assert!(
        blank || guard,
        "a body the REST API accepts is refused by the /mcp guard"
    );

    let args = fuzzing::parse_body::<Args>(data);
    assert_eq!(args.is_ok(), body.is_object(), "Args and objects disagree");
    if let Ok(args) = args {
        assert_eq!(args.canonical(), text, "Args canonicalize differently");
    }
    Verdict::Accepted
}
