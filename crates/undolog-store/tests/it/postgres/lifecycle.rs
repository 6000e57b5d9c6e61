//! Opening a PostgreSQL store: migrations shared by several processes, a schema newer than the
//! binary, a server that does not answer, store URLs.

use std::time::Duration;

use sqlx::Row;
use undolog_store::{EffectLookup, Error, PostgresOptions, PostgresStore, Store, StoreUrl};
use undolog_types::{EffectId, OrgId, Signature, Timestamp};

use super::TestDb;

#[tokio::test]
async fn stores_opening_together_migrate_the_database_once() {
    let db = TestDb::create().await;
    let (a, b, c) = tokio::join!(
        PostgresStore::open(db.options()),
        PostgresStore::open(db.options()),
        PostgresStore::open(db.options()),
    );
    for store in [a, b, c] {
        assert_eq!(
            store.unwrap().schema_version().await.unwrap(),
            PostgresStore::SCHEMA_VERSION
        );
    }
    // And once more, later: nothing left to do.
    let again = db.open().await;
    assert_eq!(
        again.schema_version().await.unwrap(),
        PostgresStore::SCHEMA_VERSION
    );
    let mut owner = db.owner().await;
    let versions: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM schema_migrations ORDER BY version")
            .fetch_all(&mut owner)
            .await
            .unwrap();
    assert_eq!(
        versions,
        (1..=PostgresStore::SCHEMA_VERSION).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn databases_of_one_cluster_migrate_at_the_same_time() {
    // The application role is shared by the whole cluster: each migration creates it if missing.
    let (one, two) = tokio::join!(TestDb::create(), TestDb::create());
    let (a, b) = tokio::join!(
        PostgresStore::open(one.options()),
        PostgresStore::open(two.options())
    );
    a.unwrap();
    b.unwrap();
}

#[tokio::test]
async fn a_schema_newer_than_the_binary_stops_start_up() {
    let db = TestDb::create().await;
    db.open().await.close().await;
    let mut owner = db.owner().await;
    sqlx::query("INSERT INTO schema_migrations (version, applied_at) VALUES (99, 0)")
        .execute(&mut owner)
        .await
        .unwrap();
    let err = PostgresStore::open(db.options()).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::SchemaTooNew {
                found: 99,
                supported: PostgresStore::SCHEMA_VERSION
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("upgrade undolog"), "{err}");
}

#[tokio::test]
async fn a_server_that_does_not_answer_is_reported_with_what_to_check() {
    // A port nobody listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://undolog:hunter2@127.0.0.1:{port}/undolog");
    let options = PostgresOptions {
        acquire_timeout: Duration::from_secs(5),
        ..PostgresOptions::new(&url)
    };
    let err = PostgresStore::open(options).await.unwrap_err();
    assert!(matches!(err, Error::Open { .. }), "{err:?}");
    let message = err.to_string();
    for expected in [
        format!("postgres://undolog:***@127.0.0.1:{port}/undolog"),
        "could not connect to PostgreSQL".to_owned(),
        "check that the server is running".to_owned(),
    ] {
        assert!(
            message.contains(&expected),
            "{expected:?} missing from: {message}"
        );
    }
    assert!(
        !message.contains("hunter2"),
        "the password leaked: {message}"
    );
}

#[tokio::test]
async fn a_postgres_url_opens_the_postgres_backend() {
    let db = TestDb::create().await;
    let other_scheme = db.url.replacen("postgres://", "postgresql://", 1);
    for url in [db.url.clone(), other_scheme] {
        let parsed: StoreUrl = url.parse().unwrap();
        assert_eq!(parsed, StoreUrl::Postgres(url.clone()));
        let store = undolog_store::open(&parsed).await.unwrap();
        assert_eq!(store.backend(), "postgres");
        assert!(!store.has_api_keys().await.unwrap());
    }
}

#[test]
fn postgres_urls_hide_their_password_and_say_what_to_write() {
    let url: StoreUrl = "postgresql://app:s3cret@db:5432/log".parse().unwrap();
    assert_eq!(
        format!("{url:?}"),
        r#"Postgres("postgresql://app:***@db:5432/log")"#
    );
    let err = "postgres://".parse::<StoreUrl>().unwrap_err().to_string();
    assert!(
        err.contains("write postgres://USER@HOST:PORT/DATABASE"),
        "{err}"
    );
    let err = "mysql://x".parse::<StoreUrl>().unwrap_err().to_string();
    assert!(err.contains("postgres://"), "{err}");
}

#[tokio::test]
async fn an_owner_that_cannot_use_the_application_role_is_told_what_to_run() {
    let db = TestDb::create_owned_by_new_role("NOCREATEROLE").await;
    // The migration of another database has already created the role (the suite's first one).
    drop(TestDb::create().await.open().await);
    let err = PostgresStore::open(db.options()).await.unwrap_err();
    assert!(matches!(err, Error::Open { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("GRANT undolog_app TO <user>"), "{message}");

    // Once a superuser has granted the role, the owner migrates and opens the store by itself.
    let role = db.owner_role.clone().unwrap();
    super::admin(format!("GRANT undolog_app TO \"{role}\"")).await;
    let store = PostgresStore::open(db.options()).await.unwrap();
    assert_eq!(
        store.schema_version().await.unwrap(),
        PostgresStore::SCHEMA_VERSION
    );
}

/// On a new database, before any statistics, the plans a connection keeps for its life (foreign-key
/// checks, the conditional writes' functions) must find one effect through an index on what
/// selects it, not scan every effect of the org through an index that merely starts with `org`.
#[tokio::test]
async fn lookups_on_a_new_database_are_planned_on_the_columns_that_select() {
    let db = TestDb::create().await;
    let _store = db.open().await;
    let mut owner = db.owner().await;
    // A generic plan: what a plan made once and kept is, whatever the values.
    sqlx::raw_sql("SET plan_cache_mode = force_generic_plan")
        .execute(&mut owner)
        .await
        .unwrap();
    let lookups = [
        // The check of an undo stack entry's or an approval's reference to its effect.
        (
            "SELECT 1 FROM ONLY effects x WHERE org = $1 AND id = $2 FOR KEY SHARE OF x",
            "id",
        ),
        (
            "SELECT * FROM effects WHERE org = $1 AND signature = $2 ORDER BY seq DESC LIMIT 1",
            "signature",
        ),
        (
            "SELECT * FROM effects WHERE org = $1 AND session = $2 ORDER BY seq",
            "session",
        ),
        (
            "SELECT 1 FROM effects WHERE org = $1 AND idempotency_key = $2 LIMIT 1",
            "idempotency_key",
        ),
    ];
    for (n, (lookup, column)) in lookups.iter().enumerate() {
        let prepare = format!("PREPARE lookup{n}(text, text) AS {lookup}");
        sqlx::raw_sql(sqlx::AssertSqlSafe(prepare))
            .execute(&mut owner)
            .await
            .unwrap();
        let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "EXPLAIN EXECUTE lookup{n}('acme', 'x')"
        )))
        .fetch_all(&mut owner)
        .await
        .unwrap();
        let plan = plan.join("\n");
        assert!(
            plan.contains("Index Cond")
                && plan.contains(&format!("{column} = $2"))
                && !plan.contains("Filter: ("),
            "{lookup}\nis planned as:\n{plan}"
        );
        let cond = plan.lines().find(|l| l.contains("Index Cond")).unwrap();
        assert!(
            cond.contains(&format!("{column} = $2")),
            "{lookup}\nis planned as:\n{plan}"
        );
    }
}

/// No index on effects that a lookup could walk leads with `org`, which narrows nothing: on a tie
/// of costs (a table of a page or two) the planner may take such an index for a lookup by
/// signature, and a plan kept from then reads every effect of the org. Partial indexes, which a
/// lookup by signature or by id cannot use, may.
#[tokio::test]
async fn no_index_a_lookup_of_effects_could_walk_leads_with_the_org() {
    let db = TestDb::create().await;
    let _store = db.open().await;
    let mut owner = db.owner().await;
    let leading_with_org: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] \
         WHERE i.indrelid = 'effects'::regclass AND a.attname = 'org' AND i.indpred IS NULL",
    )
    .fetch_all(&mut owner)
    .await
    .unwrap();
    assert!(leading_with_org.is_empty(), "{leading_with_org:?}");
}

