//! API keys: found by their hash alone, listed, and revoked.

use super::*;

pub async fn api_keys_are_found_by_hash_only(store: Arc<dyn Store>) {
    assert!(!store.has_api_keys().await.unwrap());
    let key = ApiKey {
        id: "key_1".into(),
        org: org("acme"),
        hash: "ab".repeat(32),
        role: Role::Approver,
        label: Some("ci".into()),
        created_at: Timestamp(7),
        revoked_at: None,
    };
    store.insert_api_key(&key).await.unwrap();
    assert!(store.has_api_keys().await.unwrap());
    assert_eq!(
        store.api_key_by_hash(&key.hash).await.unwrap(),
        Some(key.clone())
    );
    assert_eq!(store.api_key_by_hash(&"cd".repeat(32)).await.unwrap(), None);
    let same_hash = ApiKey {
        id: "key_2".into(),
        ..key.clone()
    };
    assert!(matches!(
        store.insert_api_key(&same_hash).await,
        Err(Error::AlreadyExists(_))
    ));
}

pub async fn api_keys_are_listed_and_revoked(store: Arc<dyn Store>) {
    let key = |id: &str, org_name: &str, role: Role, at: i64| ApiKey {
        id: id.into(),
        org: org(org_name),
        hash: blake3_like(id),
        role,
        label: None,
        created_at: Timestamp(at),
        revoked_at: None,
    };
    let (a1, a2, b1) = (
        key("a1", "acme", Role::Agent, 1),
        key("a2", "acme", Role::Admin, 2),
        key("b1", "beta", Role::Approver, 3),
    );
    for k in [&a1, &a2, &b1] {
        store.insert_api_key(k).await.unwrap();
    }
    let ids = |keys: Vec<ApiKey>| keys.into_iter().map(|k| k.id).collect::<Vec<_>>();
    assert_eq!(ids(store.api_keys(None).await.unwrap()), ["a1", "a2", "b1"]);
    assert_eq!(
        ids(store.api_keys(Some(&org("acme"))).await.unwrap()),
        ["a1", "a2"]
    );

    let revoked = store.revoke_api_key("a1", Timestamp(50)).await.unwrap();
    assert_eq!(revoked.unwrap().revoked_at, Some(Timestamp(50)));
    // Revoking again keeps the first time; the lookup by hash shows the revocation.
    let again = store.revoke_api_key("a1", Timestamp(60)).await.unwrap();
    assert_eq!(again.unwrap().revoked_at, Some(Timestamp(50)));
    let found = store.api_key_by_hash(&a1.hash).await.unwrap().unwrap();
    assert_eq!(found.revoked_at, Some(Timestamp(50)));
    assert_eq!(found.role, Role::Agent);
    assert_eq!(
        store.revoke_api_key("nope", Timestamp(70)).await.unwrap(),
        None
    );
    // A revoked key still counts: revoking every key never opens the gateway.
    store.revoke_api_key("a2", Timestamp(80)).await.unwrap();
    store.revoke_api_key("b1", Timestamp(80)).await.unwrap();
    assert!(store.has_api_keys().await.unwrap());
}

/// A stand-in hash of 64 hex digits, distinct per id.
fn blake3_like(id: &str) -> String {
    format!(
        "{:0>64}",
        id.bytes().map(|b| format!("{b:02x}")).collect::<String>()
    )
}
