//! Recognisable credential formats (verbatim matches only).

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
        (
            "github_pat",
            r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,255}\b",
        ),
        (
            "github_fine_grained_pat",
            r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b",
        ),
        ("aws_access_key", r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
        (
            "stripe_secret_live",
            r"\b(?:sk|rk)_live_[A-Za-z0-9]{16,255}\b",
        ),
        ("slack_token", r"\bxox[abprs]-[A-Za-z0-9-]{10,255}\b"),
        ("openai_api_key", r"\bsk-(?:proj-)?[A-Za-z0-9_-]{32,255}\b"),
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
}