/// A plan a connection keeps (a function's statements, a foreign-key check) is made once, on the
/// table as it is then. Made on a log of a few effects that autovacuum had just analyzed, it must
/// still find one effect through an index once the log has grown, not read every effect: the
/// earlier-effect check of a new call and the outcome of an effect written on it as read, here.
#[tokio::test]
async fn plans_kept_from_a_small_analyzed_log_still_find_one_effect_through_an_index() {
    plans_kept_from_a_small_log_still_find_one_effect_through_an_index(true).await;
}

/// The same, with plans made before any statistics of the log: the planner's defaults take an
/// org for a few rows, and a plan that reads them all first must not be the one kept.
#[tokio::test]
async fn plans_kept_from_a_small_log_never_analyzed_still_find_one_effect_through_an_index() {
    plans_kept_from_a_small_log_still_find_one_effect_through_an_index(false).await;
}

async fn plans_kept_from_a_small_log_still_find_one_effect_through_an_index(analyzed: bool) {
    const SMALL: usize = 20;
    const GROWN: usize = 20_000;
    const LOOKUPS: usize = 20;
    let db = TestDb::create().await;
    // One connection, so that the plans made on the small log are the ones used on the grown one.
    let store = PostgresStore::open(PostgresOptions {
        max_connections: 1,
        ..db.options()
    })
    .await
    .unwrap();
    let mut owner = db.owner().await;
    let add_effects = |from: usize, to: usize| {
        format!(
            "INSERT INTO effects (id, org, session, seq, tool, args, signature, tier, state, \
             created_at, updated_at) SELECT gen_random_uuid()::text, 'acme', 's1', g, 'transfer', \
             '{{}}', encode(sha256(g::text::bytea), 'hex'), 'compensable', 'committed', g, g \
             FROM generate_series({from}, {to}) g"
        )
    };
    let mut setup = vec![
        "INSERT INTO sessions (org, id, state, next_seq, created_at, updated_at) \
         VALUES ('acme', 's1', 'active', 0, 0, 0)"
            .to_owned(),
        add_effects(1, SMALL),
    ];
    if analyzed {
        setup.push("ANALYZE effects".to_owned());
    }
    for sql in setup {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut owner)
            .await
            .unwrap();
    }
    let ids: Vec<EffectId> = sqlx::query("SELECT id FROM effects ORDER BY seq")
        .fetch_all(&mut owner)
        .await
        .unwrap()
        .iter()
        .map(|row| row.get::<String, _>(0).parse().unwrap())
        .collect();
    // More than five runs of each: the connection then keeps a generic plan.
    for n in 0..8 {
        check_new_call_and_outcome(&store, n, ids[n % SMALL]).await;
    }
    for sql in [
        add_effects(SMALL + 1, GROWN),
        "SELECT pg_stat_reset()".to_owned(),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut owner)
            .await
            .unwrap();
    }
    for n in 100..100 + LOOKUPS {
        check_new_call_and_outcome(&store, n, ids[n % SMALL]).await;
    }
    drop(store);

    let (scans, rows) = effects_read(&mut owner, 2 * LOOKUPS as i64).await;
    assert!(
        scans >= 2 * LOOKUPS as i64,
        "the server counted {scans} scans of effects"
    );
    assert!(
        rows < 10 * LOOKUPS as i64,
        "{LOOKUPS} checks of a new call and {LOOKUPS} outcomes read {rows} effects of {GROWN}"
    );
}

