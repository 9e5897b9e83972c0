//! What the admin operations take and return: the keys and sessions to create, the ones just
//! created (their secret shown this once), listings and their pages, a session named by id or
//! token, a revocation.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::AdminError;
use crate::auth::secrets;
use crate::auth::session_upstream::UpstreamInput;
use crate::store::{AuditRow, KeyRow, RoleRow};

/// A server key to create.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewKey {
    pub name: String,
    #[serde(default)]
    pub features: Vec<String>,
    #[serde(default)]
    pub roles: Vec<String>,
    #[serde(default)]
    pub read_only: bool,
    /// Who asked (`cli`, `key:<public id>`, `bootstrap`); set by the adapter, not the client.
    #[serde(skip)]
    pub created_by: Option<String>,
}

/// A key just created: the only time the full key is available.
#[derive(Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatedKey {
    pub id: Uuid,
    pub key: String,
    pub name: String,
    pub public_id: String,
    pub features: Vec<String>,
    pub roles: Vec<String>,
    pub read_only: bool,
    pub created_at: DateTime<Utc>,
}

crate::debug_fields!(CreatedKey {
    id,
    key: "<redacted>",
    name,
    public_id,
    ..
});

/// A server key as listed (never its secret or hash).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyInfo {
    pub id: Uuid,
    pub name: String,
    pub public_id: String,
    pub features: Vec<String>,
    pub roles: Vec<String>,
    pub read_only: bool,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub created_by: Option<String>,
}

impl KeyInfo {
    pub(super) fn from_row(r: KeyRow) -> KeyInfo {
        KeyInfo {
            id: r.id,
            name: r.name.unwrap_or_default(),
            public_id: r.public_id.unwrap_or_default(),
            features: r.features,
            roles: r.roles,
            read_only: r.read_only,
            created_at: r.created_at,
            expires_at: r.expires_at,
            revoked_at: r.revoked_at,
            last_used_at: r.last_used_at,
            created_by: r.created_by,
        }
    }
}

/// A session to create for a user.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewSession {
    pub user_id: String,
    #[serde(default)]
    pub tenant_id: Option<String>,
    #[serde(default)]
    pub organization_id: Option<String>,
    #[serde(default)]
    pub roles: Vec<String>,
    #[serde(default)]
    pub features: Vec<String>,
    #[serde(default)]
    pub read_only: bool,
    /// Default [`super::DEFAULT_SESSION_TTL_MINUTES`]; at most [`super::MAX_SESSION_TTL_MINUTES`].
    #[serde(default)]
    pub ttl_minutes: Option<u32>,
    /// The user's own upstream credentials, `{"api": "github", "headers": {"Authorization":
    /// "Bearer …"}}` (or a list of such, one per API): stored sealed, sent on this session's
    /// calls to that API only, in place of its configured headers of the same name, never
    /// returned. Without `api`, for the one API the server serves (refused with several).
    #[serde(
        default,
        deserialize_with = "crate::auth::session_upstream::one_or_many"
    )]
    pub upstream: Vec<UpstreamInput>,
    #[serde(skip)]
    pub created_by: Option<String>,
}

/// A session just created: the only time its token is available.
#[derive(Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatedSession {
    pub id: Uuid,
    pub token: String,
    pub expires_at: DateTime<Utc>,
    pub user_id: String,
    pub tenant_id: Option<String>,
    pub organization_id: Option<String>,
    pub roles: Vec<String>,
    pub features: Vec<String>,
    pub read_only: bool,
    /// The names of the upstream headers the session carries (never their values).
    pub upstream_headers: Vec<String>,
    /// The APIs those headers are for (none: the one API served).
    pub upstream_apis: Vec<String>,
}

crate::debug_fields!(CreatedSession {
    id,
    token: "<redacted>",
    expires_at,
    user_id,
    ..
});

/// A session as listed: who it is for and what it may do, never its token.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionInfo {
    pub id: Uuid,
    pub user_id: String,
    pub tenant_id: Option<String>,
    pub organization_id: Option<String>,
    pub roles: Vec<String>,
    pub features: Vec<String>,
    pub read_only: bool,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub created_by: Option<String>,
    /// `active`, `expired` or `revoked`.
    pub status: &'static str,
    /// The names of the upstream headers the session carries (never their values; none once
    /// it is revoked or expired and purged).
    pub upstream_headers: Vec<String>,
    /// The APIs those headers are for (none: the one API served).
    pub upstream_apis: Vec<String>,
}

