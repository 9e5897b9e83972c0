//! What replicas on one database share beyond credentials (issue 44): the rate limits' GCRA
//! buckets (`rate_buckets`, one upsert per admitted check), the MCP session and
//! listen-stream leases of each key (`session_leases`), and the agent monitor's per-session
//! statistics (`monitor_sessions`). All three tables are `UNLOGGED`; their expired rows are
//! deleted by [`Store::purge_shared`].

use std::time::Duration;

use super::{Store, StoreError};

/// One bucket of a shared rate check: a SHA-256 naming what it limits, one call per
/// `period` seconds, at most `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SharedBucket {
    pub subject: [u8; 32],
    pub period: f64,
    pub burst: f64,
}

/// The buckets that refused a call: each, and how long until it holds a call again.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    pub buckets: Vec<([u8; 32], Duration)>,
}

impl Refusal {
    /// How long until every bucket holds a call.
    pub(crate) fn wait(&self) -> Duration {
        self.buckets
            .iter()
            .map(|(_, w)| *w)
            .max()
            .unwrap_or(Duration::from_millis(1))
    }
}

/// A session's monitor statistics, counted over every replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MonitorStats {
    pub tool_calls: u64,
    /// The bit set of tools used ([`crate::types::Tool`]'s bits).
    pub tools: u32,
    pub duration: Duration,
}

fn stats(row: (i64, i32, f64)) -> MonitorStats {
    let (calls, tools, secs) = row;
    MonitorStats {
        tool_calls: u64::try_from(calls).unwrap_or(0),
        tools: u32::try_from(tools).unwrap_or(0),
        duration: Duration::try_from_secs_f64(secs).unwrap_or_default(),
    }
}

impl Store {
    /// Takes one call from every bucket at once, or none: `None` when taken, else which
    /// buckets refused and how long until each holds a call again. One statement when the
    /// call is admitted: each bucket's row is taken if it holds a call (rows locked in one
    /// order for every caller, so two calls sharing buckets cannot deadlock); when one does
    /// not, a second statement gives back what the first took and says how long to wait.
    pub(crate) async fn rate_take(
        &self,
        buckets: &[SharedBucket],
    ) -> Result<Option<Refusal>, StoreError> {
        let subjects: Vec<&[u8]> = buckets.iter().map(|b| &b.subject[..]).collect();
        let periods: Vec<f64> = buckets.iter().map(|b| b.period).collect();
        let bursts: Vec<f64> = buckets.iter().map(|b| b.burst).collect();
        let taken: Vec<(Vec<u8>,)> = sqlx::query_as(
            "INSERT INTO rate_buckets AS r (subject, tat, period, burst) \
             SELECT s, clock_timestamp() + make_interval(secs => p), p, b \
               FROM unnest($1::bytea[], $2::float8[], $3::float8[]) AS i (s, p, b) ORDER BY s \
             ON CONFLICT (subject) DO UPDATE \
               SET tat = greatest(r.tat, clock_timestamp()) + make_interval(secs => excluded.period), \
                   period = excluded.period, burst = excluded.burst \
               WHERE greatest(r.tat, clock_timestamp()) \
                     <= clock_timestamp() + make_interval(secs => (excluded.burst - 1) * excluded.period) \
             RETURNING subject",
        )
        .bind(&subjects)
        .bind(&periods)
        .bind(&bursts)
        .fetch_all(&self.pool)
        .await?;
        if taken.len() == buckets.len() {
            return Ok(None);
        }
        let taken: Vec<Vec<u8>> = taken.into_iter().map(|(s,)| s).collect();
        let refused: Vec<(Vec<u8>, f64)> = sqlx::query_as(
            "WITH given_back AS ( \
               UPDATE rate_buckets SET tat = tat - make_interval(secs => period) \
                WHERE subject = ANY($2::bytea[])) \
             SELECT subject, (extract(epoch FROM greatest(tat, clock_timestamp()) - clock_timestamp()) \
                              - (burst - 1) * period)::float8 \
               FROM rate_buckets WHERE subject = ANY($1::bytea[]) AND NOT subject = ANY($2::bytea[])",
        )
        .bind(&subjects)
        .bind(&taken)
        .fetch_all(&self.pool)
        .await?;
        let refused: Vec<([u8; 32], Duration)> = refused
            .into_iter()
            .filter_map(|(subject, wait)| {
                let subject = <[u8; 32]>::try_from(subject.as_slice()).ok()?;
                let wait = Duration::try_from_secs_f64(wait.max(0.001)).unwrap_or(Duration::MAX);
                Some((subject, wait))
            })
            .collect();
        Ok(Some(Refusal { buckets: refused }))
    }

