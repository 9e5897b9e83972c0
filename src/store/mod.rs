//! The only sqlx user: pool, embedded migrations, queries for `api_keys`, `roles`, `audit_log`
//! (their rows in `rows`), `held_responses` (in `responses`), `oauth_users` (in `oauth_users`), what
//! replicas share beyond those (`shared`: rate buckets, session leases, monitor statistics), and the `LISTEN/NOTIFY` channel
//! that tells every instance to drop cached credentials (`invalidation`). A revocation, a purge
//! of sessions' upstream credentials and a role change are announced on it in the same
//! transaction.
//! Knows nothing about argon2, features or HTTP: it stores and returns rows.

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgPool};
use uuid::Uuid;

mod invalidation;
mod oauth_users;
mod responses;
mod rows;
mod served;
mod shared;

use invalidation::notify;
pub(crate) use invalidation::{Heard, Invalidation, InvalidationListener};
pub(crate) use oauth_users::{OAuthUserRow, StoredUpstream};
pub use rows::{AuditEntry, AuditFilter, AuditRow, Decision, RoleRow};
pub(crate) use rows::{KeyRow, NewKind, NewRow, RevokeTarget, Revoked};

pub use responses::{Held, HeldMeta};
pub(crate) use shared::{MonitorStats, SharedBucket};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!();

/// What went wrong talking to Postgres.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("DATABASE_URL is not a valid Postgres URL: {0}")]
    BadUrl(String),
    // The cause is in the message, not `source()`, so `{:#}` does not print it twice.
    #[error(
        "cannot reach Postgres at {target}: {}. Is the server running and DATABASE_URL right?",
        server_message(cause)
    )]
    Unreachable { target: String, cause: sqlx::Error },
    /// The server answered, and the database DATABASE_URL names is not there (SQLSTATE 3D000).
    #[error(
        "database {database} does not exist on the Postgres server at {server}; create it with \
         `createdb {createdb}` (or `CREATE DATABASE \"{database}\";` in psql), or point \
         DATABASE_URL at one that exists"
    )]
    NoDatabase {
        database: String,
        server: String,
        /// The `createdb` arguments: the server's host, port and user when they are not the
        /// defaults `createdb` assumes, then the name.
        createdb: String,
    },
    /// The server answered and refused the connection (a wrong password, a role it does not
    /// know, too many connections): it is reachable, so say what it said.
    #[error("Postgres at {target} refused the connection: {message}{hint}")]
    Refused {
        target: String,
        message: String,
        /// What to check, when the SQLSTATE says (a wrong user or password), else empty.
        hint: &'static str,
    },
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

impl StoreError {
    /// True when the pool was closed (the process is shutting down).
    pub(crate) fn is_pool_closed(&self) -> bool {
        matches!(self, StoreError::Database(sqlx::Error::PoolClosed))
    }

    /// True when the database could not be reached (as opposed to a query being wrong):
    /// connection failures, pool timeouts, a connection that breaks off mid-handshake (a
    /// protocol error: "unexpected response from SSLRequest"), and the server saying so
    /// (SQLSTATE class 08, connection exception, or 57, e.g. `57P01` when it shuts down).
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Unreachable { .. }
            | StoreError::NoDatabase { .. }
            | StoreError::Refused { .. } => true,
            StoreError::Database(sqlx::Error::Database(e)) => is_connection_state(e.code()),
            StoreError::Database(e) => matches!(
                e,
                sqlx::Error::Io(_)
                    | sqlx::Error::Protocol(_)
                    | sqlx::Error::PoolTimedOut
                    | sqlx::Error::PoolClosed
                    | sqlx::Error::Tls(_)
                    | sqlx::Error::WorkerCrashed
            ),
            _ => false,
        }
    }

    /// True when the server took the statement and refused it (a constraint, a missing
    /// table, bad data): trying the same statement again cannot help.
    pub(crate) fn is_refused_statement(&self) -> bool {
        match self {
            StoreError::Database(sqlx::Error::Database(e)) => !is_connection_state(e.code()),
            StoreError::Migrate(_) => true,
            _ => false,
        }
    }
}

