//! Server keys (argon2id), session tokens (SHA-256 digests, TTL), roles and features, the
//! `Principal`, rate limits, the audit hook. Imports `store`; never axum or rmcp.
//!
//! Tier 1 ([`Auth::authenticate_key`]) runs on every HTTP request; tier 2
//! ([`Auth::authenticate_session`]) on every tool call in production. Both cache verified
//! results for at most [`MAX_CACHE_TTL`]; revocations and role changes made by any instance reach
//! every instance's cache at once through the store's `LISTEN/NOTIFY` channel.
//!
//! Here: [`Auth`] and its settings, rate limits, the audit hook and the admin shortcuts. The
//! two tiers are in `verify.rs`, the caches they fill in `cache.rs`, who a caller is and what it
//! may do in `principal.rs`, the admin operations in `admin/`, bearer tokens (`oauth/`) and the
//! signed-in people they are (their stored upstream credentials) in `signed_in.rs`.

mod admin;
mod audit;
mod audit_budget;
mod cache;
mod features;
pub mod identity;
mod leases;
pub mod oauth;
mod principal;
mod rate;
pub mod sealed;
mod secrets;
pub mod session_upstream;
mod signed_in;
mod token_arg;
mod verify;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use moka::future::Cache;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use uuid::Uuid;

pub(crate) use admin::{
    ADMIN_AUDIT_TOOL, Actor, DEFAULT_SESSION_TTL_MINUTES, Role, SessionPage, SessionQuery,
};
pub use admin::{
    Admin, AdminError, AuditPage, AuditQuery, CreatedKey, CreatedSession, KeyInfo, NewKey,
    NewSession, OAuthUserInfo, OAuthUserPage, OAuthUserQuery, OAuthUserRef, OAuthUserUpstream,
    Revocation, SessionRef,
};
pub use features::{Features, PermissionRules, RuleError, RuleSpec};
pub use leases::{Lease, Leases, NoLease};
pub use principal::{KeyPrincipal, Person, Principal};
pub use rate::{LimitsUnavailable, RateLimit};
pub(crate) use token_arg::{
    SESSION_TOKEN_HEADER, add_session_token_param, choose_session_token, take_session_token,
};

use crate::spec::Method;
use crate::store::{AuditEntry, Decision, Store, StoreError};
use crate::types::Code;
use audit::AuditWriter;
use audit_budget::AuditBudget;
use cache::{Caches, Digest, listen_for_invalidations};
use rate::{Limiter, Refused, Subject};
use sealed::SecretKeys;

/// An audit row of an admin action (`tool` = `admin`) by `key`, shown as `actor`; the caller
/// adds the target, method and route it knows.
fn admin_entry(
    key: Option<&KeyPrincipal>,
    actor: Option<String>,
    operation: &str,
    decision: Decision,
    code: Option<Code>,
) -> AuditEntry {
    AuditEntry {
        key_id: key.and_then(|k| k.key_id),
        session_id: None,
        user_id: None,
        tenant_id: None,
        organization_id: None,
        credential_sources: Vec::new(),
        tool: ADMIN_AUDIT_TOOL.into(),
        actor,
        target: None,
        operation: Some(operation.into()),
        method: None,
        path: None,
        decision,
        upstream_status: None,
        duration_ms: 0,
        error_code: code,
        at: Utc::now(),
        call_id: Uuid::new_v4(),
    }
}

/// The longest time a verified credential is trusted without asking the database.
pub(crate) const MAX_CACHE_TTL: Duration = Duration::from_secs(60);

/// The feature that admits a server key to `/admin/v1/*`.
pub(crate) const ADMIN_FEATURE: &str = "apigate.admin";

/// The audit row's `operation` for a reload of the APIs (`Auth::record_reload`).
pub(crate) const RELOAD_ACTION: &str = "apis.reload";

