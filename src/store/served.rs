//! `served_apis`: the names of the APIs the servers serve, as the last one to start or reload
//! recorded them (`''` for the unnamed API of `--spec`). Stored credentials are checked against
//! them when they are stored (`apigate sessions create`, the admin API), which may run where no
//! server runs.

use super::{Store, StoreError};

impl Store {
    /// Records `names` as what is served now, in place of what was recorded before.
    pub(crate) async fn record_served_apis(&self, names: &[String]) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        // One writer at a time (replicas starting together); readers are not held up.
        sqlx::query("LOCK TABLE served_apis IN SHARE ROW EXCLUSIVE MODE")
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM served_apis")
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO served_apis (name) SELECT DISTINCT n FROM unnest($1::text[]) AS n",
        )
        .bind(names)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The names last recorded (none before a server ever recorded any).
    pub(crate) async fn served_apis(&self) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query_as::<_, (String,)>("SELECT name FROM served_apis ORDER BY name")
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(|(n,)| n).collect())
    }
}
