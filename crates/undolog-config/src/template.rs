//! Compensation argument templates: JSON whose strings may read the original call.
//!
//! A string that is exactly one placeholder, `"{{args.amount}}"`, becomes the value it names, type
//! and all; placeholders inside longer text are written into the text. Paths start at `args` (the
//! original arguments) or `result` (what the tool returned: its structured content when it has
//! one) and step through object keys and array indices: `{{result.items.0.id}}`.

use serde_json::Value;

/// Renders compensation templates.
#[derive(Debug)]
pub struct Template;

impl Template {
    /// Checks every placeholder's shape without rendering, for configuration errors at start-up.
    pub fn check(template: &Value) -> Result<(), String> {
        walk(template, &mut |text| {
            for (_, path) in placeholders(text)? {
                root_of(path)?;
            }
            Ok(())
        })
    }

    /// Fills the template from the original call.
    pub fn render(template: &Value, args: &Value, result: &Value) -> Result<Value, String> {
        map(template, &|text| {
            let found = placeholders(text)?;
            let lookup = |path: &str| -> Result<&Value, String> {
                let (root, rest) = root_of(path)?;
                let start = if root == "args" { args } else { result };
                rest.iter()
                    .try_fold(start, |at, step| step_into(at, step))
                    .ok_or_else(|| format!("{{{{{path}}}}} names nothing in the original call"))
            };
            if let [(raw, path)] = found.as_slice()
                && text.trim() == *raw
            {
                return lookup(path).cloned();
            }
            let mut out = text.to_owned();
            for (raw, path) in found {
                let value = lookup(path)?;
                let shown = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                out = out.replace(raw, &shown);
            }
            Ok(Value::String(out))
        })
    }
}

/// The `{{…}}` placeholders in one string: each as written, and its trimmed path.
fn placeholders(text: &str) -> Result<Vec<(&str, &str)>, String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("{text:?} opens {{{{ without closing }}}}"))?;
        found.push((&rest[start..start + 2 + end + 2], after[..end].trim()));
        rest = &after[end + 2..];
    }
    Ok(found)
}

fn root_of(path: &str) -> Result<(&str, Vec<&str>), String> {
    let mut steps = path.split('.');
    let root = steps.next().unwrap_or_default();
    if root != "args" && root != "result" {
        return Err(format!(
            "{{{{{path}}}}} must start with args. or result., such as {{{{args.amount}}}}"
        ));
    }
    Ok((root, steps.collect()))
}

fn step_into<'v>(at: &'v Value, step: &str) -> Option<&'v Value> {
    match at {
        Value::Object(map) => map.get(step),
        Value::Array(items) => step.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    }
}

fn walk(value: &Value, visit: &mut impl FnMut(&str) -> Result<(), String>) -> Result<(), String> {
    match value {
        Value::String(s) => visit(s),
        Value::Array(items) => items.iter().try_for_each(|v| walk(v, visit)),
        Value::Object(map) => map.values().try_for_each(|v| walk(v, visit)),
        _ => Ok(()),
    }
}

fn map(value: &Value, f: &impl Fn(&str) -> Result<Value, String>) -> Result<Value, String> {
    Ok(match value {
        Value::String(s) => f(s)?,
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| map(v, f)).collect::<Result<_, _>>()?)
        }
        Value::Object(obj) => Value::Object(
            obj.iter()
                .map(|(k, v)| Ok((k.clone(), map(v, f)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Template;

    #[test]
    fn whole_placeholders_keep_their_type_and_text_ones_interpolate() {
        let template = json!({
            "from": "{{args.to}}",
            "amount": "{{ args.amount }}",
            "memo": "undo of {{result.id}} ({{args.amount}})",
            "first": "{{result.items.0}}",
            "fixed": 7
        });
        let args = json!({"to": "bob", "amount": 10});
        let result = json!({"id": "tx-9", "items": ["a", "b"]});
        assert_eq!(
            Template::render(&template, &args, &result).unwrap(),
            json!({"from": "bob", "amount": 10, "memo": "undo of tx-9 (10)", "first": "a", "fixed": 7})
        );
    }

    #[test]
    fn bad_templates_say_what_is_wrong() {
        for (template, expected) in [
            (json!({"a": "{{args.x"}), "without closing"),
            (json!(["{{env.HOME}}"]), "must start with args. or result."),
        ] {
            let error = Template::check(&template).unwrap_err();
            assert!(error.contains(expected), "{error}");
        }
        let error =
            Template::render(&json!("{{args.missing}}"), &json!({}), &json!({})).unwrap_err();
        assert!(error.contains("names nothing"), "{error}");
    }
}