/// Why a caller was turned away. Adapters map each variant to a stable code for the agent.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuthError {
    #[error("{0}")]
    Unauthorized(String),
    #[error(
        "the session has expired; ask for a new session token (sessions live {DEFAULT_SESSION_TTL_MINUTES} minutes unless created otherwise)"
    )]
    SessionExpired,
    #[error("permission denied: this caller lacks the feature `{missing}`")]
    Forbidden { missing: String },
    #[error(
        "permission denied: a read-only caller may only use GET, HEAD and OPTIONS, not {method}"
    )]
    ReadOnly { method: Method },
    #[error("rate limit exceeded; retry in {retry_after_ms} ms")]
    RateLimited { retry_after_ms: u64 },
    #[error("authentication is unavailable: the database cannot be reached")]
    Unavailable(String),
    /// The rate limits shared by the replicas could not be checked and
    /// `--limits-unavailable closed` refuses the call.
    #[error(
        "the rate limits shared by the replicas cannot be checked: Postgres did not answer; \
         the call is refused (--limits-unavailable closed)"
    )]
    LimitsUnavailable,
    /// The session carries upstream credentials this server cannot open (no or another
    /// secret key): its calls fail rather than go out with the server's credentials.
    #[error(
        "this session's upstream credentials cannot be used: {0}; ask the operator to configure \
         the secret key they were stored with, or create a new session"
    )]
    Credentials(String),
}

impl AuthError {
    fn from_store(e: &StoreError) -> AuthError {
        tracing::error!(error = %e, "credential lookup failed");
        AuthError::Unavailable(e.to_string())
    }
}

/// Settings for [`Auth`]. `Debug` hides the bootstrap key.
#[derive(Clone)]
pub struct AuthConfig {
    /// `MCP_SERVER_API_KEY`: accepted as a server key with every feature.
    pub bootstrap_key: Option<String>,
    /// How long verified credentials are cached; clamped to [`MAX_CACHE_TTL`].
    pub cache_ttl: Duration,
    pub cache_capacity: u64,
    pub key_rate: RateLimit,
    pub session_rate: RateLimit,
    /// argon2id verifications per public id and source address (cache misses of keys not
    /// verified before on this instance): bounds the CPU someone guessing secrets can burn,
    /// without locking the key out for its owner at another address.
    pub verify_rate: RateLimit,
    /// What a rate check does when Postgres does not answer (`--limits-unavailable`).
    pub limits_unavailable: LimitsUnavailable,
    /// Opens (and, through the admin operations, seals) sessions' upstream credentials.
    pub secret_keys: Option<Arc<SecretKeys>>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            bootstrap_key: None,
            cache_ttl: MAX_CACHE_TTL,
            cache_capacity: 10_000,
            key_rate: RateLimit {
                per_second: 50.0,
                burst: 100,
            },
            session_rate: RateLimit {
                per_second: 10.0,
                burst: 30,
            },
            verify_rate: RateLimit {
                per_second: 0.2,
                burst: 10,
            },
            limits_unavailable: LimitsUnavailable::Closed,
            secret_keys: None,
        }
    }
}

crate::debug_fields!(|c: AuthConfig| {
    bootstrap_key: c.bootstrap_key.as_ref().map(|_| "<redacted>"),
    cache_ttl,
    cache_capacity,
    key_rate,
    session_rate,
    verify_rate,
    limits_unavailable,
    secret_keys,
});

struct Inner {
    store: Store,
    bootstrap_key: Option<String>,
    caches: Caches,
    limiter: Limiter,
    /// Bounds concurrent argon2 verifications (each uses 19 MiB and a core for ~50 ms).
    verify_slots: Semaphore,
    /// Public id → (SHA-256 of the full key, stored hash) once argon2 accepted it: a key seen
    /// before skips argon2 and the verification throttle when its cache entry expires, so
    /// someone guessing secrets for its public id cannot lock it out. The row (revocation,
    /// features) is still read every time.
    verified: Cache<String, Arc<(Digest, String)>>,
    listener: JoinHandle<()>,
    /// Deletes expired sessions' upstream credentials every [`PURGE_EVERY`].
    purger: JoinHandle<()>,
    audit: AuditWriter,
    /// Bounds the refused-call rows one caller can write.
    audit_budget: AuditBudget,
    /// The MCP sessions and listen streams each key holds on every replica.
    leases: Arc<Leases>,
    keys: Option<Arc<SecretKeys>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.listener.abort();
        self.purger.abort();
    }
}

