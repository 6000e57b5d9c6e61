//! The store conformance suite on a real PostgreSQL, plus what only PostgreSQL does: row-level
//! security between orgs, migrations shared by several processes, connection errors.
//!
//! Every test gets a database of its own, named `undolog_test_<pid>_<random>`, created from the
//! server in `UNDOLOG_TEST_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`)
//! and dropped when the test ends. A server that does not answer fails the tests; they never skip.

mod lifecycle;
mod tenancy;

use std::{str::FromStr, sync::Arc, time::Duration};

use async_trait::async_trait;
use sqlx::{ConnectOptions, Connection, PgConnection, postgres::PgConnectOptions};
use undolog_store::{ApiKey, Beat, BeatReport, PostgresOptions, PostgresStore, Result, Store, Tx};
use undolog_types::{OrgId, Timestamp};

/// The server the tests create their databases on.
fn server_url() -> String {
    std::env::var("UNDOLOG_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A connection to `url`, or a failed test that says how to get a server.
async fn connect(url: &str) -> PgConnection {
    let options = PgConnectOptions::from_str(url).expect("UNDOLOG_TEST_POSTGRES_URL parses");
    match tokio::time::timeout(Duration::from_secs(10), options.connect()).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => panic!(
            "PostgreSQL is not reachable at {url}: {e}. Start it (./verify does: \
             pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start) or point \
             UNDOLOG_TEST_POSTGRES_URL at a server where this user may create databases"
        ),
        Err(_) => panic!("PostgreSQL at {url} did not answer within 10 s"),
    }
}

/// A database that exists for one test and is dropped with this value.
#[derive(Debug)]
struct TestDb {
    name: String,
    /// The URL of this database, as the user that owns it.
    url: String,
    /// A login role made for this test to own the database, dropped with it.
    owner_role: Option<String>,
}

/// A name no other test run uses.
fn unique_name(prefix: &str) -> String {
    format!(
        "{prefix}_{}_{}",
        std::process::id(),
        uuid::Uuid::now_v7().simple()
    )
}

/// Runs one statement as the server's admin user.
async fn admin(sql: String) {
    let mut admin = connect(&server_url()).await;
    sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    admin.close().await.ok();
}

impl TestDb {
    /// A database owned by the server's user (a superuser on the test machine).
    async fn create() -> TestDb {
        let name = unique_name("undolog_test");
        admin(format!("CREATE DATABASE \"{name}\"")).await;
        TestDb {
            url: with_database(&server_url(), &name),
            name,
            owner_role: None,
        }
    }

    /// A database owned by a new login role that is no superuser and has `attributes`
    /// (`CREATEROLE`, or nothing), as on a managed PostgreSQL.
    async fn create_owned_by_new_role(attributes: &str) -> TestDb {
        let role = unique_name("undolog_test_owner");
        admin(format!("CREATE ROLE \"{role}\" LOGIN {attributes}")).await;
        let name = unique_name("undolog_test");
        admin(format!("CREATE DATABASE \"{name}\" OWNER \"{role}\"")).await;
        let server = with_database(&server_url(), &name);
        let (scheme, rest) = server.split_once("://").expect("a postgres:// URL");
        let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
        TestDb {
            url: format!("{scheme}://{role}@{host}"),
            name,
            owner_role: Some(role),
        }
    }

    async fn open(&self) -> PostgresStore {
        PostgresStore::open(self.options())
            .await
            .expect("a fresh database opens as a store")
    }

    fn options(&self) -> PostgresOptions {
        PostgresOptions {
            max_connections: 8,
            ..PostgresOptions::new(&self.url)
        }
    }

    /// A connection as the database's owner (for [`TestDb::create`], a superuser, which bypasses
    /// row-level security).
    async fn owner(&self) -> PgConnection {
        connect(&self.url).await
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Drop runs inside the test's runtime, which cannot be blocked on: use a thread of its own.
        let (server, name, role) = (server_url(), self.name.clone(), self.owner_role.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for dropping the test database");
            runtime.block_on(async {
                let mut admin = connect(&server).await;
                let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .execute(&mut admin)
                    .await?;
                if let Some(role) = role {
                    let sql = format!("DROP ROLE IF EXISTS \"{role}\"");
                    sqlx::query(sqlx::AssertSqlSafe(sql))
                        .execute(&mut admin)
                        .await?;
                }
                Ok::<(), sqlx::Error>(())
            })
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("could not drop test database {}: {e}", self.name);
        }
    }
}

/// `url` with its database replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a postgres:// URL");
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let query = tail.find('?').map_or("", |i| &tail[i..]);
    format!("{scheme}://{authority}/{name}{query}")
}

/// A store on a database of its own, dropped with the store.
#[derive(Debug)]
struct TestStore {
    store: PostgresStore,
    _db: TestDb,
}

#[async_trait]
impl Store for TestStore {
    async fn begin(&self, org: &OrgId) -> Result<Box<dyn Tx>> {
        self.store.begin(org).await
    }

    fn backend(&self) -> &'static str {
        self.store.backend()
    }

    async fn insert_api_key(&self, key: &ApiKey) -> Result<()> {
        self.store.insert_api_key(key).await
    }

    async fn api_key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>> {
        self.store.api_key_by_hash(hash).await
    }

    async fn has_api_keys(&self) -> Result<bool> {
        self.store.has_api_keys().await
    }

    async fn api_keys(&self, org: Option<&OrgId>) -> Result<Vec<ApiKey>> {
        self.store.api_keys(org).await
    }

    async fn revoke_api_key(&self, id: &str, at: Timestamp) -> Result<Option<ApiKey>> {
        self.store.revoke_api_key(id, at).await
    }

    async fn beat(&self, beat: &Beat<'_>) -> Result<BeatReport> {
        self.store.beat(beat).await
    }
}

async fn fresh_postgres() -> Arc<dyn Store> {
    let db = TestDb::create().await;
    let store = db.open().await;
    Arc::new(TestStore { store, _db: db })
}

mod conformance_postgres {
    use super::fresh_postgres;
    undolog_store::store_conformance_tests!(fresh_postgres);
}

#[test]
fn test_databases_replace_only_the_database_of_the_url() {
    for (url, expected) in [
        (
            "postgres://postgres@127.0.0.1:5432/postgres",
            "postgres://postgres@127.0.0.1:5432/t",
        ),
        (
            "postgresql://u:p@h/db?sslmode=disable",
            "postgresql://u:p@h/t?sslmode=disable",
        ),
        ("postgres://h", "postgres://h/t"),
        (
            "postgres://h?application_name=x",
            "postgres://h/t?application_name=x",
        ),
    ] {
        assert_eq!(with_database(url, "t"), expected, "{url}");
    }
}
