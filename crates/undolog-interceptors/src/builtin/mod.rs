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

/// Visit every string of a JSON value: its string leaves and its object keys.
pub(crate) fn for_each_string<'a>(value: &'a Value, f: &mut impl FnMut(&'a str)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter().for_each(|v| for_each_string(v, f)),
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            f(k);
            for_each_string(v, f);
        }),
        _ => {}
    }
}
