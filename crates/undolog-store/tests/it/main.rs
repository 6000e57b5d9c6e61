//! The store conformance suite on the embedded SQLite backend and on PostgreSQL, plus what only
//! one backend does.

mod full_disk;
mod postgres;
mod sqlite;

use std::sync::Arc;

use undolog_store::{SqliteStore, Store};

async fn fresh_sqlite() -> Arc<dyn Store> {
    Arc::new(
        SqliteStore::in_memory()
            .await
            .expect("an in-memory SQLite store opens"),
    )
}

mod conformance_sqlite {
    use super::fresh_sqlite;
    undolog_store::store_conformance_tests!(fresh_sqlite);
}