/// When an executor is taken for dead, the leases of its pending effects end without the server
/// reading the whole log: pending effects are few, and indexed apart from the rest.
#[tokio::test]
async fn a_dead_executors_leases_end_without_reading_the_whole_log() {
    const LOG: usize = 20_000;
    const PENDING: usize = 3;
    let db = TestDb::create().await;
    let store = db.open().await;
    let mut owner = db.owner().await;
    for sql in [
        "INSERT INTO sessions (org, id, state, next_seq, created_at, updated_at) \
         VALUES ('acme', 's1', 'active', 0, 0, 0)"
            .to_owned(),
        format!(
            "INSERT INTO effects (id, org, session, seq, tool, args, signature, tier, state, \
             lease_holder, lease_expires_at, created_at, updated_at) \
             SELECT gen_random_uuid()::text, 'acme', 's1', g, 'transfer', '{{}}', \
             encode(sha256(g::text::bytea), 'hex'), 'compensable', \
             CASE WHEN g <= {PENDING} THEN 'pending' ELSE 'committed' END, \
             CASE WHEN g <= {PENDING} THEN 'gw-old' END, \
             CASE WHEN g <= {PENDING} THEN 50000 END, g, g \
             FROM generate_series(1, {LOG}) g"
        ),
        "ANALYZE effects".to_owned(),
        "SELECT pg_stat_reset()".to_owned(),
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut owner)
            .await
            .unwrap();
    }
    // The same name starting again: the executor before it is taken for dead.
    let beat = undolog_store::Beat {
        executor: "gw-new",
        name: "host:8080",
        at: Timestamp(2_000),
        stale_before: Timestamp(0),
        starting: true,
    };
    let old = undolog_store::Beat {
        executor: "gw-old",
        at: Timestamp(1_000),
        ..beat
    };
    store.beat(&old).await.unwrap();
    let report = store.beat(&beat).await.unwrap();
    assert_eq!(report.dead, ["gw-old"]);
    assert_eq!(report.leases_ended, PENDING as u64);
    drop(store);

    let (scans, rows) = effects_read(&mut owner, 2).await;
    assert!(scans >= 2, "the server counted {scans} scans of effects");
    assert!(
        rows < 100,
        "ending {PENDING} leases read {rows} effects of {LOG}"
    );
}

