//! RFC 8785 JSON Canonicalization Scheme (JCS).
//!
//! Objects have their keys sorted by UTF-16 code units, strings use the minimal escaping of
//! ECMAScript's `JSON.stringify`, and numbers are written as ECMAScript writes an IEEE-754 double
//! (shortest round trip: `1.0` → `1`, `1e21` → `1e+21`, `-0` → `0`).
//!
//! Numbers are IEEE-754 doubles, as RFC 8785 says. Numbers beyond a double's range, and integer
//! literals that would come out of canonicalization with other digits (past 2^53), are refused,
//! because languages disagree about them. [`parse`] checks the JSON text itself (so it also sees
//! integers past 2^64); [`to_string`] checks the integers of an already parsed value.

use serde_json::{Map, Number, Value};

use crate::Error;

/// Parses JSON text, refusing numbers whose decimal value an IEEE-754 double cannot carry.
pub fn parse(text: &str) -> Result<Value, Error> {
    for token in number_tokens(text) {
        check_number_token(token)?;
    }
    serde_json::from_str(text).map_err(|e| Error::MalformedJson(e.to_string()))
}

/// The canonical (RFC 8785) text of a JSON value.
pub fn to_string(value: &Value) -> Result<String, Error> {
    let mut out = String::new();
    write_value(&mut out, value)?;
    Ok(out)
}

fn write_value(out: &mut String, value: &Value) -> Result<(), Error> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&format_number(n)?),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item)?;
            }
            out.push(']');
        }
        Value::Object(map) => write_object(out, map)?,
    }
    Ok(())
}

fn write_object(out: &mut String, map: &Map<String, Value>) -> Result<(), Error> {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
    out.push('{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, key);
        out.push(':');
        write_value(out, value)?;
    }
    out.push('}');
    Ok(())
}

/// RFC 8785 §3.2.2.2: `"` and `\` escaped, control characters as `\b \t \n \f \r` or `\u00xx`
/// (lowercase hex), everything else — `/`, DEL, non-ASCII — written as itself.
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{0C}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if c < ' ' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn format_number(n: &Number) -> Result<String, Error> {
    let Some(f) = n.as_f64() else {
        return Err(Error::InexactNumber(n.to_string()));
    };
    let text = format_double(f);
    // An integer must come out with the digits it went in with (see `check_number_token`).
    if (n.is_u64() || n.is_i64()) && Decimal::of(&n.to_string()) != Decimal::of(&text) {
        return Err(Error::InexactNumber(n.to_string()));
    }
    Ok(text)
}

/// ECMAScript's `Number.prototype.toString` for a finite double.
fn format_double(f: f64) -> String {
    if f == 0.0 {
        return "0".to_owned(); // covers -0
    }
    ryu_js::Buffer::new().format_finite(f).to_owned()
}

/// Refuses a number token whose canonical form would not be the number that was written: one out
/// of a double's range, or an integer literal that its double writes with other digits (past 2^53
/// most languages round such an integer, Python keeps it whole). Fractions and exponents are
/// parsed as doubles, as RFC 8785 says, so `333333333.33333329` is accepted and becomes
/// `333333333.3333333`. Every canonical text therefore parses back to itself.
fn check_number_token(token: &str) -> Result<(), Error> {
    let inexact = || Error::InexactNumber(token.to_owned());
    let parsed: f64 = token.parse().map_err(|_| inexact())?;
    if !parsed.is_finite() {
        return Err(inexact());
    }
    let is_integer_literal = !token.contains(['.', 'e', 'E']);
    if is_integer_literal && Decimal::of(token) != Decimal::of(&format_double(parsed)) {
        return Err(inexact());
    }
    Ok(())
}

/// A decimal number as sign, significant digits and a power of ten, for exact comparison.
#[derive(Debug, PartialEq, Eq)]
enum Decimal {
    Zero,
    NonZero {
        negative: bool,
        digits: String,
        exponent: i64,
    },
}

impl Decimal {
    fn of(token: &str) -> Option<Decimal> {
        let (negative, unsigned) = match token.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, token),
        };
        let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
            Some((m, e)) => (m, e.trim_start_matches('+').parse::<i64>().ok()?),
            None => (unsigned, 0),
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let all = format!("{int}{frac}");
        let significant = all.trim_start_matches('0');
        let digits = significant.trim_end_matches('0');
        if digits.is_empty() {
            return Some(Decimal::Zero);
        }
        let trailing_zeros = (significant.len() - digits.len()) as i64;
        Some(Decimal::NonZero {
            negative,
            digits: digits.to_owned(),
            exponent: exponent - frac.len() as i64 + trailing_zeros,
        })
    }
}

/// The number tokens of a JSON text: maximal runs of number characters outside strings. Invalid
/// tokens are left for the JSON parser to report.
fn number_tokens(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        let mut in_string = false;
        while i < bytes.len() {
            let b = bytes[i];
            if in_string {
                match b {
                    b'\\' => i += 1,
                    b'"' => in_string = false,
                    _ => {}
                }
                i += 1;
            } else if b == b'"' {
                in_string = true;
                i += 1;
            } else if b == b'-' || b.is_ascii_digit() {
                let start = i;
                while i < bytes.len()
                    && matches!(bytes[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    i += 1;
                }
                return Some(&text[start..i]);
            } else {
                i += 1;
            }
        }
        None
    })
}
