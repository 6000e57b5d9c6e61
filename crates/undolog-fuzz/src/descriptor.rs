//! Interceptor descriptors as `interceptors/list` returns them, and their `configSchema`.

use serde_json::Value;
use undolog_interceptors::{Descriptor, Error, Phase, config::ConfigSchema, event_matches};

use crate::{Verdict, wire::round_trip};

/// Events every descriptor is asked about, beside its own patterns.
const EVENTS: &[&str] = &[
    "tools/call",
    "tools/list",
    "resources/read",
    "sampling/createMessage",
    "notifications/tools/list_changed",
    "",
];

/// Patterns and events longer than this are matched but not compared with the reference.
const REFERENCE_LEN: usize = 64;

/// JSON read as a `Descriptor`. Asserts: it round-trips; its hooks match events as the reference
/// glob does; its `configSchema` compiles or is refused with `InvalidConfigSchema`, and a compiled
/// schema checks configs (no config always passes; a failure is `InvalidConfig`). The configs
/// checked are the input's `config` member, the input itself and the schema itself.
pub fn descriptor(data: &[u8]) -> Verdict {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return Verdict::Refused;
    };
    let Some(descriptor) = round_trip::<Descriptor>(&value) else {
        return Verdict::Refused;
    };

    for hook in &descriptor.hooks {
        for pattern in &hook.events {
            let events = EVENTS
                .iter()
                .copied()
                .chain(hook.events.iter().map(String::as_str));
            for event in events {
                let matched = event_matches(pattern, event);
                if pattern.len() <= REFERENCE_LEN && event.len() <= REFERENCE_LEN {
                    assert_eq!(
                        matched,
                        reference_glob(pattern.as_bytes(), event.as_bytes()),
                        "{pattern:?} against {event:?}"
                    );
                }
            }
        }
    }
    for event in EVENTS {
        let hooked = descriptor.hooks_event(event);
        let either = [Phase::Request, Phase::Response]
            .into_iter()
            .any(|phase| descriptor.intercepts(event, phase));
        assert_eq!(
            hooked, either,
            "hooks_event and intercepts disagree on {event:?}"
        );
    }
    let _ = (
        descriptor.priority(Phase::Request),
        descriptor.priority(Phase::Response),
    );

    let schema = match ConfigSchema::compile(&descriptor) {
        Ok(schema) => schema,
        Err(e) => {
            assert!(matches!(e, Error::InvalidConfigSchema { .. }), "{e:?}");
            return Verdict::Refused;
        }
    };
    assert!(schema.check(None).is_ok(), "no config is refused");
    let configs = [
        value.get("config"),
        Some(&value),
        descriptor.config_schema.as_ref(),
    ];
    for config in configs.into_iter().flatten() {
        match schema.check(Some(config)) {
            Ok(()) => {}
            Err(e) => {
                assert!(
                    descriptor.config_schema.is_some(),
                    "refused without a schema"
                );
                assert!(matches!(e, Error::InvalidConfig { .. }), "{e:?}");
            }
        }
    }
    Verdict::Accepted
}

/// `*` as any run of bytes, everything else literal: the textbook dynamic programme, slow and
/// plainly right.
fn reference_glob(pattern: &[u8], text: &[u8]) -> bool {
    // matches[j]: does the pattern so far match text[..j]?
    let mut matches = vec![false; text.len() + 1];
    matches[0] = true;
    for &p in pattern {
        let mut next = vec![false; text.len() + 1];
        if p == b'*' {
            let mut any = false;
            for j in 0..=text.len() {
                any |= matches[j];
                next[j] = any;
            }
        } else {
            for j in 1..=text.len() {
                next[j] = matches[j - 1] && text[j - 1] == p;
            }
        }
        matches = next;
    }
    matches[text.len()]
}

#[cfg(test)]
mod tests {
    use super::reference_glob;

    #[test]
    fn the_reference_glob_is_a_glob() {
        let cases = [
            ("*", "", true),
            ("*", "tools/call", true),
            ("tools/*", "tools/call", true),
            ("tools/*", "tools", false),
            ("*/list", "resources/list", true),
            ("a*b*c", "abc", true),
            ("a*b*c", "acb", false),
            ("", "", true),
            ("", "x", false),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(
                reference_glob(pattern.as_bytes(), text.as_bytes()),
                expected,
                "{pattern} vs {text}"
            );
        }
    }
}