impl SessionInfo {
    /// The session of row `r` as listed at `now` (which decides `expired`).
    pub(super) fn from_row(r: KeyRow, now: DateTime<Utc>) -> SessionInfo {
        SessionInfo {
            status: match (r.revoked_at, r.expires_at) {
                (Some(_), _) => "revoked",
                (None, Some(t)) if t <= now => "expired",
                _ => "active",
            },
            id: r.id,
            user_id: r.user_id.unwrap_or_default(),
            tenant_id: r.tenant_id,
            organization_id: r.organization_id,
            roles: r.roles,
            features: r.features,
            read_only: r.read_only,
            created_at: r.created_at,
            expires_at: r.expires_at,
            revoked_at: r.revoked_at,
            last_used_at: r.last_used_at,
            created_by: r.created_by,
            upstream_headers: r.upstream_header_names.unwrap_or_default(),
            upstream_apis: r.upstream_apis.unwrap_or_default(),
        }
    }
}

/// Which sessions to list.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SessionQuery {
    /// Only this user's sessions.
    #[serde(default)]
    pub user: Option<String>,
    /// Revoked and expired sessions too.
    #[serde(default)]
    pub all: bool,
    /// Rows per page (default [`super::DEFAULT_PAGE`], at most [`super::MAX_PAGE`]).
    #[serde(default)]
    pub limit: Option<u32>,
    /// `nextCursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// One page of sessions; `next_cursor` fetches the next one.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionPage {
    pub sessions: Vec<SessionInfo>,
    pub next_cursor: Option<String>,
}

/// Which audit rows to read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuditQuery {
    /// Rows at or after this time.
    #[serde(default)]
    pub since: Option<DateTime<Utc>>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub session: Option<Uuid>,
    /// Rows per page (default [`super::DEFAULT_PAGE`], at most [`super::MAX_PAGE`]).
    #[serde(default)]
    pub limit: Option<u32>,
    /// `nextCursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// One page of audit rows, newest first; `next_cursor` fetches older ones.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditPage {
    pub entries: Vec<AuditRow>,
    pub next_cursor: Option<String>,
}

/// A session named by its id or by its token.
#[derive(Clone, PartialEq, Eq)]
pub enum SessionRef {
    Id(Uuid),
    Token(String),
}

impl fmt::Debug for SessionRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionRef::Id(id) => f.debug_tuple("Id").field(id).finish(),
            SessionRef::Token(_) => f.write_str("Token(<redacted>)"),
        }
    }
}

impl SessionRef {
    /// `sess_…` is a token; anything else must be a session id (UUID).
    pub fn parse(text: &str) -> Result<SessionRef, AdminError> {
        let text = text.trim();
        if text.starts_with(secrets::SESSION_PREFIX) {
            if secrets::is_session_token(text) {
                return Ok(SessionRef::Token(text.to_string()));
            }
            return Err(AdminError::Invalid(
                "a session token has the form sess_ followed by 32 hex digits".into(),
            ));
        }
        Uuid::parse_str(text).map(SessionRef::Id).map_err(|_| {
            AdminError::Invalid(format!(
                "{text:?} is neither a session token (sess_…) nor a session id (UUID)"
            ))
        })
    }
}

/// A revocation that happened (or had happened before: revoking twice keeps the first time).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Revocation {
    pub id: Uuid,
    pub revoked_at: DateTime<Utc>,
}

/// A role as listed.
pub(crate) type Role = RoleRow;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_refs() {
        let id = Uuid::new_v4();
        assert_eq!(
            SessionRef::parse(&id.to_string()).unwrap(),
            SessionRef::Id(id)
        );
        let t = secrets::generate_session_token();
        assert_eq!(SessionRef::parse(&t).unwrap(), SessionRef::Token(t.clone()));
        assert!(SessionRef::parse("sess_nothex").is_err());
        assert!(SessionRef::parse("42").is_err());
        assert!(!format!("{:?}", SessionRef::Token(t.clone())).contains(&t));
    }
}
