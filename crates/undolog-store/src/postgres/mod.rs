//! The shared backend: PostgreSQL, for several gateways over one log.
//!
//! Every transaction runs at READ COMMITTED as the application role [`PostgresStore::APP_ROLE`],
//! with the org in the setting `app.org_id` and sequential scans off; all are set with
//! `set_config(…, true)`, so they end with the transaction and a connection carries nothing from
//! one transaction to the next (PgBouncer's transaction pooling works, given its
//! `max_prepared_statements`, since sqlx prepares statements). Row-level security, forced on every
//! table that holds org data, confines the role to that org: a query that forgets its
//! `WHERE org = …` still sees one org.
//!
//! Concurrency: [`crate::Tx::lock`] takes a transaction-scoped advisory lock, and
//! [`crate::Tx::session`] locks the session row (`FOR UPDATE`), so a read-modify-write of a
//! session never works on a stale copy. Migrations run at [`PostgresStore::open`] as the
//! connecting user, one process at a time (see `migrate`).

mod executors;
mod keys;
mod literal;
mod migrate;
mod notify;
mod queued;
mod rows;
mod tx;

use std::{str::FromStr, sync::Arc, time::Duration};

use async_trait::async_trait;
use sqlx::{
    ConnectOptions, PgPool, Postgres, Transaction,
    postgres::{PgConnectOptions, PgPoolOptions},
};
use undolog_types::{OrgId, Timestamp};

use crate::{ApiKey, Beat, BeatReport, Error, Notifications, Result, Store, Tx};
use literal::render;

