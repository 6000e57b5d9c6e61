//! The gateway's configuration file (`undolog_gateway::config`).

use undolog_gateway::fuzzing;

use crate::Verdict;

/// A configuration file's text, loaded and validated as `GatewayConfig::load` does (without the
/// environment). Asserts: no panic; a refusal is a `configuration:` error that says something; a
/// configuration taken prints (secrets masked) without panicking.
pub fn config(data: &[u8]) -> Verdict {
    let Ok(text) = std::str::from_utf8(data) else {
        return Verdict::Refused;
    };
    match fuzzing::config_from_toml(text) {
        Ok(config) => {
            let _ = format!("{config:?}");
            Verdict::Accepted
        }
        Err(e) => {
            let message = e.to_string();
            let problem = message.strip_prefix("configuration: ");
            assert!(
                problem.is_some_and(|p| !p.trim().is_empty()),
                "an empty configuration error: {message:?}"
            );
            Verdict::Refused
        }
    }
}