/// The scans of `effects` the server counted and the rows they read, once it has counted at least
/// `scans` (a backend reports its reads when its connection closes, a moment after), or after ten
/// seconds.
async fn effects_read(owner: &mut sqlx::PgConnection, scans: i64) -> (i64, i64) {
    let read = "SELECT seq_scan + coalesce(idx_scan, 0), seq_tup_read + coalesce(idx_tup_fetch, 0) \
                FROM pg_stat_user_tables WHERE relname = 'effects'";
    let mut counted = (0, 0);
    for _ in 0..100 {
        let row = sqlx::query(read).fetch_one(&mut *owner).await.unwrap();
        counted = (row.get::<i64, _>(0), row.get::<i64, _>(1));
        if counted.0 >= scans {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    counted
}

/// In one transaction: the earlier-effect check of a call never made (signature `n`), and a new
/// `updated_at` for `effect`, written only while it is as just read (`undolog_replace_effect`).
async fn check_new_call_and_outcome(store: &PostgresStore, n: usize, effect: EffectId) {
    let signature = Signature::from_stored(format!("{n:064x}"));
    let mut tx = store.begin(&OrgId::new("acme").unwrap()).await.unwrap();
    tx.expect_no_effect(EffectLookup::LatestBySignature(&signature))
        .await
        .unwrap();
    let before = tx.effect(effect).await.unwrap().expect("the effect exists");
    let mut after = before.clone();
    after.updated_at = Timestamp(before.updated_at.as_millis() + 1);
    tx.replace_effect(&before, &after).await.unwrap();
    tx.commit().await.unwrap();
}
