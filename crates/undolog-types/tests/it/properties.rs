//! Property tests: canonical JSON is idempotent and blind to key order; the signature sees every
//! field, and is the hash of the signed object's canonical text however it is written or split.

use proptest::prelude::*;
use serde_json::{Map, Value};
use undolog_types::{Args, CallIdentity, OrgId, SessionId, Signature, canonical};

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-(1i64 << 53)..(1i64 << 53)).prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("\\PC{0,8}", inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

/// The same object with its entries inserted in reverse order, at every level.
fn reversed(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map.iter().rev() {
                out.insert(k.clone(), reversed(v));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(reversed).collect()),
        other => other.clone(),
    }
}

proptest! {
    #[test]
    fn canonical_json_is_idempotent(value in json_value()) {
        let once = canonical::to_string(&value).unwrap();
        let twice = canonical::to_string(&canonical::parse(&once).unwrap()).unwrap();
        prop_assert_eq!(once, twice);
    }

    #[test]
    fn canonical_json_ignores_key_order(value in json_value()) {
        prop_assert_eq!(
            canonical::to_string(&value).unwrap(),
            canonical::to_string(&reversed(&value)).unwrap()
        );
    }

    #[test]
    fn the_signature_changes_when_any_field_changes(
        org in "[a-z]{1,8}", session in "[a-z0-9-]{1,8}", tool in "[a-z_]{1,8}",
        key in "[a-z]{1,4}", n in any::<i32>(), step in proptest::option::of(0u64..1000),
        field in 0usize..6,
    ) {
        let org_id = OrgId::new(org.clone()).unwrap();
        let session_id = SessionId::new(session.clone()).unwrap();
        let args = Args::try_from(serde_json::json!({ key.clone(): n })).unwrap();
        let base = CallIdentity { org: &org_id, session: &session_id, tool: &tool, args: &args, step };

        let other_org = OrgId::new(format!("{org}x")).unwrap();
        let other_session = SessionId::new(format!("{session}x")).unwrap();
        let other_tool = format!("{tool}x");
        let other_args = Args::try_from(serde_json::json!({ key: i64::from(n) + 1 })).unwrap();
        let changed = match field {
            0 => CallIdentity { org: &other_org, ..base.clone() },
            1 => CallIdentity { session: &other_session, ..base.clone() },
            2 => CallIdentity { tool: &other_tool, ..base.clone() },
            3 => CallIdentity { args: &other_args, ..base.clone() },
            4 => CallIdentity { step: Some(step.map_or(0, |s| s + 1)), ..base.clone() },
            _ => CallIdentity { step: if step.is_some() { None } else { Some(0) }, ..base.clone() },
        };
        prop_assert_ne!(base.signature(), changed.signature());
    }

    #[test]
    fn the_signed_text_is_the_signed_objects_canonical_text(
        org in "[a-z]{1,8}", session in "[a-z0-9-]{1,8}", tool in "\\PC{0,8}",
        entries in prop::collection::vec(("\\PC{0,8}", json_value()), 0..6),
        step in proptest::option::of(0u64..=(1 << 53)),
    ) {
        let org = OrgId::new(org).unwrap();
        let session = SessionId::new(session).unwrap();
        let args = Args::try_from(Value::Object(entries.into_iter().collect())).unwrap();
        let identity = CallIdentity { org: &org, session: &session, tool: &tool, args: &args, step };

        let text = canonical::to_string(&identity.signed_object()).unwrap();
        prop_assert_eq!(&identity.canonical(), &text);
        prop_assert_eq!(identity.signature(), Signature::of_canonical(&text));
        let args_text = canonical::to_string(&Value::from(args.clone())).unwrap();
        prop_assert_eq!(args.canonical_len(), args_text.len());
        prop_assert_eq!(args.canonical(), args_text);
    }

    #[test]
    fn text_hashed_in_pieces_hashes_as_the_whole_text(
        pieces in prop::collection::vec(prop_oneof![".{0,8}", ".{900,1100}", ".{2000,2100}"], 0..12),
    ) {
        let mut hashing = canonical::Hashing::default();
        for piece in &pieces {
            canonical::Sink::put(&mut hashing, piece);
        }
        prop_assert_eq!(hashing.finalize(), blake3::hash(pieces.concat().as_bytes()));
    }
}
