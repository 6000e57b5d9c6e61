//! A PostgreSQL database that lives for one test or benchmark run (feature `scratch`): created on
//! the server in `UNDOLOG_TEST_POSTGRES_URL` (default the machine's, `postgres` user over trust)
//! and dropped, connections and all, when the value is dropped. Through `psql`, so that it works
//! the same from sync code, async tests and `Drop`.

use std::process::Command;

/// The server scratch databases are made on.
pub fn server_url() -> String {
    std::env::var("UNDOLOG_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// A database of its own, dropped with this value.
#[derive(Debug)]
pub struct ScratchDatabase {
    name: String,
}

impl ScratchDatabase {
    /// A new empty database whose name starts with `prefix` (letters, digits and `_`).
    pub fn new(prefix: &str) -> ScratchDatabase {
        let name = format!("{prefix}_{}", uuid::Uuid::now_v7().simple());
        psql(&format!("CREATE DATABASE {name}"));
        ScratchDatabase { name }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The database's URL: the server's, with this database in place of its own.
    pub fn url(&self) -> String {
        let server = server_url();
        let (base, query) = match server.split_once('?') {
            Some((base, query)) => (base, format!("?{query}")),
            None => (server.as_str(), String::new()),
        };
        let host = match base.rsplit_once('/') {
            Some((host, _)) if host.contains("//") && !host.ends_with('/') => host,
            _ => base,
        };
        format!("{host}/{}{query}", self.name)
    }

    /// Runs `sql` in this database and answers its rows, `|`-separated (psql's unaligned form).
    pub fn query(&self, sql: &str) -> String {
        run_psql(&self.url(), sql)
    }
}

impl Drop for ScratchDatabase {
    fn drop(&mut self) {
        psql(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}

/// Runs `sql` on the server's own database (as the server's user), for what only it may do:
/// create, drop or close databases, end connections.
pub fn on_server(sql: &str) -> String {
    run_psql(&server_url(), sql)
}

fn psql(sql: &str) {
    on_server(sql);
}

fn run_psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([url, "-v", "ON_ERROR_STOP=1", "-qAtc", sql])
        .output()
        .expect("psql runs (apt-get install postgresql-client)");
    assert!(
        out.status.success(),
        "PostgreSQL at {url} is needed (./verify starts it): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
