//! Managing credentials: create, list and revoke server keys; create and revoke sessions; set
//! and list roles; store people's upstream credentials (`users.rs`). The one implementation behind `/admin/v1/*` and `apigate keys|sessions|roles`.
//! Works on a bare `Store` (the CLI has no caches); revocations are announced by the store, so
//! running servers drop their cached entries at once.
//!
//! Every change is made by an [`Actor`] and written to the audit log (tool `admin`: who, what,
//! to what; never a key or token), refusals too. A read-only actor may only read, and nobody
//! hands out a feature (directly or through a role) that they do not hold themselves.

mod types;
mod users;
mod validate;

use std::sync::Arc;

use chrono::{Duration as ChronoDuration, Utc};
use uuid::Uuid;

pub use types::{
    AuditPage, AuditQuery, CreatedKey, CreatedSession, KeyInfo, NewKey, NewSession, Revocation,
    SessionRef,
};
pub(crate) use types::{Role, SessionInfo, SessionPage, SessionQuery};
pub use users::{OAuthUserInfo, OAuthUserPage, OAuthUserQuery, OAuthUserRef, OAuthUserUpstream};
pub(crate) use validate::MAX_ID_CHARS;
use validate::{
    bad_cursor, clean_features, dedup, invalid_role_name, keep_page, non_blank, offset_cursor,
    page_size, printable_id, valid_role_name,
};

use super::cache::Caches;
use super::sealed::{HOW_TO_SET_A_KEY, SecretKeys};
use super::secrets;
use super::session_upstream::{ServedApis, SessionUpstream};
use super::{Features, KeyPrincipal};
use crate::store::{
    self, AuditEntry, AuditFilter, Decision, Invalidation, RevokeTarget, Store, StoreError,
};
use crate::types::Code;

/// The `tool` of the audit rows that admin actions write.
pub(crate) const ADMIN_AUDIT_TOOL: &str = "admin";

/// The `operation` of the audit row of a request the admin API turned away before any action
/// (no key, a wrong secret, a key without `apigate.admin`, rate-limited).
pub(crate) const ADMIN_ACCESS: &str = "admin.access";

/// How long a session lives unless its creator says otherwise.
pub(crate) const DEFAULT_SESSION_TTL_MINUTES: u32 = 120;
/// The longest session TTL accepted (30 days).
pub(crate) const MAX_SESSION_TTL_MINUTES: u32 = 30 * 24 * 60;
/// Rows in one page of a listing unless the caller asks for fewer or more.
pub(crate) const DEFAULT_PAGE: u32 = 100;
/// The most rows one page of a listing returns.
pub(crate) const MAX_PAGE: u32 = 1000;

/// Why an admin operation failed; adapters map these to 400 / 404 / 503 / 500.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    #[error(
        "permission denied: this admin key is read-only; it may list and read but not {action}"
    )]
    ReadOnly { action: &'static str },
    #[error(
        "permission denied: cannot grant `{missing}`: the caller does not hold it (a key may only \
         hand out features it holds itself, directly or through roles)"
    )]
    BeyondOwn { missing: String },
    #[error(
        "permission denied: the role `{role}` holds `{missing}`, which the caller does not hold; \
         only a caller holding every feature of a role, before and after the change, may \
         change it (its members hold them all)"
    )]
    RoleBeyondOwn { role: String, missing: String },
    #[error("{0}")]
    Conflict(String),
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    #[error("internal error; see the server log")]
    Internal,
}

impl From<StoreError> for AdminError {
    fn from(e: StoreError) -> Self {
        if e.is_unavailable() {
            AdminError::Unavailable(e.to_string())
        } else {
            tracing::error!(error = %e, "admin operation failed");
            AdminError::Internal
        }
    }
}

/// Who performs admin actions, as the audit log names them, and what they may hand out.
#[derive(Debug, Clone)]
pub(crate) struct Actor {
    /// `cli`, `bootstrap` or `key:<public id>`.
    pub label: String,
    /// The server key acting, if it is one from the database.
    pub key_id: Option<Uuid>,
    /// What the actor may grant: a key's own features ∪ its roles' (everything for the
    /// operator and the bootstrap key).
    pub features: Features,
    /// A read-only key may only read.
    pub read_only: bool,
}

impl Actor {
    /// Someone with the database itself (the CLI): bounded by nothing apigate could check.
    pub fn operator(label: &str) -> Actor {
        Actor {
            label: label.to_string(),
            key_id: None,
            features: Features::all(),
            read_only: false,
        }
    }