    /// A lease `id` for `holder` unless it holds `max` live ones already: `Ok(held before)`,
    /// the lease taken when that is below `max`.
    pub(crate) async fn lease_take(
        &self,
        id: &str,
        holder: &str,
        max: usize,
        ttl: Duration,
    ) -> Result<usize, StoreError> {
        let (held,): (i32,) = sqlx::query_as("SELECT apigate_lease_take($1, $2, $3, $4)")
            .bind(id)
            .bind(holder)
            .bind(i32::try_from(max).unwrap_or(i32::MAX))
            .bind(ttl.as_secs_f64())
            .fetch_one(&self.pool)
            .await?;
        Ok(usize::try_from(held).unwrap_or(0))
    }

    /// Moves the expiry of the leases `ids` (of `holders`, in order) to `ttl` from now,
    /// recording again those that ran out meanwhile.
    pub(crate) async fn lease_renew(
        &self,
        ids: &[String],
        holders: &[String],
        ttl: Duration,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO session_leases (id, holder, expires_at) \
             SELECT id, holder, clock_timestamp() + make_interval(secs => $3) \
               FROM unnest($1::text[], $2::text[]) AS l (id, holder) ORDER BY id \
             ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at",
        )
        .bind(ids)
        .bind(holders)
        .bind(ttl.as_secs_f64())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Ends the leases `ids`.
    pub(crate) async fn lease_release(&self, ids: &[String]) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM session_leases WHERE id = ANY($1)")
            .bind(ids)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Counts a call of `tool_bit` in the monitor session `id`: its statistics with the call,
    /// and whether this call started the session (on any replica).
    pub(crate) async fn monitor_record(
        &self,
        id: &str,
        tool_bit: u32,
    ) -> Result<(MonitorStats, bool), StoreError> {
        let (calls, tools, secs, new): (i64, i32, f64, bool) = sqlx::query_as(
            "INSERT INTO monitor_sessions AS m (session_id, started_at, last_activity, tool_calls, tools) \
             VALUES ($1, clock_timestamp(), clock_timestamp(), 1, $2) \
             ON CONFLICT (session_id) DO UPDATE SET tool_calls = m.tool_calls + 1, \
               tools = m.tools | $2, last_activity = clock_timestamp() \
             RETURNING tool_calls, tools, \
               extract(epoch FROM clock_timestamp() - started_at)::float8, (xmax = 0)",
        )
        .bind(id)
        .bind(i32::try_from(tool_bit).unwrap_or(0))
        .fetch_one(&self.pool)
        .await?;
        Ok((stats((calls, tools, secs)), new))
    }

    /// Notes activity in the monitor session `id` (a call ended).
    pub(crate) async fn monitor_touch(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE monitor_sessions SET last_activity = clock_timestamp() WHERE session_id = $1",
        )
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Ends the monitor session `id`: its final statistics, if it was known.
    pub(crate) async fn monitor_end(&self, id: &str) -> Result<Option<MonitorStats>, StoreError> {
        let row: Option<(i64, i32, f64)> = sqlx::query_as(
            "DELETE FROM monitor_sessions WHERE session_id = $1 \
             RETURNING tool_calls, tools, extract(epoch FROM clock_timestamp() - started_at)::float8",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(stats))
    }

    /// Ends the monitor sessions idle for `idle` or longer, each on one replica only: their
    /// ids and final statistics.
    pub(crate) async fn monitor_end_idle(
        &self,
        idle: Duration,
    ) -> Result<Vec<(String, MonitorStats)>, StoreError> {
        let rows: Vec<(String, i64, i32, f64)> = sqlx::query_as(
            "DELETE FROM monitor_sessions \
             WHERE last_activity <= clock_timestamp() - make_interval(secs => $1) \
             RETURNING session_id, tool_calls, tools, \
               extract(epoch FROM clock_timestamp() - started_at)::float8",
        )
        .bind(idle.as_secs_f64())
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(id, c, t, s)| (id, stats((c, t, s))))
            .collect())
    }

    /// Deletes full rate buckets and expired leases (rows that say nothing a missing row
    /// would not): returns how many.
    pub(crate) async fn purge_shared(&self) -> Result<u64, StoreError> {
        let buckets = sqlx::query("DELETE FROM rate_buckets WHERE tat < clock_timestamp()")
            .execute(&self.pool)
            .await?
            .rows_affected();
        let leases =
            sqlx::query("DELETE FROM session_leases WHERE expires_at <= clock_timestamp()")
                .execute(&self.pool)
                .await?
                .rows_affected();
        Ok(buckets + leases)
    }
}
