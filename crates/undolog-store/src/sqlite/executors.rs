//! [`crate::Store::beat`] on SQLite.

crate::executors::beat_on!(sqlx::SqliteConnection);