    /// A server key over the admin API: bounded by its own features.
    pub fn key(key: &KeyPrincipal) -> Actor {
        Actor {
            label: key.label(),
            key_id: key.key_id,
            features: key.features.clone(),
            read_only: key.read_only,
        }
    }
}

/// Admin operations over a store, by one actor.
#[derive(Clone)]
pub struct Admin {
    store: Store,
    actor: Actor,
    /// The server's credential caches, emptied at once on revocation (the CLI has none).
    caches: Option<Caches>,
    /// Seals sessions' upstream credentials; without it sessions cannot carry any.
    keys: Option<Arc<SecretKeys>>,
}

crate::debug_fields!(|a: Admin| { actor: a.actor.label, .. });

impl Admin {
    /// The CLI's admin: acts as `cli`, bounded by nothing (it has the database itself).
    pub fn new(store: Store) -> Admin {
        Admin {
            store,
            actor: Actor::operator("cli"),
            caches: None,
            keys: None,
        }
    }

    /// The same operations, able to store sessions' upstream credentials sealed with `keys`.
    pub(crate) fn with_secret_keys(self, keys: Option<Arc<SecretKeys>>) -> Admin {
        Admin { keys, ..self }
    }

    /// The same operations, acting as `actor`.
    pub(crate) fn acting_as(self, actor: Actor) -> Admin {
        Admin { actor, ..self }
    }

    pub(super) fn with_caches(self, caches: Caches) -> Admin {
        Admin {
            caches: Some(caches),
            ..self
        }
    }

    /// The names of the APIs the servers serve, as the last one to start or reload recorded
    /// them (`""` for the one API of `--spec`; none before a server ever ran).
    pub async fn served_api_names(&self) -> Result<Vec<String>, AdminError> {
        Ok(self.store.served_apis().await?)
    }

    /// Refuses credentials for an API the servers do not serve, and, while they serve several,
    /// headers that name no API (what the last server to start or reload recorded).
    async fn fits_served(&self, up: &SessionUpstream) -> Result<(), AdminError> {
        let served = ServedApis::from_names(self.store.served_apis().await?);
        up.fits(&served).map_err(AdminError::Invalid)
    }

    /// Writes the audit row of an action. The action has happened (or was refused): a row
    /// that cannot be written is logged, not turned into a failure.
    async fn record(
        &self,
        action: &'static str,
        target: Option<String>,
        refused: Option<&AdminError>,
    ) {
        let entry = AuditEntry {
            key_id: self.actor.key_id,
            session_id: None,
            user_id: None,
            tenant_id: None,
            tool: ADMIN_AUDIT_TOOL.into(),
            operation: Some(action.into()),
            method: None,
            path: None,
            decision: if refused.is_some() {
                Decision::Denied
            } else {
                Decision::Allowed
            },
            upstream_status: None,
            duration_ms: 0,
            error_code: refused.map(|_| Code::Forbidden),
            at: Utc::now(),
            call_id: Uuid::new_v4(),
            actor: Some(self.actor.label.clone()),
            target,
            organization_id: None,
            credential_sources: Vec::new(),
        };
        if let Err(e) = self.store.insert_audit(&entry).await {
            tracing::error!(error = %e, action, actor = %self.actor.label,
                "could not write the audit row of an admin action");
        }
    }

    /// Refuses (and audits) a change by a read-only actor.
    async fn may_change(
        &self,
        action: &'static str,
        target: impl FnOnce() -> Option<String>,
    ) -> Result<(), AdminError> {
        if !self.actor.read_only {
            return Ok(());
        }
        let e = AdminError::ReadOnly {
            action: describe(action),
        };
        tracing::warn!(actor = %self.actor.label, action, "read-only admin key refused a change");
        self.record(action, target(), Some(&e)).await;
        Err(e)
    }

    /// Refuses (and audits) handing out `features`, or roles granting features, that the actor
    /// does not hold.
    async fn may_grant(
        &self,
        action: &'static str,
        target: Option<String>,
        features: &[String],
        roles: &[String],
    ) -> Result<(), AdminError> {
        let mut wanted = features.to_vec();
        if !roles.is_empty() {
            let all = self.store.list_roles().await?;
            wanted.extend(
                all.into_iter()
                    .filter(|r| roles.contains(&r.name))
                    .flat_map(|r| r.features),
            );
        }
        let Some(missing) = self
            .actor
            .features
            .first_uncovered(wanted.iter().map(String::as_str))
        else {
            return Ok(());
        };
        let e = AdminError::BeyondOwn {
            missing: missing.to_string(),
        };
        tracing::warn!(actor = %self.actor.label, action, missing,
            "admin action refused: it would grant a feature the caller lacks");
        self.record(action, target, Some(&e)).await;
        Err(e)
    }

