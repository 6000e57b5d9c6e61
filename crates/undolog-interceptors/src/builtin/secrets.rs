//! Recognisable credential formats (verbatim matches only), found anywhere: inside longer strings
//! (`x<token>`, `<token>_`) and in object keys as well as values. The patterns have no word
//! boundaries on purpose: a redactor that errs toward redacting a little too much is the safe one.

use std::sync::LazyLock;

use regex::Regex;

/// One credential format.
#[derive(Debug)]
pub struct SecretFormat {
    pub id: &'static str,
    pattern: Regex,
}

/// A secret found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretHit<'a> {
    pub format: &'static str,
    pub value: &'a str,
}

static FORMATS: LazyLock<Vec<SecretFormat>> = LazyLock::new(|| {
    [
        // Fine-grained before classic: `github_pat_…` must not be half-read as another format.
        (
            "github_fine_grained_pat",
            r"github_pat_[A-Za-z0-9_]{22,255}",
        ),
        ("github_pat", r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,255}"),
        ("aws_access_key", r"(?:AKIA|ASIA)[A-Z0-9]{16}"),
        ("stripe_secret_live", r"(?:sk|rk)_live_[A-Za-z0-9]{16,255}"),
        ("slack_token", r"xox[abprs]-[A-Za-z0-9-]{10,255}"),
        ("openai_api_key", r"sk-(?:proj-)?[A-Za-z0-9_-]{32,255}"),
        ("private_key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    ]
    .into_iter()
    .map(|(id, pattern)| SecretFormat {
        id,
        pattern: Regex::new(pattern).expect("valid secret pattern"),
    })
    .collect()
});

/// The formats recognised, in matching order.
pub fn formats() -> &'static [SecretFormat] {
    &FORMATS
}

/// Every secret in `text`, in format order then position.
pub fn find_secrets(text: &str) -> Vec<SecretHit<'_>> {
    formats()
        .iter()
        .flat_map(|f| {
            f.pattern.find_iter(text).map(move |m| SecretHit {
                format: f.id,
                value: m.as_str(),
            })
        })
        .collect()
}

/// `text` with every secret replaced by `[redacted:<format>]`, and how many were replaced.
pub fn redact(text: &str) -> (String, usize) {
    let mut out = text.to_string();
    let mut count = 0;
    for format in formats() {
        let replaced = format.pattern.replace_all(&out, |_: &regex::Captures<'_>| {
            count += 1;
            format!("[redacted:{}]", format.id)
        });
        out = replaced.into_owned();
    }
    (out, count)
}

/// Redacts every secret in `value`'s strings and object keys, in place; how many were replaced.
/// Two keys that redact to the same text keep both values, the later one under a numbered key.
pub fn redact_value(value: &mut serde_json::Value) -> usize {
    use serde_json::Value;
    match value {
        Value::String(s) => {
            let (clean, n) = redact(s);
            if n > 0 {
                *s = clean;
            }
            n
        }
        Value::Array(items) => items.iter_mut().map(redact_value).sum(),
        Value::Object(map) => {
            let mut count = 0;
            let mut clean = serde_json::Map::with_capacity(map.len());
            for (key, mut item) in std::mem::take(map) {
                count += redact_value(&mut item);
                let (key, n) = redact(&key);
                count += n;
                let mut unique = key.clone();
                let mut i = 1;
                while clean.contains_key(&unique) {
                    i += 1;
                    unique = format!("{key}#{i}");
                }
                clean.insert(unique, item);
            }
            *map = clean;
            count
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_redacts_known_formats() {
        let text = "a ghp_Xa2bC3dEf4gH5iJk6Lm7nN8oP b AKIA5MZXN8QRF3WBY6OE c sk_live_4eC7aRm9Kx2bNw5pQj8sYd";
        let hits: Vec<&str> = find_secrets(text).iter().map(|h| h.format).collect();
        assert_eq!(hits, ["github_pat", "aws_access_key", "stripe_secret_live"]);
        let (clean, n) = redact(text);
        assert_eq!(n, 3);
        assert_eq!(
            clean,
            "a [redacted:github_pat] b [redacted:aws_access_key] c [redacted:stripe_secret_live]"
        );
        assert!(find_secrets("no secrets, AKIA too short").is_empty());
    }

    #[test]
    fn finds_secrets_inside_longer_strings_and_in_keys() {
        let token = "ghp_Xa2bC3dEf4gH5iJk6Lm7nN8oP";
        for text in [
            format!("x{token}"),
            format!("{token}_"),
            format!("prefix-{token}-suffix"),
            format!("Bearer {token}"),
        ] {
            let (clean, n) = redact(&text);
            assert_eq!(n, 1, "{text}");
            assert!(!clean.contains(token), "{clean}");
        }
        let mut value = serde_json::json!({
            token: "as a key",
            "nested": [{"auth": format!("x{token}_")}, {token: 1}],
            "fine": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        });
        assert_eq!(redact_value(&mut value), 4);
        let text = value.to_string();
        assert!(
            !text.contains("Xa2bC3") && !text.contains("11ABCDEFG"),
            "{text}"
        );
        assert_eq!(value["[redacted:github_pat]"], "as a key");
        assert_eq!(value["fine"], "[redacted:github_fine_grained_pat]");
    }
}
