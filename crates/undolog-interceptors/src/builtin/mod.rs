//! Interceptors that ship with the crate: a secret redactor (mutator), a cross-boundary guard
//! (validator) and argument validation against a tool's inputSchema (validator).

mod arguments;
mod guard;
mod redactor;
pub mod secrets;

pub use arguments::ArgumentValidator;
pub use guard::CrossBoundaryGuard;
pub use redactor::SecretRedactor;

use serde_json::Value;

/// Visit every string leaf of a JSON value, mutably.
pub(crate) fn for_each_string_mut(value: &mut Value, f: &mut impl FnMut(&mut String)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter_mut().for_each(|v| for_each_string_mut(v, f)),
        Value::Object(map) => map.values_mut().for_each(|v| for_each_string_mut(v, f)),
        _ => {}
    }
}

/// Visit every string leaf of a JSON value.
pub(crate) fn for_each_string<'a>(value: &'a Value, f: &mut impl FnMut(&'a str)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter().for_each(|v| for_each_string(v, f)),
        Value::Object(map) => map.values().for_each(|v| for_each_string(v, f)),
        _ => {}
    }
}