/// SQLSTATE class 08 (connection exception) or 57 (operator intervention: shutdown, crash
/// recovery, "cannot connect now").
fn is_connection_state(code: Option<std::borrow::Cow<'_, str>>) -> bool {
    code.is_some_and(|c| c.starts_with("08") || c.starts_with("57"))
}

/// The connection pool. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    pool: PgPool,
}

crate::debug_fields!(Store { .. });

/// `host:port/database` of a URL, for error messages (never the password).
pub fn describe_target(url: &str) -> String {
    match PgConnectOptions::from_str(url) {
        Ok(o) => format!(
            "{}:{}/{}",
            o.get_host(),
            o.get_port(),
            o.get_database().unwrap_or(o.get_username())
        ),
        Err(_) => "<invalid DATABASE_URL>".to_string(),
    }
}

/// What a failed connection says: a missing database and a refusal by a server that answered
/// are told apart from a server that cannot be reached.
fn connect_error(url: &str, opts: &PgConnectOptions, cause: sqlx::Error) -> StoreError {
    let target = describe_target(url);
    let sqlx::Error::Database(db) = &cause else {
        return StoreError::Unreachable { target, cause };
    };
    if db.code().as_deref() == Some("3D000") {
        let database = opts
            .get_database()
            .unwrap_or(opts.get_username())
            .to_string();
        return StoreError::NoDatabase {
            createdb: createdb_args(opts, &database),
            server: format!("{}:{}", opts.get_host(), opts.get_port()),
            database,
        };
    }
    let hint = if db.code().is_some_and(|c| c.starts_with("28")) {
        ". Check the user and password in DATABASE_URL"
    } else {
        ""
    };
    StoreError::Refused {
        target,
        message: db.message().to_string(),
        hint,
    }
}

/// `createdb`'s arguments for `database` on the server `opts` names: `-h` and `-p` only where
/// they differ from what `createdb` assumes (local socket or localhost, 5432), and the user.
fn createdb_args(opts: &PgConnectOptions, database: &str) -> String {
    let mut args = Vec::new();
    let host = opts.get_host();
    if !(host == "localhost" || host.starts_with('/')) {
        args.push(format!("-h {host}"));
    }
    if opts.get_port() != 5432 {
        args.push(format!("-p {}", opts.get_port()));
    }
    args.push(format!("-U {}", shell_word(opts.get_username())));
    args.push(shell_word(database));
    args.join(" ")
}

/// `word` as one shell word (quoted when it holds anything but letters, digits, `_` and `-`).
fn shell_word(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A connection error as a user reads it: a server's message without the position in
/// Postgres' own source (`PgDatabaseError`'s Display appends "at line 948").
fn server_message(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(db) => db.message().to_string(),
        other => other.to_string(),
    }
}

/// The query for the `api_keys` row (`k`) matching `condition`, with the features of its roles
/// (`role_features`).
macro_rules! with_role_features {
    ($condition:literal) => {
        concat!(
            "SELECT k.*, COALESCE((SELECT array_agg(DISTINCT f) FROM roles r, unnest(r.features) f \
             WHERE r.name = ANY(k.roles)), '{}') AS role_features \
             FROM api_keys k WHERE ",
            $condition
        )
    };
}

