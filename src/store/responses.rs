//! Queries for `held_responses`: binary API responses held for `resources/read`
//! (`crate::held`), readable from every replica. A write purges expired rows, drops the
//! owner's oldest beyond its bound and then the oldest of anyone's beyond the total bound,
//! under one advisory lock for all writes so that two replicas writing at once cannot both
//! stay under a bound (every signed-in person and every session is an owner: without the
//! total, many owners would add up without limit).

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{Store, StoreError};

/// A held response's description (what `resources/list` and a tool result show).
#[derive(Debug, Clone)]
pub struct HeldMeta {
    pub id: String,
    pub content_type: String,
    pub sha256: String,
    pub size: usize,
    pub expires_at: DateTime<Utc>,
}

/// A held response with its bytes.
#[derive(Debug, Clone)]
pub struct Held {
    pub meta: HeldMeta,
    pub bytes: bytes::Bytes,
}

impl Store {
    /// Holds `bytes` as `meta` for `owner` for `ttl`, then drops every expired row, the
    /// owner's oldest rows while its total is over `max_bytes`, and the oldest rows of all
    /// owners while the table's total is over `max_total_bytes`.
    pub(crate) async fn hold_response(
        &self,
        owner: &str,
        meta: &HeldMeta,
        bytes: &[u8],
        ttl: Duration,
        max_bytes: usize,
        max_total_bytes: usize,
    ) -> Result<(), StoreError> {
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let max_bytes = i64::try_from(max_bytes).unwrap_or(i64::MAX);
        let max_total_bytes = i64::try_from(max_total_bytes).unwrap_or(i64::MAX);
        let mut tx = self.pool.begin().await?;
        // One lock for every write: the total is everyone's.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('apigate.held', 0))")
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM held_responses WHERE expires_at <= now()")
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO held_responses (id, owner, content_type, sha256, size, bytes, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7::double precision / 1000))",
        )
        .bind(&meta.id)
        .bind(owner)
        .bind(&meta.content_type)
        .bind(&meta.sha256)
        .bind(i64::try_from(meta.size).unwrap_or(i64::MAX))
        .bind(bytes)
        .bind(ttl_ms)
        .execute(&mut *tx)
        .await?;
        // Newest first, a running total: every row past the bound goes.
        sqlx::query(
            "DELETE FROM held_responses WHERE id IN (
                 SELECT id FROM (
                     SELECT id, sum(size) OVER (ORDER BY seq DESC) AS running
                     FROM held_responses WHERE owner = $1
                 ) t WHERE running > $2)",
        )
        .bind(owner)
        .bind(max_bytes)
        .execute(&mut *tx)
        .await?;
        // The same over every owner's rows: the oldest of anyone's go first.
        sqlx::query(
            "DELETE FROM held_responses WHERE id IN (
                 SELECT id FROM (
                     SELECT id, sum(size) OVER (ORDER BY seq DESC) AS running
                     FROM held_responses
                 ) t WHERE running > $1)",
        )
        .bind(max_total_bytes)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The response `id` of `owner`, unless it expired.
    pub(crate) async fn read_response(
        &self,
        owner: &str,
        id: &str,
    ) -> Result<Option<Held>, StoreError> {
        let row = sqlx::query(
            "SELECT id, content_type, sha256, size, expires_at, bytes FROM held_responses
             WHERE id = $1 AND owner = $2 AND expires_at > now()",
        )
        .bind(id)
        .bind(owner)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let bytes: Vec<u8> = row.try_get("bytes")?;
        Ok(Some(Held {
            meta: meta(&row)?,
            bytes: bytes::Bytes::from(bytes),
        }))
    }

    /// `owner`'s responses that have not expired, oldest first.
    pub(crate) async fn list_responses(&self, owner: &str) -> Result<Vec<HeldMeta>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, content_type, sha256, size, expires_at FROM held_responses
             WHERE owner = $1 AND expires_at > now() ORDER BY seq",
        )
        .bind(owner)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(meta)
            .collect::<Result<_, _>>()
            .map_err(Into::into)
    }
}

fn meta(row: &sqlx::postgres::PgRow) -> Result<HeldMeta, sqlx::Error> {
    let size: i64 = row.try_get("size")?;
    let expires_at: DateTime<Utc> = row.try_get("expires_at")?;
    Ok(HeldMeta {
        id: row.try_get("id")?,
        content_type: row.try_get("content_type")?,
        sha256: row.try_get("sha256")?,
        size: usize::try_from(size).unwrap_or(0),
        expires_at,
    })
}
