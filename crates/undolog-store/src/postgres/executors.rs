//! [`crate::Store::beat`] on PostgreSQL, as the owning user (executors serve every org): the shared
//! statements in order, on the beat's transaction.

use sqlx::{PgConnection, Row};

use crate::{Beat, BeatReport, Result, executors as sql};

pub(super) async fn beat(conn: &mut PgConnection, beat: &Beat<'_>) -> Result<BeatReport> {
    let at = beat.at.as_millis();
    let was_dead: Option<bool> = sqlx::query_scalar(sql::WAS_DEAD)
        .bind(beat.executor)
        .fetch_optional(&mut *conn)
        .await?;
    sqlx::query(sql::ALIVE)
        .bind(beat.executor)
        .bind(beat.name)
        .bind(at)
        .execute(&mut *conn)
        .await?;
    let dead: Vec<String> = sqlx::query(sql::TAKE_FOR_DEAD)
        .bind(beat.executor)
        .bind(at)
        .bind(beat.stale_before.as_millis())
        .bind(beat.starting)
        .bind(beat.name)
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| row.try_get(0))
        .collect::<std::result::Result<_, _>>()?;
    let mut leases_ended = 0;
    if !dead.is_empty() || beat.starting {
        for statement in [sql::END_LEASES, sql::END_CLAIMS] {
            let done = sqlx::query(statement).bind(at).execute(&mut *conn).await?;
            leases_ended += done.rows_affected();
        }
    }
    if beat.starting {
        sqlx::query(sql::FORGET)
            .bind(at - sql::KEEP_DEAD_MS)
            .execute(&mut *conn)
            .await?;
    }
    Ok(BeatReport {
        dead,
        leases_ended,
        was_taken_for_dead: was_dead == Some(true),
    })
}