    pub async fn create_key(&self, req: NewKey) -> Result<CreatedKey, AdminError> {
        let name = req.name.trim();
        if name.is_empty() || name.chars().count() > 100 {
            return Err(AdminError::Invalid(
                "a key needs a name of 1 to 100 characters".into(),
            ));
        }
        printable_id("name", name)?;
        self.may_change(KEY_CREATE, || None).await?;
        let features = clean_features(&req.features)?;
        let roles = self.checked_roles(&req.roles).await?;
        self.may_grant(KEY_CREATE, None, &features, &roles).await?;
        let created_by = req.created_by.unwrap_or_else(|| self.actor.label.clone());
        let generated = secrets::generate_key();
        let secret = generated.secret.clone();
        let hash = tokio::task::spawn_blocking(move || secrets::hash_secret(&secret))
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "hashing task failed");
                AdminError::Internal
            })?
            .map_err(|e| {
                tracing::error!(error = %e, "argon2 hashing failed");
                AdminError::Internal
            })?;
        let row = self
            .store
            .insert_key(&store::NewRow {
                id: Uuid::new_v4(),
                features: &features,
                roles: &roles,
                read_only: req.read_only,
                created_by: Some(created_by.as_str()),
                kind: store::NewKind::ServerKey {
                    name,
                    public_id: &generated.public_id,
                    secret_hash: &hash,
                },
            })
            .await?;
        self.record(
            KEY_CREATE,
            Some(format!("key:{}", generated.public_id)),
            None,
        )
        .await;
        Ok(CreatedKey {
            id: row.id,
            key: generated.full,
            name: name.to_string(),
            public_id: generated.public_id,
            features: row.features,
            roles: row.roles,
            read_only: row.read_only,
            created_at: row.created_at,
        })
    }

    pub async fn list_keys(&self) -> Result<Vec<KeyInfo>, AdminError> {
        let rows = self.store.list_server_keys().await?;
        Ok(rows.into_iter().map(KeyInfo::from_row).collect())
    }

    /// Revokes a server key named by its id (UUID) or its public id (the 8 characters after
    /// `agk_`).
    pub async fn revoke_key(&self, id_or_public_id: &str) -> Result<Revocation, AdminError> {
        let text = id_or_public_id.trim();
        let target_label = || Some(format!("key:{}", text.chars().take(40).collect::<String>()));
        self.may_change(KEY_REVOKE, target_label).await?;
        let target = match Uuid::parse_str(text) {
            Ok(id) => RevokeTarget::ServerKey(id),
            Err(_) if secrets::is_public_id(text) => RevokeTarget::ServerKeyPublicId(text),
            Err(_) => {
                return Err(AdminError::Invalid(format!(
                    "{text:?} is neither a key id (UUID) nor a public id (8 characters)"
                )));
            }
        };
        self.revoke(KEY_REVOKE, target, Invalidation::Key, |_| target_label())
            .await?
            .ok_or_else(|| AdminError::NotFound(format!("no server key {text}")))
    }

    pub async fn create_session(&self, req: NewSession) -> Result<CreatedSession, AdminError> {
        self.may_change(SESSION_CREATE, || None).await?;
        let user_id = req.user_id.trim();
        if user_id.is_empty() || user_id.chars().count() > MAX_ID_CHARS {
            return Err(AdminError::Invalid(format!(
                "a session needs a userId of 1 to {MAX_ID_CHARS} characters"
            )));
        }
        printable_id("userId", user_id)?;
        for (field, value) in [
            ("tenantId", req.tenant_id.as_deref()),
            ("organizationId", req.organization_id.as_deref()),
        ] {
            if let Some(v) = non_blank(value) {
                if v.chars().count() > MAX_ID_CHARS {
                    return Err(AdminError::Invalid(format!(
                        "{field} is too long: at most {MAX_ID_CHARS} characters"
                    )));
                }
                printable_id(field, v)?;
            }
        }
        let ttl = req.ttl_minutes.unwrap_or(DEFAULT_SESSION_TTL_MINUTES);
        if ttl == 0 || ttl > MAX_SESSION_TTL_MINUTES {
            return Err(AdminError::Invalid(format!(
                "ttlMinutes must be between 1 and {MAX_SESSION_TTL_MINUTES}"
            )));
        }
        let features = clean_features(&req.features)?;
        let roles = self.checked_roles(&req.roles).await?;
        self.may_grant(SESSION_CREATE, None, &features, &roles)
            .await?;
        let created_by = req.created_by.unwrap_or_else(|| self.actor.label.clone());
        let tenant_id = non_blank(req.tenant_id.as_deref());
        let organization_id = non_blank(req.organization_id.as_deref());
        let id = Uuid::new_v4();
        let upstream = match req.upstream.iter().any(|u| !u.is_empty()) {
            false => None,
            true => {
                let headers = SessionUpstream::check(&req.upstream).map_err(AdminError::Invalid)?;
                self.fits_served(&headers).await?;
                let Some(keys) = &self.keys else {
                    return Err(AdminError::Invalid(format!(
                        "upstream credentials cannot be stored with a session: no secret key is \
                         configured; {HOW_TO_SET_A_KEY}"
                    )));
                };
                let sealed = headers.seal(keys, id).map_err(|e| {
                    tracing::error!(error = %e, "sealing a session's upstream headers failed");
                    AdminError::Internal
                })?;
                Some((sealed, headers.names(), headers.apis()))
            }
        };
        let token = secrets::generate_session_token();
        let digest = secrets::sha256(&token);
        let expires_at = Utc::now() + ChronoDuration::minutes(i64::from(ttl));
        let row = self
            .store
            .insert_key(&store::NewRow {
                id,
                features: &features,
                roles: &roles,
                read_only: req.read_only,
                created_by: Some(created_by.as_str()),
                kind: store::NewKind::Session {
                    token_digest: &digest,
                    user_id,
                    tenant_id,
                    organization_id,
                    expires_at,
                    upstream_headers: upstream.as_ref().map(|(s, _, _)| s.as_slice()),
                    upstream_header_names: upstream.as_ref().map(|(_, n, _)| n.as_slice()),
                    upstream_apis: upstream.as_ref().map(|(_, _, a)| a.as_slice()),
                },
            })
            .await?;
        self.record(SESSION_CREATE, Some(format!("session:{}", row.id)), None)
            .await;
        Ok(CreatedSession {
            id: row.id,
            token,
            expires_at: row.expires_at.unwrap_or(expires_at),
            user_id: user_id.to_string(),
            tenant_id: row.tenant_id,
            organization_id: row.organization_id,
            roles: row.roles,
            features: row.features,
            read_only: row.read_only,
            upstream_headers: row.upstream_header_names.unwrap_or_default(),
            upstream_apis: row.upstream_apis.unwrap_or_default(),
        })
    }

    pub async fn revoke_session(&self, which: &SessionRef) -> Result<Revocation, AdminError> {
        // Named by its id only: a token never goes into the audit log.
        let by_id = match which {
            SessionRef::Id(id) => Some(format!("session:{id}")),
            SessionRef::Token(_) => None,
        };
        self.may_change(SESSION_REVOKE, || by_id).await?;
        let digest;
        let target = match which {
            SessionRef::Id(id) => RevokeTarget::SessionId(*id),
            SessionRef::Token(t) => {
                digest = secrets::sha256(t);
                RevokeTarget::SessionDigest(&digest)
            }
        };
        self.revoke(SESSION_REVOKE, target, Invalidation::Session, |id| {
            Some(format!("session:{id}"))
        })
        .await?
        .ok_or_else(|| AdminError::NotFound("no such session".into()))
    }

    /// Revokes `target`, drops it from this instance's caches at once (the store's
    /// announcement reaches the others) and audits `action` on `label(id)`. `None` when there
    /// is no such credential.
    async fn revoke(
        &self,
        action: &'static str,
        target: RevokeTarget<'_>,
        invalidation: fn(Uuid) -> Invalidation,
        label: impl FnOnce(Uuid) -> Option<String>,
    ) -> Result<Option<Revocation>, AdminError> {
        let Some(r) = self.store.revoke(target).await? else {
            return Ok(None);
        };
        if let Some(c) = &self.caches {
            c.apply(&invalidation(r.id)).await;
        }
        self.record(action, label(r.id), None).await;
        Ok(Some(Revocation {
            id: r.id,
            revoked_at: r.revoked_at,
        }))
    }

    /// Lists sessions, newest first (never tokens).
    pub(crate) async fn list_sessions(&self, q: &SessionQuery) -> Result<SessionPage, AdminError> {
        let limit = page_size(q.limit)?;
        let offset = offset_cursor(q.cursor.as_deref())?;
        let user = non_blank(q.user.as_deref());
        let mut rows = self
            .store
            .list_sessions(user, q.all, i64::from(limit) + 1, i64::from(offset))
            .await?;
        let more = keep_page(&mut rows, limit);
        let now = Utc::now();
        let sessions = rows
            .into_iter()
            .map(|r| SessionInfo::from_row(r, now))
            .collect();
        Ok(SessionPage {
            sessions,
            next_cursor: more.then(|| (offset + limit).to_string()),
        })
    }

    /// Reads the audit log, newest first, one page at a time.
    pub async fn audit(&self, q: &AuditQuery) -> Result<AuditPage, AdminError> {
        let limit = page_size(q.limit)?;
        let before = match q.cursor.as_deref() {
            None => None,
            Some(c) => Some(c.parse::<i64>().map_err(|_| bad_cursor(c))?),
        };
        let filter = AuditFilter {
            since: q.since,
            user: non_blank(q.user.as_deref()).map(str::to_string),
            tool: non_blank(q.tool.as_deref()).map(str::to_string),
            session: q.session,
            before,
        };
        let mut entries = self.store.audit_page(&filter, i64::from(limit) + 1).await?;
        let more = keep_page(&mut entries, limit);
        let next_cursor = more
            .then(|| entries.last().map(|e| e.id.to_string()))
            .flatten();
        Ok(AuditPage {
            entries,
            next_cursor,
        })
    }

    /// Creates or replaces a role's feature list. Every holder of the role gets them, so the
    /// actor must hold them too.
    pub async fn set_role(&self, name: &str, features: &[String]) -> Result<Role, AdminError> {
        let name = name.trim();
        let target = || {
            Some(format!(
                "role:{}",
                name.chars().take(100).collect::<String>()
            ))
        };
        self.may_change(ROLE_SET, target).await?;
        if !valid_role_name(name) {
            return Err(invalid_role_name(name));
        }
        let features = clean_features(features)?;
        // Every key and session holding the role holds its features: the actor must hold
        // what the role grants now (or it could take them away from others: `super []`) and
        // what it will grant (or it could hand them out).
        let before = self
            .store
            .list_roles()
            .await?
            .into_iter()
            .find(|r| r.name == name)
            .map(|r| r.features);
        if let Some(missing) = before.as_deref().and_then(|b| {
            self.actor
                .features
                .first_uncovered(b.iter().map(String::as_str))
        }) {
            let e = AdminError::RoleBeyondOwn {
                role: name.to_string(),
                missing: missing.to_string(),
            };
            tracing::warn!(actor = %self.actor.label, role = name, missing,
                "admin action refused: the role holds a feature the caller lacks");
            self.record(ROLE_SET, target(), Some(&e)).await;
            return Err(e);
        }
        self.may_grant(ROLE_SET, target(), &features, &[]).await?;
        // Written only if the role is still what was checked.
        let Some(role) = self
            .store
            .replace_role(name, before.as_deref(), &features)
            .await?
        else {
            return Err(AdminError::Conflict(format!(
                "the role {name:?} changed while this request was checked; read it again and retry"
            )));
        };
        if let Some(c) = &self.caches {
            c.flush();
        }
        self.record(ROLE_SET, target(), None).await;
        Ok(role)
    }

    pub async fn list_roles(&self) -> Result<Vec<Role>, AdminError> {
        Ok(self.store.list_roles().await?)
    }

    async fn checked_roles(&self, roles: &[String]) -> Result<Vec<String>, AdminError> {
        let roles = dedup(roles);
        if let Some(bad) = roles.iter().find(|r| !valid_role_name(r)) {
            return Err(invalid_role_name(bad));
        }
        let missing = self.store.missing_roles(&roles).await?;
        if !missing.is_empty() {
            return Err(AdminError::Invalid(format!(
                "unknown role(s): {}; create them first (`apigate roles set NAME --features …`)",
                missing.join(", ")
            )));
        }
        Ok(roles)
    }
}

// The actions, as the audit log's `operation` names them.
const KEY_CREATE: &str = "key.create";
const KEY_REVOKE: &str = "key.revoke";
const SESSION_CREATE: &str = "session.create";
const SESSION_REVOKE: &str = "session.revoke";
const ROLE_SET: &str = "role.set";

/// An action in words, for error messages.
fn describe(action: &'static str) -> &'static str {
    match action {
        KEY_CREATE => "create keys",
        KEY_REVOKE => "revoke keys",
        SESSION_CREATE => "create sessions",
        SESSION_REVOKE => "revoke sessions",
        ROLE_SET => "change roles",
        users::USER_UPSTREAM_SET => "store people's upstream credentials",
        users::USER_UPSTREAM_CLEAR => "delete people's upstream credentials",
        other => other,
    }
}
