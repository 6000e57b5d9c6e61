//! The params and results of `interceptors/list` and `interceptor/invoke` (`undolog_interceptors`).

use std::fmt::Debug;

use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;
use undolog_interceptors::{
    InterceptorType, InvocationContext, InvokeParams, InvokeResult, ListParams, ListResult,
};

use crate::Verdict;

/// JSON read as each wire type; accepted when it is a list result, invoke params, an invoke result
/// or a `[params, result]` pair. Asserts: whatever reads as one round-trips through JSON to an
/// equal value; an invoke result's outcome is of the type its tag names; and, for a pair
/// `[params, result]`, the result answers the params exactly when its interceptor and phase are
/// the ones asked.
pub fn interceptor_wire(data: &[u8]) -> Verdict {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return Verdict::Refused;
    };
    // Both read from almost any object: checked, but no sign of a message.
    let _ = round_trip::<ListParams>(&value);
    let _ = round_trip::<InvocationContext>(&value);
    let mut accepted = round_trip::<ListResult>(&value).is_some();
    accepted |= round_trip::<InvokeParams>(&value).is_some();
    if let Some(result) = round_trip::<InvokeResult>(&value) {
        accepted = true;
        let tag = value.get("type").and_then(Value::as_str);
        assert_eq!(Some(result.into_outcome().kind().as_str()), tag);
    }
    if let Some([params, result]) = value.as_array().map(Vec::as_slice)
        && let (Some(params), Some(result)) = (
            round_trip::<InvokeParams>(params),
            round_trip::<InvokeResult>(result),
        )
    {
        accepted = true;
        let (name, phase, kind) = match &result {
            InvokeResult::Validation {
                interceptor, phase, ..
            } => (interceptor.clone(), *phase, InterceptorType::Validation),
            InvokeResult::Mutation {
                interceptor, phase, ..
            } => (interceptor.clone(), *phase, InterceptorType::Mutation),
        };
        let answers = name == params.name && phase == params.phase;
        match result.answering(&params) {
            Ok(outcome) => {
                assert!(answers, "an answer for {name} taken for {}", params.name);
                assert_eq!(outcome.kind(), kind);
            }
            Err(_) => assert!(!answers, "a right answer refused"),
        }
    }
    if accepted {
        Verdict::Accepted
    } else {
        Verdict::Refused
    }
}

/// `T` read from `value`, after asserting that it serializes and reads back equal.
pub(crate) fn round_trip<T>(value: &Value) -> Option<T>
where
    T: DeserializeOwned + Serialize + PartialEq + Debug,
{
    let read = T::deserialize(value).ok()?;
    let written = serde_json::to_value(&read).expect("a wire value serializes");
    let again = T::deserialize(&written).expect("a serialized wire value reads back");
    assert_eq!(
        again, read,
        "not the same after a round trip through {written}"
    );
    Some(read)
}