impl Store {
    /// Connects (and checks the connection) with a small pool. The error names the host.
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        let opts =
            PgConnectOptions::from_str(url).map_err(|e| StoreError::BadUrl(e.to_string()))?;
        let pool = match PgPoolOptions::new()
            .max_connections(10)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(opts.clone())
            .await
        {
            Ok(pool) => pool,
            Err(e) => {
                // The pool retries until its timeout and then only says it timed out: one
                // direct attempt tells why (refused, unknown host, bad password, …).
                let cause = match e {
                    sqlx::Error::PoolTimedOut => match opts.connect().await {
                        Err(direct) => direct,
                        Ok(conn) => {
                            let _ = conn.close().await;
                            sqlx::Error::PoolTimedOut
                        }
                    },
                    other => other,
                };
                return Err(connect_error(url, &opts, cause));
            }
        };
        Ok(Store { pool })
    }

    /// Applies the embedded migrations (idempotent; safe with several replicas starting).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        MIGRATOR.run(&self.pool).await?;
        Ok(())
    }

    /// One round-trip, for `/health`.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Closes the pool (waits for connections to be returned).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    // ---- server keys and sessions ----------------------------------------------------------

    /// Inserts a server key or a session; the row comes back as a lookup would return it.
    pub(crate) async fn insert_key(&self, r: &NewRow<'_>) -> Result<KeyRow, StoreError> {
        let common = |sql| {
            sqlx::query_as::<_, KeyRow>(sql)
                .bind(r.id)
                .bind(r.features)
                .bind(r.roles)
                .bind(r.read_only)
                .bind(r.created_by)
        };
        let query = match &r.kind {
            NewKind::ServerKey {
                name,
                public_id,
                secret_hash,
            } => common(
                "INSERT INTO api_keys (id, features, roles, read_only, created_by, kind, name, \
                 public_id, secret_hash) \
                 VALUES ($1, $2, $3, $4, $5, 'server_key', $6, $7, $8) \
                 RETURNING *, '{}'::text[] AS role_features",
            )
            .bind(*name)
            .bind(*public_id)
            .bind(*secret_hash),
            NewKind::Session {
                token_digest,
                user_id,
                tenant_id,
                organization_id,
                expires_at,
                upstream_headers,
                upstream_header_names,
                upstream_apis,
            } => common(
                "INSERT INTO api_keys (id, features, roles, read_only, created_by, kind, \
                 token_digest, user_id, tenant_id, organization_id, expires_at, \
                 upstream_headers, upstream_header_names, upstream_apis) \
                 VALUES ($1, $2, $3, $4, $5, 'session', $6, $7, $8, $9, $10, $11, $12, $13) \
                 RETURNING *, '{}'::text[] AS role_features",
            )
            .bind(*token_digest)
            .bind(*user_id)
            .bind(*tenant_id)
            .bind(*organization_id)
            .bind(*expires_at)
            .bind(*upstream_headers)
            .bind(*upstream_header_names)
            .bind(*upstream_apis),
        };
        Ok(query.fetch_one(&self.pool).await?)
    }

    /// A server key by public id (revoked ones too), with the features of its roles.
    pub(crate) async fn find_server_key(
        &self,
        public_id: &str,
    ) -> Result<Option<KeyRow>, StoreError> {
        let sql = with_role_features!("k.kind = 'server_key' AND k.public_id = $1");
        self.find_key(sql, public_id).await
    }

    /// A session by token digest (revoked and expired ones too), with its roles' features.
    pub(crate) async fn find_session(&self, digest: &[u8]) -> Result<Option<KeyRow>, StoreError> {
        let sql = with_role_features!("k.kind = 'session' AND k.token_digest = $1");
        self.find_key(sql, digest).await
    }

    /// The row `sql` finds by `$1 = value`.
    async fn find_key<'q, T>(
        &self,
        sql: &'static str,
        value: T,
    ) -> Result<Option<KeyRow>, StoreError>
    where
        T: 'q + Send + sqlx::Encode<'q, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
    {
        let query = sqlx::query_as::<_, KeyRow>(sql).bind(value);
        Ok(query.fetch_optional(&self.pool).await?)
    }

    pub(crate) async fn list_server_keys(&self) -> Result<Vec<KeyRow>, StoreError> {
        let rows = sqlx::query_as::<_, KeyRow>(
            "SELECT *, '{}'::text[] AS role_features FROM api_keys \
             WHERE kind = 'server_key' ORDER BY created_at, id",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }

    /// User sessions, newest first (the caller shows no digest). `user` filters by user id;
    /// without `all` only sessions that are neither revoked nor expired. Returns up to `limit`
    /// rows starting at `offset`.
    pub(crate) async fn list_sessions(
        &self,
        user: Option<&str>,
        all: bool,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<KeyRow>, StoreError> {
        let rows = sqlx::query_as::<_, KeyRow>(
            "SELECT *, '{}'::text[] AS role_features FROM api_keys WHERE kind = 'session' \
             AND ($1::text IS NULL OR user_id = $1) \
             AND ($2 OR (revoked_at IS NULL AND expires_at > now())) \
             ORDER BY created_at DESC, id DESC LIMIT $3 OFFSET $4",
        )
        .bind(user)
        .bind(all)
        .bind(limit)
        .bind(offset)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }

    /// Marks a credential revoked and announces it, in one transaction (the notification is
    /// delivered at commit). Returns `None` when no such credential exists; revoking twice
    /// keeps the first time.
    pub(crate) async fn revoke(
        &self,
        target: RevokeTarget<'_>,
    ) -> Result<Option<Revoked>, StoreError> {
        let mut tx = self.pool.begin().await?;
        let query = match target {
            RevokeTarget::ServerKey(_) => {
                "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) \
                 WHERE kind = 'server_key' AND id = $1 RETURNING id, revoked_at"
            }
            RevokeTarget::ServerKeyPublicId(_) => {
                "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) \
                 WHERE kind = 'server_key' AND public_id = $1 RETURNING id, revoked_at"
            }
            // A revoked session's upstream credentials are deleted, not just disowned.
            RevokeTarget::SessionId(_) => {
                "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()), \
                 upstream_headers = NULL, upstream_header_names = NULL, \
                 upstream_apis = NULL \
                 WHERE kind = 'session' AND id = $1 RETURNING id, revoked_at"
            }
            RevokeTarget::SessionDigest(_) => {
                "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()), \
                 upstream_headers = NULL, upstream_header_names = NULL, \
                 upstream_apis = NULL \
                 WHERE kind = 'session' AND token_digest = $1 RETURNING id, revoked_at"
            }
        };
        let q = sqlx::query_as::<_, (Uuid, DateTime<Utc>)>(query);
        let q = match target {
            RevokeTarget::ServerKey(id) | RevokeTarget::SessionId(id) => q.bind(id),
            RevokeTarget::ServerKeyPublicId(p) => q.bind(p),
            RevokeTarget::SessionDigest(d) => q.bind(d),
        };
        let Some((id, revoked_at)) = q.fetch_optional(&mut *tx).await? else {
            return Ok(None);
        };
        let payload = match target {
            RevokeTarget::ServerKey(_) | RevokeTarget::ServerKeyPublicId(_) => {
                Invalidation::Key(id)
            }
            _ => Invalidation::Session(id),
        };
        notify(&mut tx, &payload).await?;
        tx.commit().await?;
        Ok(Some(Revoked { id, revoked_at }))
    }

    /// Deletes the upstream credentials of every session that has expired (or was revoked
    /// before they were purged) and announces each, so no instance keeps them cached.
    /// Returns how many sessions lost theirs.
    pub(crate) async fn purge_session_credentials(&self) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin().await?;
        let ids = sqlx::query_as::<_, (Uuid,)>(
            "UPDATE api_keys SET upstream_headers = NULL, upstream_header_names = NULL, \
             upstream_apis = NULL WHERE kind = 'session' \
             AND (upstream_headers IS NOT NULL OR upstream_header_names IS NOT NULL \
             OR upstream_apis IS NOT NULL) \
             AND (expires_at <= now() OR revoked_at IS NOT NULL) RETURNING id",
        )
        .fetch_all(&mut *tx)
        .await?;
        for (id,) in &ids {
            notify(&mut tx, &Invalidation::Session(*id)).await?;
        }
        tx.commit().await?;
        Ok(ids.len() as u64)
    }

    /// Records a use; called once per cache fill, not per request.
    pub(crate) async fn touch(&self, id: Uuid) -> Result<(), StoreError> {
        sqlx::query("UPDATE api_keys SET last_used_at = now() WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    // ---- roles ------------------------------------------------------------------------------

    /// Creates a role (`before` = `None`: only if there is none) or replaces its features (only
    /// if they still are `before`), and announces the change. `None` when the role was not
    /// what the caller checked (changed or created meanwhile): nothing was written.
    pub(crate) async fn replace_role(
        &self,
        name: &str,
        before: Option<&[String]>,
        features: &[String],
    ) -> Result<Option<RoleRow>, StoreError> {
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query_as::<_, RoleRow>(
            "INSERT INTO roles (name, features) VALUES ($1, $2) \
             ON CONFLICT (name) DO UPDATE SET features = EXCLUDED.features, updated_at = now() \
             WHERE roles.features = $3::text[] \
             RETURNING name, features, created_at, updated_at",
        )
        .bind(name)
        .bind(features)
        .bind(before)
        .fetch_optional(&mut *tx)
        .await?;
        if row.is_some() {
            notify(&mut tx, &Invalidation::Roles).await?;
        }
        tx.commit().await?;
        Ok(row)
    }

    pub(crate) async fn list_roles(&self) -> Result<Vec<RoleRow>, StoreError> {
        let rows = sqlx::query_as::<_, RoleRow>(
            "SELECT name, features, created_at, updated_at FROM roles ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }

    /// The names in `roles` that no role row has.
    pub(crate) async fn missing_roles(&self, roles: &[String]) -> Result<Vec<String>, StoreError> {
        if roles.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query_as::<_, (String,)>(
            "SELECT n FROM unnest($1::text[]) AS n WHERE NOT EXISTS \
             (SELECT 1 FROM roles r WHERE r.name = n) ORDER BY n",
        )
        .bind(roles)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|(n,)| n).collect())
    }

    // ---- audit ------------------------------------------------------------------------------

    /// Writes an audit row; a row with the same `call_id` already there is left as it is.
    pub async fn insert_audit(&self, e: &AuditEntry) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO audit_log (key_id, session_id, user_id, tenant_id, tool, operation, \
             method, path, decision, upstream_status, duration_ms, error_code, at, call_id, \
             actor, target, organization_id, credential_sources) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, \
             $17, $18) \
             ON CONFLICT (call_id) DO NOTHING",
        )
        .bind(e.key_id)
        .bind(e.session_id)
        .bind(e.user_id.as_deref())
        .bind(e.tenant_id.as_deref())
        .bind(&e.tool)
        .bind(e.operation.as_deref())
        .bind(e.method.as_deref())
        .bind(e.path.as_deref())
        .bind(e.decision.as_str())
        .bind(e.upstream_status.map(i32::from))
        .bind(i64::try_from(e.duration_ms).unwrap_or(i64::MAX))
        .bind(e.error_code.map(|c| c.as_str()))
        .bind(e.at)
        .bind(e.call_id)
        .bind(e.actor.as_deref())
        .bind(e.target.as_deref())
        .bind(e.organization_id.as_deref())
        .bind(
            e.credential_sources
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<String>>(),
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Audit rows matching `filter`, newest first: up to `limit` rows with an id below
    /// `filter.before` (the cursor of the previous page).
    pub async fn audit_page(
        &self,
        filter: &AuditFilter,
        limit: i64,
    ) -> Result<Vec<AuditRow>, StoreError> {
        let rows = sqlx::query_as::<_, AuditRow>(
            "SELECT id, at, key_id, session_id, user_id, tenant_id, tool, operation, method, path, \
             decision, upstream_status, duration_ms, error_code, actor, target, \
             organization_id, credential_sources, call_id \
             FROM audit_log \
             WHERE ($1::timestamptz IS NULL OR at >= $1) \
             AND ($2::text IS NULL OR user_id = $2) \
             AND ($3::text IS NULL OR tool = $3) \
             AND ($4::uuid IS NULL OR session_id = $4) \
             AND ($5::bigint IS NULL OR id < $5) \
             ORDER BY id DESC LIMIT $6",
        )
        .bind(filter.since)
        .bind(filter.user.as_deref())
        .bind(filter.tool.as_deref())
        .bind(filter.session)
        .bind(filter.before)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_description_hides_password() {
        let d = describe_target("postgres://u:secret@db.example:6543/app");
        assert_eq!(d, "db.example:6543/app");
    }
}
