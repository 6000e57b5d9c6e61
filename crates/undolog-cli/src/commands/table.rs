//! Aligned text tables for the admin commands, and the few cell formats they share.

use serde_json::Value;

/// Prints a header and rows with columns padded to their widest cell (the last is not padded).
pub(crate) fn print(header: &[&str], rows: &[Vec<String>]) {
    print!("{}", render(header, rows));
}

/// The same on stderr, for commands whose stdout is one value for scripts.
pub(crate) fn print_to_stderr(header: &[&str], rows: &[Vec<String>]) {
    eprint!("{}", render(header, rows));
}

pub(crate) fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  "));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// A string field, or `-` when it is missing or null.
pub(crate) fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// JSON on one line, cut to `max` characters.
pub(crate) fn compact(value: &Value, max: usize) -> String {
    let text = match value {
        Value::Null => return "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.chars().count() <= max {
        text
    } else {
        text.chars().take(max.saturating_sub(1)).collect::<String>() + "…"
    }
}

/// A timestamp (ms since the epoch) as `YYYY-MM-DD HH:MM:SS` UTC.
pub(crate) fn time(value: &Value) -> String {
    let Some(ms) = value.as_i64() else {
        return "-".into();
    };
    // RFC 3339 to the millisecond, cut to the second, with a space for the `T`.
    let rfc3339 = undolog_types::Timestamp(ms).to_string();
    rfc3339[..19].replacen('T', " ", 1)
}

/// From `start` to `end` (ms), as `12 ms` or `1.5 s`; `-` while not finished.
pub(crate) fn duration(start: &Value, end: &Value) -> String {
    match (start.as_i64(), end.as_i64()) {
        (Some(start), Some(end)) if end - start < 1000 => format!("{} ms", end - start),
        (Some(start), Some(end)) => format!("{:.1} s", (end - start) as f64 / 1000.0),
        _ => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn columns_line_up_and_times_are_utc() {
        let rows = vec![
            vec!["s-1".into(), "active".into()],
            vec!["longer-id".into(), "compensated".into()],
        ];
        assert_eq!(
            render(&["SESSION", "STATE"], &rows),
            "SESSION    STATE\ns-1        active\nlonger-id  compensated\n"
        );
        assert_eq!(time(&json!(0)), "1970-01-01 00:00:00");
        assert_eq!(time(&json!(1_796_041_525_000_i64)), "2026-11-30 12:25:25");
        assert_eq!(time(&json!(951_782_400_000_i64)), "2000-02-29 00:00:00");
        assert_eq!(duration(&json!(1000), &json!(1012)), "12 ms");
        assert_eq!(duration(&json!(1000), &json!(2500)), "1.5 s");
        assert_eq!(duration(&json!(1000), &Value::Null), "-");
        assert_eq!(compact(&json!({"a": "bcdef"}), 8), "{\"a\":\"b…");
    }
}
