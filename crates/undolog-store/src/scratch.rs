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
        on_server(&format!("CREATE DATABASE {name}"));
        ScratchDatabase { name }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The database's URL: the server's, with this database in place of its own.
    pub fn url(&self) -> String {
        database_url(&server_url(), &self.name)
    }

    /// Runs `sql` in this database and answers its rows, `|`-separated (psql's unaligned form).
    pub fn query(&self, sql: &str) -> String {
        run_psql(&self.url(), sql)
    }
}

impl Drop for ScratchDatabase {
    fn drop(&mut self) {
        on_server(&format!(
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

/// `server` (`postgres://user@host:port/db?options`) with `database` in place of `db`, or added
/// when it names none; its options kept.
fn database_url(server: &str, database: &str) -> String {
    let (base, options) = match server.split_once('?') {
        Some((base, options)) => (base, format!("?{options}")),
        None => (server, String::new()),
    };
    let authority = base.find("://").map_or(0, |at| at + 3);
    let host = match base[authority..].find('/') {
        Some(at) => &base[..authority + at],
        None => base,
    };
    format!("{host}/{database}{options}")
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

#[cfg(test)]
mod tests {
    use super::database_url;

    #[test]
    fn the_database_part_of_the_server_url_is_replaced_and_the_rest_kept() {
        let cases = [
            (
                "postgres://postgres@127.0.0.1:5432/postgres",
                "postgres://postgres@127.0.0.1:5432/t",
            ),
            ("postgres://u@h", "postgres://u@h/t"),
            ("postgres://u@h/", "postgres://u@h/t"),
            (
                "postgres://u@h/db?sslmode=disable",
                "postgres://u@h/t?sslmode=disable",
            ),
        ];
        for (server, expected) in cases {
            assert_eq!(database_url(server, "t"), expected, "{server}");
        }
    }
}