/// How often expired sessions' upstream credentials are deleted.
pub(crate) const PURGE_EVERY: Duration = Duration::from_secs(60);

async fn purge_expired_credentials(store: Store) {
    let mut tick = tokio::time::interval(PURGE_EVERY);
    loop {
        tick.tick().await;
        // Full rate buckets and expired session leases say nothing a missing row would not.
        match store.purge_shared().await {
            Err(e) if e.is_pool_closed() => return,
            Err(e) => tracing::debug!(error = %e, "could not purge shared limits' rows"),
            Ok(_) => {}
        }
        match store.purge_session_credentials().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                sessions = n,
                "deleted the upstream credentials of expired sessions"
            ),
            Err(e) if e.is_pool_closed() => return,
            Err(e) => tracing::warn!(error = %e, "could not purge expired sessions' credentials"),
        }
    }
}

/// Authentication, permissions, rate limits and audit over one store. Cheap to clone.
#[derive(Clone)]
pub struct Auth {
    inner: Arc<Inner>,
}

crate::debug_fields!(Auth { .. });

impl Auth {
    /// Subscribes to credential changes (so it fails when the database is unreachable) and
    /// starts the task that applies them to this instance's caches.
    pub async fn new(store: Store, cfg: AuthConfig) -> Result<Auth, StoreError> {
        let caches = Caches::new(cfg.cache_ttl.min(MAX_CACHE_TTL), cfg.cache_capacity);
        let listener = store.listen().await?;
        let task = tokio::spawn(listen_for_invalidations(caches.clone(), listener));
        let slots = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
        if cfg
            .bootstrap_key
            .as_ref()
            .is_some_and(|k| !k.is_empty() && k.len() < 24)
        {
            tracing::warn!(
                "MCP_SERVER_API_KEY is shorter than 24 characters; use a long random value"
            );
        }
        Ok(Auth {
            inner: Arc::new(Inner {
                store: store.clone(),
                bootstrap_key: cfg.bootstrap_key.filter(|k| !k.is_empty()),
                caches,
                limiter: Limiter::new(cfg.key_rate, cfg.session_rate, cfg.verify_rate).shared(
                    store.clone(),
                    "calls",
                    cfg.limits_unavailable,
                ),
                verify_slots: Semaphore::new(slots),
                verified: Cache::builder()
                    .max_capacity(cfg.cache_capacity)
                    .time_to_live(Duration::from_secs(24 * 3600))
                    .build(),
                listener: task,
                purger: tokio::spawn(purge_expired_credentials(store.clone())),
                audit: AuditWriter::start(store.clone()),
                audit_budget: AuditBudget::shared(store.clone()),
                leases: Arc::new(Leases::new(store.clone(), cfg.limits_unavailable)),
                keys: cfg.secret_keys,
            }),
        })
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The session counts every replica shares (`--max-sessions-per-key`).
    pub fn leases(&self) -> Arc<Leases> {
        self.inner.leases.clone()
    }

    /// Whether the database answers (`/health`): one `SELECT 1`.
    pub async fn ping(&self) -> Result<(), crate::store::StoreError> {
        self.inner.store.ping().await
    }

    /// Deletes the upstream credentials of expired sessions now (a task also does it every
    /// [`PURGE_EVERY`]); returns how many sessions lost theirs.
    pub async fn purge_expired_credentials(&self) -> Result<u64, StoreError> {
        let n = self.inner.store.purge_session_credentials().await?;
        if n > 0 {
            // Our own notifications arrive too, but do not wait for them.
            self.inner.caches.flush();
        }
        Ok(n)
    }

    /// Records the names of the APIs this server serves (`""` for the one of `--spec`), at
    /// start-up and after each reload, so that credentials stored by `apigate sessions create`
    /// or the admin API are checked against them. A failure is logged: it changes no call.
    pub async fn record_served_apis(&self, names: &[String]) {
        if let Err(e) = self.inner.store.record_served_apis(names).await {
            tracing::warn!(error = %e, "could not record the APIs served; credentials stored \
                now are checked against the names recorded before");
        }
    }

    // ---- rate limits and audit --------------------------------------------------------------------

    /// Takes one call from every bucket of the principal at once (its own, and its key's).
    pub async fn check_rate(&self, principal: &Principal) -> Result<(), AuthError> {
        self.take(&principal.rate_subjects()).await
    }

    /// The rate check of a call by a fixed principal (dev mode: a key alone): all its buckets.
    pub(crate) async fn check_key_rate(&self, principal: &Principal) -> Result<(), AuthError> {
        self.take(&principal.rate_subjects()).await
    }

    /// Whether every bucket of `principal` holds a call in this process, without taking it:
    /// the first check of a tool call, before a session token is looked up. A key that spent
    /// its budget here (on failed session checks, or on its sessions' and people's calls) is
    /// refused without a query; the call is taken later, with its session's or person's, from
    /// the buckets every replica shares ([`Auth::check_session_rate`]).
    pub(crate) fn rate_holds(&self, principal: &Principal) -> Result<(), AuthError> {
        self.inner
            .limiter
            .peek(&principal.rate_subjects())
            .map_err(refused)
    }

    /// Spends one call of the key's budget for a session check that failed (a missing, wrong
    /// or expired token): guessing tokens is limited like any other call of the key. When the
    /// budget is spent the caller answers with this refusal instead of the session check's
    /// verdict, so calls beyond the key's rate learn nothing about the tokens they tried, on
    /// every replica and however many arrive at once.
    pub(crate) async fn spend_key_rate(&self, key: &Principal) -> Result<(), AuthError> {
        self.take(&key.rate_subjects()).await
    }

    /// Takes one call (one page) from the bucket of the session or person and from its key's,
    /// together: a call its own budget refuses spends nothing of the key's bucket, which the
    /// key's other sessions and people share. Nothing for a principal with neither (its key
    /// was taken by [`Auth::check_key_rate`]).
    pub(crate) async fn check_session_rate(&self, principal: &Principal) -> Result<(), AuthError> {
        if principal.session_id.is_none() && principal.person.is_none() {
            return Ok(());
        }
        self.take(&principal.rate_subjects()).await
    }

    async fn take(&self, subjects: &[Subject]) -> Result<(), AuthError> {
        self.inner.limiter.take(subjects).await.map_err(refused)
    }

    /// Writes one audit row. Never fails the call: while the database is unreachable the row
    /// is held in memory and written when it is back (`auth/audit.rs`). Rows of refused calls
    /// are bounded per caller (`auth/audit_budget.rs`): beyond the budget they are counted
    /// and summarised instead of written one by one.
    pub async fn record_audit(&self, entry: AuditEntry) {
        for row in self.inner.audit_budget.admit(entry).await {
            self.inner.audit.record(row).await;
        }
    }

    /// Writes the audit row of a call that ran (not a refusal: those are budgeted) in the
    /// background, without waiting: for a call whose future is dropped before it ends.
    pub(crate) fn record_audit_later(&self, entry: AuditEntry) {
        debug_assert!(entry.decision != Decision::Denied);
        self.inner.audit.record_later(entry);
    }

    /// Records a request the admin API turned away: by `key` when it was verified (but lacks
    /// [`ADMIN_FEATURE`] or is rate-limited), else by nobody, naming the public id of the key
    /// presented when it has a key's shape (never any part of its secret). `route` is the
    /// route template, `code` the refusal's code. Bounded like every refusal
    /// (`auth/audit_budget.rs`): per key, and for all unauthenticated callers together.
    pub(crate) async fn record_admin_refusal(
        &self,
        key: Option<&KeyPrincipal>,
        presented: &str,
        method: &str,
        route: Option<&str>,
        code: Code,
    ) {
        let target = match key {
            Some(_) => None,
            None => secrets::parse_key(presented).map(|(public_id, _)| format!("key:{public_id}")),
        };
        let mut entry = admin_entry(
            key,
            key.map(KeyPrincipal::label),
            admin::ADMIN_ACCESS,
            Decision::Denied,
            Some(code),
        );
        entry.target = target;
        entry.method = Some(method.to_string());
        entry.path = route.map(str::to_string);
        self.record_audit(entry).await;
    }

    /// Records a reload of the APIs (`apis.reload`): asked by `key` through the admin route,
    /// or by `trigger` (`SIGHUP`, `file`, `poll`) when no key asked. `refused` is the code of
    /// a reload that did not happen or did not load (`RATE_LIMITED`, `RELOAD_FAILED`); the
    /// row names what changed as `target` (`apis:NAME,NAME`), never a path or an error text.
    pub async fn record_reload(
        &self,
        key: Option<&KeyPrincipal>,
        trigger: &str,
        target: Option<String>,
        refused: Option<Code>,
    ) {
        let decision = match refused {
            None => Decision::Allowed,
            Some(Code::RateLimited) => Decision::Denied,
            Some(_) => Decision::Failed,
        };
        let actor = key.map_or_else(|| trigger.to_string(), KeyPrincipal::label);
        let mut entry = admin_entry(key, Some(actor), RELOAD_ACTION, decision, refused);
        entry.target = target;
        self.record_audit(entry).await;
    }

    /// At shutdown: waits up to `limit` for held audit rows to be written; returns how many
    /// could not be.
    pub async fn drain_audit(&self, limit: Duration) -> usize {
        self.inner.audit.drain(limit).await
    }

    // ---- admin, with immediate local invalidation ------------------------------------------------

    /// The admin operations over this instance's store and caches, with full powers, acting as
    /// `operator` (in-process callers: start-up checks, tests).
    pub fn admin(&self) -> Admin {
        Admin::new(self.inner.store.clone())
            .acting_as(Actor::operator("operator"))
            .with_caches(self.inner.caches.clone())
            .with_secret_keys(self.inner.keys.clone())
    }

    /// The admin operations as `key` (the admin API): read-only keys only read, and nothing is
    /// granted beyond the key's own features.
    pub(crate) fn admin_as(&self, key: &KeyPrincipal) -> Admin {
        self.admin().acting_as(Actor::key(key))
    }

    pub async fn create_key(&self, req: NewKey) -> Result<CreatedKey, AdminError> {
        self.admin().create_key(req).await
    }

    pub async fn list_keys(&self) -> Result<Vec<KeyInfo>, AdminError> {
        self.admin().list_keys().await
    }

    pub async fn revoke_key(&self, id_or_public_id: &str) -> Result<Revocation, AdminError> {
        self.admin().revoke_key(id_or_public_id).await
    }

    pub async fn create_session(&self, req: NewSession) -> Result<CreatedSession, AdminError> {
        self.admin().create_session(req).await
    }

    pub async fn revoke_session(&self, which: &SessionRef) -> Result<Revocation, AdminError> {
        self.admin().revoke_session(which).await
    }

    pub async fn set_role(&self, name: &str, features: &[String]) -> Result<Role, AdminError> {
        self.admin().set_role(name, features).await
    }

    pub async fn list_roles(&self) -> Result<Vec<Role>, AdminError> {
        self.admin().list_roles().await
    }
}

/// A rate check's refusal as the caller reads it.
fn refused(r: Refused) -> AuthError {
    match r {
        Refused::Wait(wait) => AuthError::RateLimited {
            retry_after_ms: millis(wait),
        },
        Refused::Unavailable => AuthError::LimitsUnavailable,
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_debug_hides_the_bootstrap_key() {
        let cfg = AuthConfig {
            bootstrap_key: Some("super-secret-value".into()),
            ..AuthConfig::default()
        };
        assert!(!format!("{cfg:?}").contains("super-secret-value"));
    }
}
