//! Values written into SQL text as literals. A transaction's statements travel together in
//! simple-protocol messages (see `tx`), which carry no bound parameters, so the values go into the
//! text itself, quoted as `postgres-protocol` (the rust-postgres project's protocol crate) quotes
//! them (`push_text`).

use crate::{Error, Result};

/// One value for a `$n` placeholder.
#[derive(Debug, Clone, Copy)]
pub(super) enum Value<'a> {
    Text(Option<&'a str>),
    Int(Option<i64>),
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(text: &'a str) -> Value<'a> {
        Value::Text(Some(text))
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(text: &'a String) -> Value<'a> {
        Value::Text(Some(text))
    }
}

impl<'a> From<Option<&'a str>> for Value<'a> {
    fn from(text: Option<&'a str>) -> Value<'a> {
        Value::Text(text)
    }
}

impl From<i64> for Value<'_> {
    fn from(int: i64) -> Self {
        Value::Int(Some(int))
    }
}

impl From<Option<i64>> for Value<'_> {
    fn from(int: Option<i64>) -> Self {
        Value::Int(int)
    }
}

/// `sql` with each `$n` replaced by the n-th value (from 1) as a literal. `sql` is the store's own
/// text, which holds `$` only in placeholders; the values may hold anything but a NUL character,
/// which PostgreSQL cannot store in text.
///
/// Every call's writes go through here (a new effect's function call carries its arguments and
/// result as text), so the text is written once, into a string sized for all of it.
pub(super) fn render(sql: &str, values: &[Value<'_>]) -> Result<String> {
    let mut out = String::with_capacity(sql.len() + values.iter().map(Value::room).sum::<usize>());
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let value = tail[..digits]
            .parse::<usize>()
            .ok()
            .and_then(|n| values.get(n.checked_sub(1)?))
            .ok_or_else(|| {
                Error::Corrupt(format!(
                    "the statement {sql:?} names a value it was not given"
                ))
            })?;
        match value {
            Value::Text(Some(text)) => push_text(&mut out, text)?,
            Value::Int(Some(int)) => out.push_str(itoa::Buffer::new().format(*int)),
            Value::Text(None) | Value::Int(None) => out.push_str("NULL"),
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    Ok(out)
}

impl Value<'_> {
    /// About what the value takes in the text: its length and its quotes, or an integer's digits.
    fn room(&self) -> usize {
        match self {
            Value::Text(Some(text)) => text.len() + 3,
            Value::Text(None) | Value::Int(_) => 20,
        }
    }
}

/// `text` as a literal, as `postgres-protocol` (the rust-postgres project's protocol crate) quotes
/// it, written in place: between single quotes, each quote and backslash doubled, and after ` E`
/// when it holds a backslash, so that it reads the same whatever `standard_conforming_strings`
/// says. That crate's `escape_literal` returns a new string built a character at a time; a call's
/// arguments and result pass through here at every write, so runs between the characters to
/// double are copied whole, found by `memchr`. A property test holds the two to the same text.
fn push_text(out: &mut String, text: &str) -> Result<()> {
    let bytes = text.as_bytes();
    if memchr::memchr(0, bytes).is_some() {
        return Err(Error::Unstorable("a NUL character (U+0000) in text"));
    }
    out.push_str(if memchr::memchr(b'\\', bytes).is_some() {
        " E'"
    } else {
        "'"
    });
    let mut plain = 0;
    for at in memchr::memchr2_iter(b'\'', b'\\', bytes) {
        // Quotes and backslashes are ASCII, so `at` is a character boundary.
        out.push_str(&text[plain..=at]);
        out.push(char::from(bytes[at]));
        plain = at + 1;
    }
    out.push_str(&text[plain..]);
    out.push('\'');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Value, render};

    #[test]
    fn placeholders_become_literals_and_values_stay_values() {
        let mut values: Vec<Value<'_>> = vec![
            "it's".into(),
            r"back\slash $1".into(),
            Value::Text(None),
            (-7_i64).into(),
        ];
        values.extend(["filler"; 5].map(Value::from));
        values.push(Some(42_i64).into());
        let sql = render("SELECT $1, $2, $3, $10, $4", &values).unwrap();
        assert_eq!(sql, r"SELECT 'it''s',  E'back\\slash $1', NULL, 42, -7");
    }

    proptest::proptest! {
        /// Whatever the text, its literal is the one `postgres-protocol` quotes it as; an integer
        /// is its digits.
        #[test]
        fn a_literal_is_the_protocol_crates_quoting_of_its_text(
            text in "[a-z '\\\\\"$é😀\\x01-\\x1f]{0,40}",
            any in "[^\\x00]{0,40}",
            plain in "[a-z0-9 {}\":,.-]{0,40}",
            int: i64,
        ) {
            let values = [text.as_str().into(), any.as_str().into(), plain.as_str().into(), int.into()];
            let sql = render("SELECT $1, $2, $3, $4", &values).unwrap();
            let expected = format!(
                "SELECT {}, {}, {}, {int}",
                postgres_protocol::escape::escape_literal(&text),
                postgres_protocol::escape::escape_literal(&any),
                postgres_protocol::escape::escape_literal(&plain),
            );
            proptest::prop_assert_eq!(sql, expected);
        }
    }

    #[test]
    fn a_missing_value_or_a_nul_is_an_error_not_sql() {
        assert!(render("SELECT $2", &["one".into()]).is_err());
        assert!(render("SELECT $0", &["one".into()]).is_err());
        assert!(render("SELECT $1", &["a\0b".into()]).is_err());
    }
}
