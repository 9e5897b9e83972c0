//! The rows the queries take and return: `api_keys` (server keys and sessions, one table),
//! `roles` and `audit_log`, and what a revocation names.

use chrono::{DateTime, Utc};
use sqlx::FromRow;
use uuid::Uuid;

use crate::types::{Code, CredentialSource};

pub(crate) enum RevokeTarget<'a> {
    ServerKey(Uuid),
    ServerKeyPublicId(&'a str),
    SessionId(Uuid),
    SessionDigest(&'a [u8]),
}

#[derive(Debug, Clone)]
pub(crate) struct Revoked {
    pub id: Uuid,
    pub revoked_at: DateTime<Utc>,
}

/// A row of `api_keys` to insert: what both kinds carry, then what only one does.
pub(crate) struct NewRow<'a> {
    pub id: Uuid,
    pub features: &'a [String],
    pub roles: &'a [String],
    pub read_only: bool,
    pub created_by: Option<&'a str>,
    pub kind: NewKind<'a>,
}

/// The columns of one kind of [`NewRow`].
pub(crate) enum NewKind<'a> {
    ServerKey {
        name: &'a str,
        public_id: &'a str,
        secret_hash: &'a str,
    },
    Session {
        token_digest: &'a [u8],
        user_id: &'a str,
        tenant_id: Option<&'a str>,
        organization_id: Option<&'a str>,
        expires_at: DateTime<Utc>,
        /// Sealed (`auth/sealed.rs`), never plaintext.
        upstream_headers: Option<&'a [u8]>,
        upstream_header_names: Option<&'a [String]>,
        /// The APIs the sealed headers are for (names only).
        upstream_apis: Option<&'a [String]>,
    },
}

/// A row of `api_keys` (either kind) plus the features its roles grant.
#[derive(Clone, FromRow)]
pub(crate) struct KeyRow {
    pub id: Uuid,
    pub kind: String,
    pub name: Option<String>,
    pub public_id: Option<String>,
    pub secret_hash: Option<String>,
    #[allow(dead_code)]
    pub token_digest: Option<Vec<u8>>,
    pub features: Vec<String>,
    pub roles: Vec<String>,
    pub read_only: bool,
    pub user_id: Option<String>,
    pub tenant_id: Option<String>,
    pub organization_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub created_by: Option<String>,
    pub role_features: Vec<String>,
    /// A session's sealed upstream headers (`auth/sealed.rs`).
    #[sqlx(default)]
    pub upstream_headers: Option<Vec<u8>>,
    #[sqlx(default)]
    pub upstream_header_names: Option<Vec<String>>,
    /// The APIs those headers are for (names only).
    #[sqlx(default)]
    pub upstream_apis: Option<Vec<String>>,
}

crate::debug_fields!(KeyRow {
    id,
    kind,
    name,
    public_id,
    secret_hash: "<redacted>",
    user_id,
    revoked_at,
    ..
});

/// A row of `roles`.
#[derive(Debug, Clone, FromRow, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleRow {
    pub name: String,
    pub features: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Which audit rows to read; every field narrows, `None` does not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Rows at or after this time.
    pub since: Option<DateTime<Utc>>,
    pub user: Option<String>,
    pub tool: Option<String>,
    pub session: Option<Uuid>,
    /// Rows with an id below this one: the cursor of a previous page.
    pub before: Option<i64>,
}

/// The outcome recorded for a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The call ran (whatever the upstream answered).
    Allowed,
    /// Authentication, permissions, rate limit or the monitor stopped it.
    Denied,
    /// It was allowed but failed (invalid arguments, upstream error, timeout).
    Failed,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allowed => "allowed",
            Decision::Denied => "denied",
            Decision::Failed => "failed",
        }
    }
}

/// One tool call or admin action, for `audit_log`. Carries no argument values, no bodies and
/// no secrets: `path` must be the operation's path template (`/pets/{petId}`), not the concrete
/// path.
#[derive(Debug, Clone)]
pub struct AuditEntry {
    pub key_id: Option<Uuid>,
    pub session_id: Option<Uuid>,
    pub user_id: Option<String>,
    pub tenant_id: Option<String>,
    pub tool: String,
    pub operation: Option<String>,
    pub method: Option<String>,
    pub path: Option<String>,
    pub decision: Decision,
    pub upstream_status: Option<u16>,
    pub duration_ms: u64,
    pub error_code: Option<Code>,
    /// When the call happened (a row held through a database outage is written later).
    pub at: DateTime<Utc>,
    /// The call's id: writing the same row twice (a retry after a write whose answer was
    /// lost) keeps one row.
    pub call_id: Uuid,
    /// Who acted: `key:<public id>`, `bootstrap`, `dev`, or `cli` for the admin CLI.
    pub actor: Option<String>,
    /// What an admin action changed: `key:<public id>`, `session:<id>`, `role:<name>`.
    pub target: Option<String>,
    /// The subject's organization (with `user_id` and `tenant_id`).
    pub organization_id: Option<String>,
    /// Where the upstream credentials the call sent came from: `server` (configured
    /// `--upstream-header`s), `session`, `oauth`, `assertion`, `scheme:NAME`. Never a value.
    pub credential_sources: Vec<CredentialSource>,
}

/// A row of `audit_log`.
#[derive(Debug, Clone, FromRow, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditRow {
    pub id: i64,
    pub at: DateTime<Utc>,
    pub key_id: Option<Uuid>,
    pub session_id: Option<Uuid>,
    pub user_id: Option<String>,
    pub tenant_id: Option<String>,
    pub tool: String,
    pub operation: Option<String>,
    pub method: Option<String>,
    pub path: Option<String>,
    pub decision: String,
    pub upstream_status: Option<i32>,
    pub duration_ms: i64,
    pub error_code: Option<String>,
    pub actor: Option<String>,
    pub target: Option<String>,
    pub organization_id: Option<String>,
    /// Where the call's upstream credentials came from (`server`, `session`, …); never a value.
    pub credential_sources: Vec<String>,
    /// The tool call's id (the identity assertion's `jti`); none for rows written before it
    /// was recorded.
    pub call_id: Option<Uuid>,
}
