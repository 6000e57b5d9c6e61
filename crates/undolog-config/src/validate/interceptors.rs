//! `[[interceptors]]` entries: from [`RawInterceptor`] to [`InterceptorConfig`], shape only. Each
//! entry's `config` is checked against the interceptors' `configSchema`s when the gateway starts.

use std::time::Duration;

use undolog_interceptors::Mode;

use super::{headers, http_url, stdio_command};
use crate::{BuiltinInterceptor, Error, InterceptorConfig, InterceptorSource, raw::RawInterceptor};

pub(super) fn interceptor(i: usize, raw: RawInterceptor) -> Result<InterceptorConfig, Error> {
    let entry = format!("interceptors[{i}]");
    let key = |field: &str| format!("{entry}.{field}");
    let source = match (&raw.builtin, &raw.command, &raw.url) {
        (Some(builtin), None, None) => InterceptorSource::Builtin(match builtin.as_str() {
            "redactor" => BuiltinInterceptor::Redactor,
            "guard" => BuiltinInterceptor::Guard,
            "arguments" => BuiltinInterceptor::Arguments,
            "policy" => BuiltinInterceptor::Policy,
            other => {
                return Err(Error::key(
                    key("builtin"),
                    format!(
                        "{other:?} is not a built-in interceptor; use \"redactor\", \"guard\", \
                         \"arguments\" or \"policy\""
                    ),
                ));
            }
        }),
        (None, Some(command), None) => InterceptorSource::Stdio {
            command: stdio_command(&key, command, "the interceptor server")?,
            args: raw.args,
            env: raw.env,
        },
        (None, None, Some(url)) => InterceptorSource::Http {
            url: http_url(&key, url)?,
            headers: headers(&key, raw.headers)?,
        },
        _ => {
            return Err(Error::key(
                entry,
                "give exactly one of `command` (an interceptor server on stdio), `url` (one on \
                 Streamable HTTP) or `builtin` (\"redactor\", \"guard\", \"arguments\" or \"policy\")",
            ));
        }
    };
    let mode = match raw.mode.as_deref() {
        None => None,
        Some("active" | "enforce") => Some(Mode::Active),
        Some("audit") => Some(Mode::Audit),
        Some(other) => {
            return Err(Error::key(
                key("mode"),
                format!("{other:?} is not a mode; use \"active\" or \"audit\""),
            ));
        }
    };
    if let Some(names) = &raw.names
        && (names.is_empty() || names.iter().any(String::is_empty))
    {
        return Err(Error::key(
            key("names"),
            "lists no name or an empty one; name the interceptors to use, or drop the key to \
             use all the server lists",
        ));
    }
    if let Some(events) = &raw.events
        && (events.is_empty() || events.iter().any(String::is_empty))
    {
        return Err(Error::key(
            key("events"),
            "lists no event or an empty one; name events such as \"tools/call\" or \
             \"sampling/createMessage\", or drop the key",
        ));
    }
    if raw.timeout_ms == Some(0) {
        return Err(Error::key(key("timeout_ms"), "must be greater than zero"));
    }
    Ok(InterceptorConfig {
        key: entry,
        source,
        names: raw.names,
        config: raw.config,
        events: raw.events,
        mode,
        fail_open: raw.fail_open,
        timeout: raw.timeout_ms.map(Duration::from_millis),
    })
}
