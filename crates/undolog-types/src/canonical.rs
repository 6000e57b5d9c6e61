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

/// Where canonical text goes: a string, a hash (the signature is hashed as it is written, with no
/// text in between), or nowhere, when only the numbers are checked or the length counted.
pub trait Sink {
    fn put(&mut self, text: &str);
}

impl Sink for String {
    fn put(&mut self, text: &str) {
        self.push_str(text);
    }
}

/// One BLAKE3 chunk, the most the hasher takes in one piece before it compresses.
const HASHING_BUFFER: usize = 1024;

/// A BLAKE3 hash of the text put, fed to the hasher a chunk at a time: canonical text arrives a
/// few bytes at a time (a quote, a key, a comma), and each of the hasher's updates costs more than
/// copying those bytes, so they gather first in a buffer of one BLAKE3 chunk. Any split of the
/// same bytes hashes the same.
pub struct Hashing {
    hasher: blake3::Hasher,
    buffer: [u8; HASHING_BUFFER],
    len: usize,
}

impl std::fmt::Debug for Hashing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hashing")
            .field("buffered", &self.len)
            .finish_non_exhaustive()
    }
}

impl Default for Hashing {
    fn default() -> Hashing {
        Hashing {
            hasher: blake3::Hasher::new(),
            buffer: [0; HASHING_BUFFER],
            len: 0,
        }
    }
}

impl Hashing {
    /// The hash of everything put.
    pub fn finalize(mut self) -> blake3::Hash {
        self.hasher.update(&self.buffer[..self.len]);
        self.hasher.finalize()
    }
}

impl Sink for Hashing {
    fn put(&mut self, text: &str) {
        let bytes = text.as_bytes();
        if self.len + bytes.len() > self.buffer.len() {
            self.hasher.update(&self.buffer[..self.len]);
            self.len = 0;
            if bytes.len() >= self.buffer.len() {
                self.hasher.update(bytes);
                return;
            }
        }
        self.buffer[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }
}

/// The length of the canonical text, without the text.
#[derive(Debug, Default)]
pub struct Length(pub usize);

impl Sink for Length {
    fn put(&mut self, text: &str) {
        self.0 += text.len();
    }
}

/// The canonical (RFC 8785) text of a JSON value.
pub fn to_string(value: &Value) -> Result<String, Error> {
    let mut out = String::new();
    write(&mut out, value)?;
    Ok(out)
}

/// Writes the canonical text of `value` to `sink`; an error when a number cannot be written
/// exactly (see [`check_number_token`]), with part of the text written already.
pub fn write(sink: &mut impl Sink, value: &Value) -> Result<(), Error> {
    match value {
        Value::Null => sink.put("null"),
        Value::Bool(b) => sink.put(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(sink, n)?,
        Value::String(s) => write_string(sink, s),
        Value::Array(items) => {
            sink.put("[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    sink.put(",");
                }
                write(sink, item)?;
            }
            sink.put("]");
        }
        Value::Object(map) => write_object(sink, map)?,
    }
    Ok(())
}

/// Writes an object, its keys in the order of their UTF-16 code units. Keys already in that
/// order are written as they come, with no copy: a map sorted by UTF-8 bytes (serde_json's
/// default) is, unless a key holds a character past U+FFFF where another holds one in
/// U+E000–U+FFFF. Any other map is sorted first.
pub fn write_object(sink: &mut impl Sink, map: &Map<String, Value>) -> Result<(), Error> {
    let in_order = map
        .keys()
        .zip(map.keys().skip(1))
        .all(|(a, b)| utf16_order(a, b).is_le());
    if in_order {
        return write_entries(sink, map.iter());
    }
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|(a, _), (b, _)| utf16_order(a, b));
    write_entries(sink, entries.into_iter())
}

fn utf16_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

fn write_entries<'a>(
    sink: &mut impl Sink,
    entries: impl Iterator<Item = (&'a String, &'a Value)>,
) -> Result<(), Error> {
    sink.put("{");
    for (i, (key, value)) in entries.enumerate() {
        if i > 0 {
            sink.put(",");
        }
        write_string(sink, key);
        sink.put(":");
        write(sink, value)?;
    }
    sink.put("}");
    Ok(())
}

/// RFC 8785 §3.2.2.2: `"` and `\` escaped, control characters as `\b \t \n \f \r` or `\u00xx`
/// (lowercase hex), everything else — `/`, DEL, non-ASCII — written as itself.
pub fn write_string(sink: &mut impl Sink, s: &str) {
    sink.put("\"");
    let mut plain = 0; // where the run of characters written as themselves starts
    for (i, b) in s.bytes().enumerate() {
        let escaped = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0C => "\\f",
            b'\r' => "\\r",
            b if b < b' ' => CONTROL[usize::from(b)],
            _ => continue,
        };
        sink.put(&s[plain..i]);
        sink.put(escaped);
        plain = i + 1;
    }
    sink.put(&s[plain..]);
    sink.put("\"");
}

/// `\u00xx` for each control character (those with a short escape are never looked up here).
const CONTROL: [&str; 32] = [
    "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
    "\\u0008", "\\u0009", "\\u000a", "\\u000b", "\\u000c", "\\u000d", "\\u000e", "\\u000f",
    "\\u0010", "\\u0011", "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017",
    "\\u0018", "\\u0019", "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f",
];

/// Every integer of at most this magnitude is a double exactly, which ECMAScript writes digit for
/// digit.
const EXACT_INTEGERS: u64 = 1 << 53;

fn write_number(sink: &mut impl Sink, n: &Number) -> Result<(), Error> {
    if let Some(u) = n.as_u64().filter(|u| *u <= EXACT_INTEGERS) {
        sink.put(itoa::Buffer::new().format(u));
        return Ok(());
    }
    if let Some(i) = n.as_i64().filter(|i| i.unsigned_abs() <= EXACT_INTEGERS) {
        sink.put(itoa::Buffer::new().format(i));
        return Ok(());
    }
    let Some(f) = n.as_f64() else {
        return Err(Error::InexactNumber(n.to_string()));
    };
    let mut buffer = ryu_js::Buffer::new();
    let text = format_double(&mut buffer, f);
    // An integer must come out with the digits it went in with (see `check_number_token`).
    if (n.is_u64() || n.is_i64()) && Decimal::of(&n.to_string()) != Decimal::of(text) {
        return Err(Error::InexactNumber(n.to_string()));
    }
    sink.put(text);
    Ok(())
}

/// ECMAScript's `Number.prototype.toString` for a finite double.
fn format_double(buffer: &mut ryu_js::Buffer, f: f64) -> &str {
    if f == 0.0 {
        return "0"; // covers -0
    }
    buffer.format_finite(f)
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
    let mut buffer = ryu_js::Buffer::new();
    if is_integer_literal && Decimal::of(token) != Decimal::of(format_double(&mut buffer, parsed)) {
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
