//! Values written into SQL text as literals. A transaction's statements travel together in
//! simple-protocol messages (see `tx`), which carry no bound parameters, so the values go into the
//! text itself, quoted by `postgres-protocol` (the rust-postgres project's protocol crate).

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
pub(super) fn render(sql: &str, values: &[Value<'_>]) -> Result<String> {
    let mut out = String::with_capacity(sql.len() + 16 * values.len());
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
            Value::Text(Some(text)) if text.contains('\0') => {
                return Err(Error::Unstorable("a NUL character (U+0000) in text"));
            }
            Value::Text(Some(text)) => {
                out.push_str(&postgres_protocol::escape::escape_literal(text))
            }
            Value::Int(Some(int)) => out.push_str(&int.to_string()),
            Value::Text(None) | Value::Int(None) => out.push_str("NULL"),
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    Ok(out)
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

    #[test]
    fn a_missing_value_or_a_nul_is_an_error_not_sql() {
        assert!(render("SELECT $2", &["one".into()]).is_err());
        assert!(render("SELECT $0", &["one".into()]).is_err());
        assert!(render("SELECT $1", &["a\0b".into()]).is_err());
    }
}
