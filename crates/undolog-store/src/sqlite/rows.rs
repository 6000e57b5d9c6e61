//! How SQLite rows hand over their columns; the records are built in [`crate::rows`].

use sqlx::{Row, sqlite::SqliteRow};

use crate::{Result, rows::Columns};

impl Columns for SqliteRow {
    fn text_opt(&self, column: &str) -> Result<Option<String>> {
        Ok(self.try_get(column)?)
    }

    fn int_opt(&self, column: &str) -> Result<Option<i64>> {
        Ok(self.try_get(column)?)
    }
}
