//! Row-level security: the application role sees and writes only the org its transaction names,
//! whatever SQL it runs, and reaches API keys only one exact hash at a time.

use serde_json::json;
use sqlx::{Connection, PgConnection, Row};
use undolog_store::{ApiKey, Approval, Effect, Error, PostgresStore, Session, Snapshot, Store};
use undolog_types::{
    ApprovalId, ApprovalState, Args, CallIdentity, EffectId, EffectState, OrgId, Role, SessionId,
    SessionState, Tier, Timestamp,
};

use super::TestDb;

const ORG_TABLES: [&str; 4] = ["sessions", "effects", "approvals", "session_snapshots"];

/// One row in every org table for `org`, written through the store; returns the effect and the
/// approval.
async fn seed(store: &PostgresStore, org: &str) -> (Effect, Approval) {
    let org = OrgId::new(org).unwrap();
    let session = SessionId::new("s1").unwrap();
    let args = Args::try_from(json!({"to": "bob"})).unwrap();
    let signature = CallIdentity {
        org: &org,
        session: &session,
        tool: "send",
        args: &args,
        step: None,
    }
    .signature();
    let effect = Effect {
        id: EffectId::generate(),
        org: org.clone(),
        session: session.clone(),
        seq: 0,
        tool: "send".into(),
        args,
        step: None,
        signature: signature.clone(),
        idempotency_key: None,
        tier: Tier::Irreversible,
        compensation: None,
        state: EffectState::AwaitingApproval,
        result: None,
        error: None,
        verdicts: None,
        approval: None,
        lease: None,
        lease_token: None,
        created_at: Timestamp(1),
        updated_at: Timestamp(1),
        completed_at: None,
        resolved_by: None,
    };
    let approval = Approval {
        id: ApprovalId::generate(),
        org: org.clone(),
        session: session.clone(),
        effect: effect.id,
        signature,
        state: ApprovalState::Pending,
        requested_at: Timestamp(1),
        expires_at: Timestamp(60_001),
        requested_by: None,
        decided_by: None,
        decided_via: None,
        decided_at: None,
        reason: None,
    };
    let mut tx = store.begin(&org).await.unwrap();
    tx.put_session(&Session {
        org: org.clone(),
        id: session.clone(),
        state: SessionState::Active,
        next_seq: 1,
        failed_effect: None,
        undo_claim: None,
        run_of: None,
        opened_by: None,
        created_at: Timestamp(1),
        updated_at: Timestamp(1),
    })
    .await
    .unwrap();
    tx.insert_effect(&effect).await.unwrap();
    tx.insert_approval(&approval).await.unwrap();
    tx.push_undo(&session, effect.id, Timestamp(2))
        .await
        .unwrap();
    tx.insert_snapshot(&Snapshot {
        org: org.clone(),
        session,
        taken_at: Timestamp(3),
        body: json!({"effects": 1}),
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
    (effect, approval)
}

/// A raw connection as the application role, with `org` set for the whole session, as a
/// hand-written query of a compromised or buggy application would run.
async fn as_app_role(db: &TestDb, org: &str) -> PgConnection {
    let mut conn = db.owner().await;
    sqlx::query("SET ROLE undolog_app")
        .execute(&mut conn)
        .await
        .unwrap();
    set_org(&mut conn, org).await;
    conn
}

async fn set_org(conn: &mut PgConnection, org: &str) {
    sqlx::query("SELECT set_config('app.org_id', $1, false)")
        .bind(org)
        .execute(conn)
        .await
        .unwrap();
}

async fn count(conn: &mut PgConnection, table: &str) -> i64 {
    sqlx::query(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
        .fetch_one(conn)
        .await
        .unwrap()
        .get(0)
}

/// The SQLSTATE a statement failed with.
async fn refused(conn: &mut PgConnection, sql: &'static str) -> String {
    let err = sqlx::query(sql).execute(conn).await.unwrap_err();
    let code = err
        .as_database_error()
        .and_then(|db| db.code())
        .map(|c| c.into_owned());
    code.unwrap_or_else(|| panic!("{sql}: not a database error: {err}"))
}

#[tokio::test]
async fn the_application_role_reads_only_the_org_it_names_whatever_the_sql() {
    let db = TestDb::create().await;
    let store = db.open().await;
    seed(&store, "orgA").await;

    let mut conn = as_app_role(&db, "orgB").await;
    for table in ORG_TABLES {
        assert_eq!(count(&mut conn, table).await, 0, "orgB sees orgA's {table}");
    }
    let named: i64 = sqlx::query("SELECT count(*) FROM effects WHERE org = 'orgA'")
        .fetch_one(&mut conn)
        .await
        .unwrap()
        .get(0);
    assert_eq!(named, 0, "naming the other org in the query does not help");

    // No org at all sees nothing either.
    set_org(&mut conn, "").await;
    for table in ORG_TABLES {
        assert_eq!(count(&mut conn, table).await, 0, "no org sees {table}");
    }

    // The rows are there, and the same role sees them under their own org.
    set_org(&mut conn, "orgA").await;
    for table in ORG_TABLES {
        assert_eq!(
            count(&mut conn, table).await,
            1,
            "orgA sees its own {table}"
        );
    }
    conn.close().await.unwrap();
}

#[tokio::test]
async fn the_application_role_cannot_write_another_orgs_rows() {
    let db = TestDb::create().await;
    let store = db.open().await;
    seed(&store, "orgA").await;
    let mut conn = as_app_role(&db, "orgB").await;

    // 42501: "new row violates row-level security policy".
    let code = refused(
        &mut conn,
        "INSERT INTO sessions (org, id, state, next_seq, created_at, updated_at) \
         VALUES ('orgA', 'planted', 'active', 0, 0, 0)",
    )
    .await;
    assert_eq!(code, "42501");
    let code = refused(
        &mut conn,
        "INSERT INTO api_keys (id, org, hash, created_at) VALUES ('k', 'orgA', 'h', 0)",
    )
    .await;
    assert_eq!(code, "42501", "a key for another org");

    let changed = sqlx::query("UPDATE effects SET state = 'committed'")
        .execute(&mut conn)
        .await
        .unwrap()
        .rows_affected();
    assert_eq!(changed, 0, "orgB's UPDATE reaches no orgA row");

    // The log is never deleted from by the application, whatever the org.
    assert_eq!(refused(&mut conn, "DELETE FROM effects").await, "42501");
    set_org(&mut conn, "orgA").await;
    let moved = refused(&mut conn, "UPDATE effects SET org = 'orgB'").await;
    assert_eq!(moved, "42501", "a row cannot be moved to another org");
    assert_eq!(refused(&mut conn, "DELETE FROM sessions").await, "42501");
    assert_eq!(refused(&mut conn, "TRUNCATE effects").await, "42501");
    conn.close().await.unwrap();

    let mut owner = db.owner().await;
    let states: Vec<String> = sqlx::query_scalar("SELECT state FROM effects")
        .fetch_all(&mut owner)
        .await
        .unwrap();
    assert_eq!(states, vec!["awaiting_approval".to_owned()]);
}

#[tokio::test]
async fn api_keys_are_reachable_only_one_exact_hash_at_a_time() {
    let db = TestDb::create().await;
    let store = db.open().await;
    let key = ApiKey {
        id: "key_a".into(),
        org: OrgId::new("orgA").unwrap(),
        hash: "ab".repeat(32),
        role: Role::Agent,
        label: None,
        created_at: Timestamp(1),
        revoked_at: None,
    };
    store.insert_api_key(&key).await.unwrap();

    let mut conn = as_app_role(&db, "orgA").await;
    // Not even its own org's keys can be listed, nor any key revoked (or promoted).
    assert_eq!(refused(&mut conn, "SELECT * FROM api_keys").await, "42501");
    assert_eq!(
        refused(&mut conn, "UPDATE api_keys SET role = 'admin'").await,
        "42501"
    );
    let found: Vec<String> = sqlx::query_scalar("SELECT org FROM undolog_api_key_by_hash($1)")
        .bind(&key.hash)
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(found, vec!["orgA".to_owned()]);
    for guess in ["", "%", "ab"] {
        let rows = sqlx::query("SELECT org FROM undolog_api_key_by_hash($1)")
            .bind(guess)
            .fetch_all(&mut conn)
            .await
            .unwrap();
        assert!(rows.is_empty(), "{guess:?} is no hash");
    }
    conn.close().await.unwrap();
}

#[tokio::test]
async fn an_org_cannot_reach_another_orgs_records_through_the_store() {
    let db = TestDb::create().await;
    let store = db.open().await;
    let (effect, mut approval) = seed(&store, "orgA").await;
    let b = OrgId::new("orgB").unwrap();

    let mut tx = store.begin(&b).await.unwrap();
    assert_eq!(tx.effect(effect.id).await.unwrap(), None);
    assert_eq!(tx.approval(approval.id).await.unwrap(), None);
    assert_eq!(tx.session(&effect.session).await.unwrap(), None);
    assert!(tx.snapshots(&effect.session).await.unwrap().is_empty());
    assert!(tx.undo_stack(&effect.session).await.unwrap().is_empty());
    approval.state = ApprovalState::Approved;
    approval.decided_by = Some("mallory".into());
    // The write is refused when it reaches the server, with the commit at the latest.
    let err = match tx.update_approval(&approval).await {
        Err(e) => e,
        Ok(()) => tx.commit().await.unwrap_err(),
    };
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");

    let mut tx = store.begin(&OrgId::new("orgA").unwrap()).await.unwrap();
    let stored = tx.approval(approval.id).await.unwrap().unwrap();
    assert_eq!(
        stored.state,
        ApprovalState::Pending,
        "orgB's decision did not land"
    );
}

/// An undo entry is a column of its effect, so an org cannot push another org's effect onto a
/// stack of its own: the push finds no such effect, the transaction is refused, and the other
/// org's entry is as it was.
#[tokio::test]
async fn an_org_cannot_push_another_orgs_effect_onto_an_undo_stack() {
    let db = TestDb::create().await;
    let store = db.open().await;
    let (effect, _) = seed(&store, "orgA").await;
    let b = OrgId::new("orgB").unwrap();

    let mut tx = store.begin(&b).await.unwrap();
    tx.push_undo(&effect.session, effect.id, Timestamp(5))
        .await
        .unwrap();
    let err = tx.commit().await.unwrap_err();
    assert!(
        matches!(&err, Error::NotFound { what: "effect", id } if *id == effect.id.to_string()),
        "{err:?}"
    );

    let mut tx = store.begin(&b).await.unwrap();
    assert!(tx.undo_stack(&effect.session).await.unwrap().is_empty());
    let mut tx = store.begin(&OrgId::new("orgA").unwrap()).await.unwrap();
    assert_eq!(tx.undo_stack(&effect.session).await.unwrap(), [effect.id]);
    let pushed_at: Option<i64> = sqlx::query_scalar("SELECT undo_pushed_at FROM effects")
        .fetch_one(&mut db.owner().await)
        .await
        .unwrap();
    assert_eq!(pushed_at, Some(2), "pushed when orgA pushed it");
}

#[tokio::test]
async fn every_org_table_forces_row_level_security_and_is_not_owned_by_the_application() {
    let db = TestDb::create().await;
    drop(db.open().await);
    let mut owner = db.owner().await;
    let tables = sqlx::query(
        "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, r.rolname \
         FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner \
         WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace \
         ORDER BY c.relname",
    )
    .fetch_all(&mut owner)
    .await
    .unwrap();
    let app_may_touch_executors: bool = sqlx::query_scalar(
        "SELECT has_table_privilege($1, 'executors', 'SELECT, INSERT, UPDATE, DELETE')",
    )
    .bind(PostgresStore::APP_ROLE)
    .fetch_one(&mut owner)
    .await
    .unwrap();
    let mut with_org = Vec::new();
    for row in &tables {
        let name: String = row.get(0);
        let owner: String = row.get(3);
        assert_ne!(
            owner,
            PostgresStore::APP_ROLE,
            "{name} is owned by the application"
        );
        if name == "executors" {
            // No org data; the application role may not touch it at all.
            assert!(
                !app_may_touch_executors,
                "the application role may touch executors"
            );
        } else if name != "schema_migrations" {
            assert!(
                row.get::<bool, _>(1) && row.get::<bool, _>(2),
                "{name}: RLS not forced"
            );
            with_org.push(name);
        }
    }
    assert_eq!(
        with_org,
        [
            "api_keys",
            "approvals",
            "effects",
            "session_snapshots",
            "sessions"
        ]
    );
}

/// The store's own queries also say `WHERE org = …`, so only an extra policy shows whether they
/// run under row-level security at all: the test adds one that hides a session from the
/// application role. Run as the connecting superuser, the store would still see it.
#[tokio::test]
async fn store_transactions_run_as_the_application_role() {
    let db = TestDb::create().await;
    let store = db.open().await;
    let org = OrgId::new("orgA").unwrap();
    let mut tx = store.begin(&org).await.unwrap();
    for id in ["shown", "hidden"] {
        tx.put_session(&Session {
            org: org.clone(),
            id: SessionId::new(id).unwrap(),
            state: SessionState::Active,
            next_seq: 0,
            failed_effect: None,
            undo_claim: None,
            run_of: None,
            opened_by: None,
            created_at: Timestamp(1),
            updated_at: Timestamp(1),
        })
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();

    let mut owner = db.owner().await;
    sqlx::query(
        "CREATE POLICY hide_one ON sessions AS RESTRICTIVE TO undolog_app USING (id <> 'hidden')",
    )
    .execute(&mut owner)
    .await
    .unwrap();

    let mut tx = store.begin(&org).await.unwrap();
    let ids: Vec<String> = tx
        .sessions()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id.as_str().to_owned())
        .collect();
    assert_eq!(ids, vec!["shown".to_owned()]);
}

/// On a managed PostgreSQL the owner is no superuser, so the forced policies bind it too: the
/// store must still work, API keys included (their functions run as the owner).
#[tokio::test]
async fn an_owner_that_is_no_superuser_runs_the_store_under_the_same_policies() {
    let db = TestDb::create_owned_by_new_role("CREATEROLE").await;
    let store = db.open().await;
    let (effect, _) = seed(&store, "orgA").await;
    let key = ApiKey {
        id: "key_a".into(),
        org: OrgId::new("orgA").unwrap(),
        hash: "cd".repeat(32),
        role: Role::Admin,
        label: Some("ci".into()),
        created_at: Timestamp(1),
        revoked_at: None,
    };
    store.insert_api_key(&key).await.unwrap();
    assert!(store.has_api_keys().await.unwrap());
    assert_eq!(
        store.api_key_by_hash(&key.hash).await.unwrap(),
        Some(key.clone())
    );
    assert_eq!(store.api_keys(None).await.unwrap(), vec![key.clone()]);
    let revoked = store.revoke_api_key(&key.id, Timestamp(2)).await.unwrap();
    assert_eq!(revoked.and_then(|k| k.revoked_at), Some(Timestamp(2)));
    let mut tx = store.begin(&OrgId::new("orgA").unwrap()).await.unwrap();
    assert_eq!(
        tx.effect(effect.id).await.unwrap().map(|e| e.id),
        Some(effect.id)
    );
    drop(tx);

    // FORCE: the owner itself, with no org named, sees no org's rows.
    let mut owner = db.owner().await;
    for table in ORG_TABLES {
        assert_eq!(count(&mut owner, table).await, 0, "the owner reads {table}");
    }

    // Except the pending effects of an executor it takes for dead, whose leases it ends.
    let mut tx = store.begin(&OrgId::new("orgA").unwrap()).await.unwrap();
    let mut running = tx.effect(effect.id).await.unwrap().unwrap();
    running.state = EffectState::Pending;
    running.lease = Some(undolog_store::Lease {
        holder: "gw-old".into(),
        expires_at: Timestamp(50_000),
    });
    tx.update_effect(&running).await.unwrap();
    tx.commit().await.unwrap();
    for (executor, at) in [("gw-old", 1_000), ("gw-new", 2_000)] {
        let beat = undolog_store::Beat {
            executor,
            name: "host:8080",
            at: Timestamp(at),
            stale_before: Timestamp(0),
            starting: true,
        };
        store.beat(&beat).await.unwrap();
    }
    let mut tx = store.begin(&OrgId::new("orgA").unwrap()).await.unwrap();
    let lease = tx.effect(effect.id).await.unwrap().unwrap().lease.unwrap();
    assert_eq!(
        lease.expires_at,
        Timestamp(2_000),
        "the dead executor's lease ended"
    );
}

/// Org names go into the transaction's first message as quoted text: names that look like SQL or
/// like a quote must stay names, still see only their own rows, and keep their own API keys.
#[tokio::test]
async fn org_names_that_look_like_sql_or_quotes_stay_names() {
    let db = TestDb::create().await;
    let store = db.open().await;
    let tricky = [
        "o'brien",
        "x'); DROP TABLE effects; --",
        "$undolog_org$'; SELECT 1; --",
        "a$$b\\c",
    ];
    for org in tricky {
        seed(&store, org).await;
    }
    for org in tricky {
        let id = OrgId::new(org).unwrap();
        let mut tx = store.begin(&id).await.unwrap();
        let effects = tx
            .session_effects(&SessionId::new("s1").unwrap())
            .await
            .unwrap();
        assert_eq!(effects.len(), 1, "{org:?} sees exactly its own effect");
        assert_eq!(effects[0].org, id);
    }
    // An API key is written in a transaction of its org too, begun the same way.
    for (n, org) in tricky.into_iter().enumerate() {
        let key = ApiKey {
            id: format!("key_{n}"),
            org: OrgId::new(org).unwrap(),
            hash: format!("{n:02}").repeat(32),
            role: Role::Agent,
            label: None,
            created_at: Timestamp(1),
            revoked_at: None,
        };
        store.insert_api_key(&key).await.unwrap();
        let found = store.api_key_by_hash(&key.hash).await.unwrap().unwrap();
        assert_eq!(found.org, key.org, "{org:?} keeps its key");
    }
}
