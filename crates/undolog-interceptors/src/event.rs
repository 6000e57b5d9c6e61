//! Event names, wildcard and glob matching, and the direction a message travels.

use serde::{Deserialize, Serialize};

/// Which half of an exchange is intercepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Request,
    Response,
}

/// The event that matches every event.
pub const ANY_EVENT: &str = "*";

/// Whether an event pattern from a hook matches a concrete event name.
///
/// `*` matches every event; a `*` inside a pattern matches any run of characters (including none),
/// so `tools/*` matches `tools/call` and `tools/list`, and `*/list` matches every list method.
/// Everything else must match exactly.
pub fn event_matches(pattern: &str, event: &str) -> bool {
    if pattern == ANY_EVENT {
        return true;
    }
    if !pattern.contains('*') {
        return pattern == event;
    }
    glob(pattern.as_bytes(), event.as_bytes())
}

/// Iterative glob matching with `*` only (linear backtracking; no recursion).
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Which way a message travels through the chain that intercepts it.
///
/// The order of a chain follows the direction of data: a message being *sent* is mutated first and
/// validated last, and a message being *received* is validated first and mutated after, so that
/// validation always guards the trust boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Sending,
    Receiving,
}

impl Direction {
    /// The direction of a phase as seen by a client-side chain (a gateway in front of servers):
    /// requests are sent out, responses come back in.
    pub fn of_phase(phase: Phase) -> Direction {
        match phase {
            Phase::Request => Direction::Sending,
            Phase::Response => Direction::Receiving,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::event_matches;
    use proptest::prelude::*;

    proptest! {
        /// The glob matcher agrees with the same pattern as an anchored regex (`*` as `.*`).
        #[test]
        fn glob_agrees_with_regex(pattern in "[a-c/*]{0,8}", event in "[a-c/]{0,10}") {
            let escaped: Vec<String> = pattern.split('*').map(regex::escape).collect();
            let reference = regex::Regex::new(&format!("^{}$", escaped.join(".*"))).unwrap();
            prop_assert_eq!(event_matches(&pattern, &event), reference.is_match(&event));
        }
    }

    #[test]
    fn wildcards_and_globs() {
        let cases = [
            ("*", "tools/call", true),
            ("tools/call", "tools/call", true),
            ("tools/call", "tools/list", false),
            ("tools/*", "tools/call", true),
            ("tools/*", "prompts/get", false),
            ("*/list", "resources/list", true),
            ("*/list", "resources/read", false),
            (
                "notifications/*/list_changed",
                "notifications/tools/list_changed",
                true,
            ),
            ("t*s/c*l", "tools/call", true),
            ("tools/", "tools/call", false),
        ];
        for (pattern, event, expected) in cases {
            assert_eq!(
                event_matches(pattern, event),
                expected,
                "{pattern} vs {event}"
            );
        }
    }
}