/// Where the shared store is and how many connections it may hold.
#[derive(Clone)]
pub struct PostgresOptions {
    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?…]`; the user owns the tables (it runs the
    /// migrations) and must be able to `SET ROLE undolog_app`.
    pub url: String,
    pub max_connections: u32,
    pub min_connections: u32,
    /// How long a transaction waits for a free connection, and [`PostgresStore::open`] for the
    /// server to answer.
    pub acquire_timeout: Duration,
    /// Idle connections above `min_connections` are closed after this long.
    pub idle_timeout: Option<Duration>,
    /// Connections are replaced after this long, so server-side memory does not grow forever.
    pub max_lifetime: Option<Duration>,
}

impl PostgresOptions {
    pub fn new(url: impl Into<String>) -> PostgresOptions {
        PostgresOptions {
            url: url.into(),
            max_connections: 16,
            min_connections: 0,
            acquire_timeout: Duration::from_secs(10),
            idle_timeout: Some(Duration::from_secs(600)),
            max_lifetime: Some(Duration::from_secs(1800)),
        }
    }
}

impl std::fmt::Debug for PostgresOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresOptions")
            .field("url", &redacted(&self.url))
            .field("max_connections", &self.max_connections)
            .field("min_connections", &self.min_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_lifetime", &self.max_lifetime)
            .finish()
    }
}

/// The shared effect log.
#[derive(Clone)]
pub struct PostgresStore {
    pool: PgPool,
    notifications: Arc<notify::PgNotifications>,
    /// How the pool was made, for [`Store::on_own_connections`].
    connect: PgConnectOptions,
    options: PostgresOptions,
}

/// Its options, whose URL hides any password; the connect options would show it.
impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("pool", &self.pool)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// The pool every [`PostgresStore`] makes from `options`.
fn pool_options(options: &PostgresOptions) -> PgPoolOptions {
    PgPoolOptions::new()
        // A ping before every use would cost a round trip per transaction; a connection idle
        // for a while (the server may have restarted since) is still checked.
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= IDLE_BEFORE_PING {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
        .max_connections(options.max_connections)
        .min_connections(options.min_connections)
        .acquire_timeout(options.acquire_timeout)
        .idle_timeout(options.idle_timeout)
        .max_lifetime(options.max_lifetime)
}

/// A pooled connection idle this long is pinged before its next transaction.
const IDLE_BEFORE_PING: Duration = Duration::from_secs(1);

/// What every transaction of the application role sets first, with `$1` its role and `$2` its
/// org: both, and no sequential scans. Each statement it runs then finds its rows through an index
/// on what selects them, and a plan a connection keeps (a function's statements, a foreign-key
/// check) is made once, on the table as it is then: made on a log of a few effects that autovacuum
/// had just analyzed, it would be a sequential scan, kept while the log grows, reading every effect
/// at every call until the table is analyzed again (bench/lab/).
const SETTINGS: &str = "SELECT set_config('role', $1, true), set_config('app.org_id', $2, true), \
                        set_config('enable_seqscan', 'off', true)";

/// Shorthand for [`PostgresStore::APP_ROLE`].
const APP_ROLE: &str = PostgresStore::APP_ROLE;

impl PostgresStore {
    /// The role every transaction of the store runs as. It owns nothing, so row-level security
    /// holds for it. Roles are shared by all databases of a cluster; the migrations create it once.
    pub const APP_ROLE: &'static str = "undolog_app";

    /// The schema version this binary migrates databases to.
    pub const SCHEMA_VERSION: i64 = migrate::LATEST;

    /// Connects, applies pending migrations, and checks that the application role cannot bypass
    /// row-level security.
    pub async fn open(options: PostgresOptions) -> Result<PostgresStore> {
        let shown = redacted(&options.url);
        let open_error = |reason: String| Error::Open {
            url: shown.clone(),
            reason,
        };
        let connect = PgConnectOptions::from_str(&options.url).map_err(|e| {
            open_error(format!(
                "{e}; write postgres://USER@HOST:PORT/DATABASE (postgresql:// works too)"
            ))
        })?;
        let unreachable = |why: String| {
            open_error(format!(
                "could not connect to PostgreSQL ({why}); check that the server is running, that host, \
                 port, user and database in the URL are right, and that the user may log in"
            ))
        };
        // One dedicated connection first: it fails fast with the real reason (a pool would retry
        // until its timeout and then report only that), and it runs the migrations.
        let mut conn = tokio::time::timeout(options.acquire_timeout, connect.connect())
            .await
            .map_err(|_| unreachable(format!("no answer within {:?}", options.acquire_timeout)))?
            .map_err(|e| unreachable(e.to_string()))?;
        migrate::apply(&mut conn).await.map_err(|e| match e {
            Error::Database(e) => open_error(format!(
                "the schema could not be set up ({e}); the user in the URL must own the database \
                 and be able to create the role {APP_ROLE} and SET ROLE to it (CREATEROLE), or a \
                 superuser runs once: CREATE ROLE {APP_ROLE} NOLOGIN; GRANT {APP_ROLE} TO <user>"
            )),
            other => other,
        })?;
        migrate::check_app_role(&mut conn, &shown).await?;
        sqlx::Connection::close(conn).await?;

        let pool = pool_options(&options)
            .connect_with(connect.clone())
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        Ok(PostgresStore {
            notifications: Arc::new(notify::PgNotifications::new(pool.clone())),
            pool,
            connect,
            options,
        })
    }

    /// The schema version this database is at.
    pub async fn schema_version(&self) -> Result<i64> {
        let mut conn = self.pool.acquire().await?;
        migrate::current_version(&mut conn).await
    }

    /// Closes every connection; transactions still open finish first.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// A transaction as the application role, bound to `org` when one is given; for the few
    /// statements outside [`Store::begin`]'s transactions (API keys).
    ///
    /// One round trip: BEGIN and the settings go as one simple-protocol message, the org quoted
    /// as a literal (`literal::render`, as every transaction's); an org it cannot quote (one
    /// holding NUL) is bound as a parameter instead, for the server to refuse.
    async fn begin_as_app(&self, org: Option<&str>) -> Result<Transaction<'static, Postgres>> {
        let org = org.unwrap_or("");
        if let Ok(settings) = render(SETTINGS, &[APP_ROLE.into(), org.into()]) {
            let sql = format!("BEGIN ISOLATION LEVEL READ COMMITTED; {settings}");
            return Ok(self.pool.begin_with(sqlx::AssertSqlSafe(sql)).await?);
        }
        let mut tx = self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL READ COMMITTED")
            .await?;
        sqlx::query(SETTINGS)
            .bind(APP_ROLE)
            .bind(org)
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn begin(&self, org: &OrgId) -> Result<Box<dyn Tx>> {
        let conn = self.pool.acquire().await?;
        Ok(Box::new(tx::PostgresTx::new(conn, org.clone(), false)?))
    }

    async fn begin_unsynced(&self, org: &OrgId) -> Result<Box<dyn Tx>> {
        let conn = self.pool.acquire().await?;
        Ok(Box::new(tx::PostgresTx::new(conn, org.clone(), true)?))
    }

    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn on_own_connections(&self, connections: u32) -> Option<Arc<dyn Store>> {
        // Opened lazily: the first transaction of the runtime that uses the pool opens them there.
        let pool = pool_options(&self.options)
            .max_connections(connections)
            .min_connections(0)
            .connect_lazy_with(self.connect.clone());
        Some(Arc::new(PostgresStore {
            notifications: Arc::new(notify::PgNotifications::new(pool.clone())),
            pool,
            connect: self.connect.clone(),
            options: self.options.clone(),
        }))
    }

    fn notifications(&self) -> Option<Arc<dyn Notifications>> {
        Some(self.notifications.clone())
    }

    async fn insert_api_key(&self, key: &ApiKey) -> Result<()> {
        let mut tx = self.begin_as_app(Some(key.org.as_str())).await?;
        keys::insert(&mut tx, key).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn api_key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>> {
        let mut tx = self.begin_as_app(None).await?;
        let key = keys::by_hash(&mut tx, hash).await?;
        tx.commit().await?;
        Ok(key)
    }

    async fn has_api_keys(&self) -> Result<bool> {
        let mut tx = self.begin_as_app(None).await?;
        let any = keys::any(&mut tx).await?;
        tx.commit().await?;
        Ok(any)
    }

    async fn api_keys(&self, org: Option<&OrgId>) -> Result<Vec<ApiKey>> {
        let mut conn = self.pool.acquire().await?;
        keys::list(&mut conn, org).await
    }

    async fn revoke_api_key(&self, id: &str, at: Timestamp) -> Result<Option<ApiKey>> {
        let mut conn = self.pool.acquire().await?;
        keys::revoke(&mut conn, id, at).await
    }

    async fn beat(&self, beat: &Beat<'_>) -> Result<BeatReport> {
        let mut tx = self.pool.begin().await?;
        let report = executors::beat(&mut tx, beat).await?;
        tx.commit().await?;
        Ok(report)
    }
}

/// The URL with its password replaced, fit for messages and logs.
pub(crate) fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn passwords_never_reach_a_message() {
        for (url, shown) in [
            (
                "postgres://u:secret@h:5432/db?sslmode=require",
                "postgres://u:***@h:5432/db?sslmode=require",
            ),
            ("postgresql://u:p@ss@h/db", "postgresql://u:***@h/db"),
            ("postgres://u@h/db", "postgres://u@h/db"),
            ("postgres://h/db", "postgres://h/db"),
            ("not a url", "not a url"),
        ] {
            assert_eq!(redacted(url), shown, "{url}");
        }
    }
}
