//! How SQLite rows hand over their columns; the records are built in [`crate::rows`].

use std::cell::Cell;

use rusqlite::Row;

use crate::{Result, rows::Columns};

/// A row whose columns are found by name starting where the last one was found: the records are
/// read mostly in the order their SELECT lists the columns, so a lookup is usually one
/// comparison. (rusqlite's `get(name)` compares every column's name in turn, each through the
/// C API: reading a long session's effects spent a quarter of its time there.)
pub(super) struct InOrder<'r, 's> {
    row: &'r Row<'s>,
    next: Cell<usize>,
}

impl<'r, 's> InOrder<'r, 's> {
    pub(super) fn new(row: &'r Row<'s>) -> InOrder<'r, 's> {
        InOrder {
            row,
            next: Cell::new(0),
        }
    }

    fn index(&self, column: &str) -> Result<usize> {
        let statement = self.row.as_ref();
        let count = statement.column_count();
        let start = self.next.get();
        for offset in 0..count {
            let at = (start + offset) % count;
            if statement
                .column_name(at)
                .is_ok_and(|name| name.eq_ignore_ascii_case(column))
            {
                self.next.set(at + 1);
                return Ok(at);
            }
        }
        Err(rusqlite::Error::InvalidColumnName(column.to_owned()).into())
    }
}

impl Columns for InOrder<'_, '_> {
    fn text_opt(&self, column: &str) -> Result<Option<String>> {
        Ok(self.row.get(self.index(column)?)?)
    }

    fn int_opt(&self, column: &str) -> Result<Option<i64>> {
        Ok(self.row.get(self.index(column)?)?)
    }
}

#[cfg(test)]
mod tests {
    use super::InOrder;
    use crate::rows::Columns;

    #[test]
    fn columns_are_found_by_name_in_any_order_and_a_missing_one_is_an_error() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let mut statement = conn
            .prepare("SELECT 'a' AS first, 2 AS second, NULL AS third")
            .unwrap();
        let mut rows = statement.query([]).unwrap();
        let row = rows.next().unwrap().unwrap();
        let row = InOrder::new(row);
        assert_eq!(row.int("second").unwrap(), 2);
        assert_eq!(row.text("first").unwrap(), "a", "before the last one found");
        assert_eq!(
            row.text_opt("THIRD").unwrap(),
            None,
            "names match in any case"
        );
        assert_eq!(row.text("first").unwrap(), "a", "again");
        assert!(row.text("fourth").is_err());
    }
}
