//! [`crate::Store::beat`] on PostgreSQL, as the owning user (executors serve every org).

crate::executors::beat_on!(sqlx::PgConnection);
