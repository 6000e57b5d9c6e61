//! How SQLite rows hand over their columns; the records are built in [`crate::rows`].

use rusqlite::Row;

use crate::{Result, rows::Columns};

impl Columns for Row<'_> {
    fn text_opt(&self, column: &str) -> Result<Option<String>> {
        Ok(self.get(column)?)
    }

    fn int_opt(&self, column: &str) -> Result<Option<i64>> {
        Ok(self.get(column)?)
    }
}
