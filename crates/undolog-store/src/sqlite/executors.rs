//! [`crate::Store::beat`] on SQLite: the shared statements in order, on the beat's transaction.

use rusqlite::{Connection, OptionalExtension, named_params};

use crate::{Beat, BeatReport, Result, executors as sql};

pub(super) fn beat(conn: &Connection, beat: &Beat<'_>) -> Result<BeatReport> {
    let at = beat.at.as_millis();
    let was_dead: Option<bool> = conn
        .prepare_cached(sql::WAS_DEAD)?
        .query_row(named_params! {"$1": beat.executor}, |row| row.get(0))
        .optional()?;
    conn.prepare_cached(sql::ALIVE)?
        .execute(named_params! {"$1": beat.executor, "$2": beat.name, "$3": at})?;
    let dead = conn
        .prepare_cached(sql::TAKE_FOR_DEAD)?
        .query_map(
            named_params! {
                "$1": beat.executor,
                "$2": at,
                "$3": beat.stale_before.as_millis(),
                "$4": beat.starting,
                "$5": beat.name,
            },
            |row| row.get(0),
        )?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    let mut leases_ended = 0;
    if !dead.is_empty() || beat.starting {
        for statement in [sql::END_LEASES, sql::END_CLAIMS] {
            let ended = conn
                .prepare_cached(statement)?
                .execute(named_params! {"$1": at})?;
            leases_ended += ended as u64;
        }
    }
    if beat.starting {
        conn.prepare_cached(sql::FORGET)?
            .execute(named_params! {"$1": at - sql::KEEP_DEAD_MS})?;
    }
    Ok(BeatReport {
        dead,
        leases_ended,
        was_taken_for_dead: was_dead == Some(true),
    })
}
