//! Server keys (argon2id), session tokens (SHA-256 digests, TTL), roles and features, the
//! `Principal`, rate limits, the audit hook. Imports `store`; never axum or rmcp.
//!
//! Tier 1 ([`Auth::authenticate_key`]) runs on every HTTP request; tier 2
//! ([`Auth::authenticate_session`]) on every tool call in production. Both cache verified
//! results for at most [`MAX_CACHE_TTL`]; revocations and role changes made by any instance reach
//! every instance's cache at once through the store's `LISTEN/NOTIFY` channel.

mod admin;
mod audit;
mod audit_budget;
mod features;
pub mod identity;
mod rate;
pub mod sealed;
mod secrets;
pub mod session_upstream;
pub use secrets::secrets_equal;
mod token_arg;

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use moka::future::Cache;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use uuid::Uuid;

pub use admin::{
    ADMIN_AUDIT_TOOL, Actor, Admin, AdminError, AuditPage, AuditQuery, CreatedKey, CreatedSession,
    DEFAULT_SESSION_TTL_MINUTES, KeyInfo, MAX_SESSION_TTL_MINUTES, NewKey, NewSession, Revocation,
    Role, SessionInfo, SessionPage, SessionQuery, SessionRef,
};
pub use features::{Features, PermissionRules, RuleError, RuleSpec};
pub use rate::RateLimit;
pub use token_arg::{
    SESSION_TOKEN_ARG, SESSION_TOKEN_HEADER, add_session_token_param, choose_session_token,
    take_session_token,
};

use crate::spec::Method;
use crate::store::{
    AuditEntry, Decision, Heard, Invalidation, InvalidationListener, KeyRow, Store, StoreError,
};
use audit::AuditWriter;
use audit_budget::AuditBudget;
use rate::{Limiter, Source, Subject};
use sealed::SecretKeys;
use session_upstream::SessionUpstream;

/// The longest time a verified credential is trusted without asking the database.
pub const MAX_CACHE_TTL: Duration = Duration::from_secs(60);

/// The feature that admits a server key to `/admin/v1/*`.
pub const ADMIN_FEATURE: &str = "apigate.admin";

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
            secret_keys: None,
        }
    }
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthConfig")
            .field(
                "bootstrap_key",
                &self.bootstrap_key.as_ref().map(|_| "<redacted>"),
            )
            .field("cache_ttl", &self.cache_ttl)
            .field("cache_capacity", &self.cache_capacity)
            .field("key_rate", &self.key_rate)
            .field("session_rate", &self.session_rate)
            .field("verify_rate", &self.verify_rate)
            .field("secret_keys", &self.secret_keys)
            .finish()
    }
}

/// A verified server key (tier 1).
#[derive(Debug, Clone)]
pub struct KeyPrincipal {
    /// `None` for the bootstrap key and the dev key.
    pub key_id: Option<Uuid>,
    pub name: String,
    pub public_id: Option<String>,
    pub roles: Vec<String>,
    /// The key's own features ∪ its roles' features.
    pub features: Features,
    pub read_only: bool,
    pub expires_at: Option<DateTime<Utc>>,
}

impl KeyPrincipal {
    fn bootstrap() -> KeyPrincipal {
        KeyPrincipal {
            key_id: None,
            name: "bootstrap".into(),
            public_id: None,
            roles: Vec::new(),
            features: Features::all(),
            read_only: false,
            expires_at: None,
        }
    }

    /// The dev-mode key (no database): every feature.
    pub fn dev() -> KeyPrincipal {
        KeyPrincipal {
            name: "dev".into(),
            ..KeyPrincipal::bootstrap()
        }
    }

    pub fn is_bootstrap(&self) -> bool {
        self.key_id.is_none() && self.name == "bootstrap"
    }

    /// A label for logs and `created_by`: `key:<public id>`, `bootstrap` or `dev`.
    pub fn label(&self) -> String {
        match &self.public_id {
            Some(p) => format!("key:{p}"),
            None => self.name.clone(),
        }
    }

    /// The key acting on its own (dev mode, admin API): its features, no user.
    pub fn principal(&self) -> Principal {
        Principal {
            key_id: self.key_id,
            key_label: self.label(),
            key_name: self.name.clone(),
            session_id: None,
            user_id: None,
            tenant_id: None,
            organization_id: None,
            roles: self.roles.clone(),
            features: self.features.clone(),
            read_only: self.read_only,
            expires_at: self.expires_at,
            upstream: None,
        }
    }
}

/// Who is calling and what they may do: a key alone (dev mode) or a key plus a session.
#[derive(Debug, Clone)]
pub struct Principal {
    pub key_id: Option<Uuid>,
    /// `key:<public id>`, `bootstrap` or `dev`.
    pub key_label: String,
    /// The key's name (`apigate keys create --name`), `bootstrap` or `dev`.
    pub key_name: String,
    pub session_id: Option<Uuid>,
    pub user_id: Option<String>,
    pub tenant_id: Option<String>,
    pub organization_id: Option<String>,
    pub roles: Vec<String>,
    /// Effective features: the key's (own ∪ its roles') ∩ the session's (own ∪ its roles');
    /// the key's alone without a session.
    pub features: Features,
    /// Set when the session or the key is read-only.
    pub read_only: bool,
    pub expires_at: Option<DateTime<Utc>>,
    /// The session's own upstream credentials, opened (`Debug` shows names only).
    pub upstream: Option<Arc<SessionUpstream>>,
}

impl Principal {
    /// The all-features principal of dev mode.
    pub fn dev() -> Principal {
        KeyPrincipal::dev().principal()
    }

    /// The feature a tool needs: `api_discover` → `apigate.discover`, and so on.
    pub fn tool_feature(tool: &str) -> String {
        format!("apigate.{}", tool.strip_prefix("api_").unwrap_or(tool))
    }

    /// Whether the caller may call the tool at all.
    pub fn may_use_tool(&self, tool: &str) -> Result<(), AuthError> {
        let feature = Principal::tool_feature(tool);
        if self.features.allows(&feature) {
            Ok(())
        } else {
            Err(AuthError::Forbidden { missing: feature })
        }
    }

    /// Whether the caller may execute `method path_template`: read-only callers only safe
    /// methods; every feature in `required` (the operation's `x-required-features`) and every
    /// feature the configured rules require.
    pub fn may_execute(
        &self,
        method: Method,
        path_template: &str,
        required: &[String],
        rules: &PermissionRules,
    ) -> Result<(), AuthError> {
        if self.read_only && !method.is_safe() {
            return Err(AuthError::ReadOnly { method });
        }
        let needed = required
            .iter()
            .map(String::as_str)
            .chain(rules.required_for(method.as_str(), path_template));
        match self.features.first_missing(needed) {
            Some(missing) => Err(AuthError::Forbidden {
                missing: missing.to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Whether discovery and schema should show the operation: the caller could execute it
    /// (holds `apigate.execute` and passes [`Principal::may_execute`]).
    pub fn may_see(
        &self,
        method: Method,
        path_template: &str,
        required: &[String],
        rules: &PermissionRules,
    ) -> bool {
        self.features.allows("apigate.execute")
            && self
                .may_execute(method, path_template, required, rules)
                .is_ok()
    }

    /// An audit entry for a call by this principal; fill in the rest and pass it to
    /// [`Auth::record_audit`].
    pub fn audit_entry(&self, tool: &str, decision: Decision) -> AuditEntry {
        AuditEntry {
            key_id: self.key_id,
            session_id: self.session_id,
            user_id: self.user_id.clone(),
            tenant_id: self.tenant_id.clone(),
            organization_id: self.organization_id.clone(),
            credential_sources: Vec::new(),
            tool: tool.to_string(),
            actor: Some(self.key_label.clone()),
            target: None,
            operation: None,
            method: None,
            path: None,
            decision,
            upstream_status: None,
            duration_ms: 0,
            error_code: None,
            at: Utc::now(),
            call_id: Uuid::new_v4(),
        }
    }

    fn rate_subjects(&self) -> Vec<Subject> {
        let mut v = vec![Subject::Key(match self.key_id {
            Some(id) => id.to_string(),
            None => self.key_label.clone(),
        })];
        if let Some(s) = self.session_id {
            v.push(Subject::Session(s.to_string()));
        }
        v
    }
}

// ---- caches -----------------------------------------------------------------------------------

#[derive(Clone)]
enum KeyOutcome {
    Valid(Arc<KeyPrincipal>),
    Unknown,
    WrongSecret,
    Revoked,
}

#[derive(Clone)]
struct CachedKey {
    outcome: KeyOutcome,
    key_id: Option<Uuid>,
    /// The invalidation generation read before the database was asked.
    generation: u64,
}

#[derive(Debug)]
struct SessionData {
    id: Uuid,
    user_id: String,
    tenant_id: Option<String>,
    organization_id: Option<String>,
    roles: Vec<String>,
    features: Features,
    read_only: bool,
    expires_at: DateTime<Utc>,
    /// Opened once per cache fill and kept only as long as this entry.
    upstream: SessionCredentials,
}

/// A session's upstream credentials as loaded.
#[derive(Debug)]
enum SessionCredentials {
    None,
    Ready(Arc<SessionUpstream>),
    /// Stored but cannot be opened here: the session's calls fail (closed).
    Unusable(String),
}

#[derive(Clone)]
enum SessionOutcome {
    Valid(Arc<SessionData>),
    Unknown,
    Revoked,
}

#[derive(Clone)]
struct CachedSession {
    outcome: SessionOutcome,
    session_id: Option<Uuid>,
    generation: u64,
}

type Digest = [u8; 32];

/// Why a key could not be verified (never cached).
#[derive(Debug)]
enum VerifyError {
    Store(StoreError),
    /// Too many verifications for this public id lately.
    Throttled(Duration),
}

impl From<StoreError> for VerifyError {
    fn from(e: StoreError) -> Self {
        VerifyError::Store(e)
    }
}

/// The caches and the counter the invalidation listener shares with [`Auth`].
#[derive(Clone)]
struct Caches {
    keys: Cache<Digest, CachedKey>,
    sessions: Cache<Digest, CachedSession>,
    /// Bumped before every invalidation, so a lookup racing with one does not cache its result.
    generation: Arc<AtomicU64>,
}

impl Caches {
    fn new(ttl: Duration, capacity: u64) -> Caches {
        Caches {
            keys: Cache::builder()
                .max_capacity(capacity)
                .time_to_live(ttl)
                .build(),
            sessions: Cache::builder()
                .max_capacity(capacity)
                .time_to_live(ttl)
                .build(),
            generation: Arc::new(AtomicU64::new(0)),
        }
    }

    async fn apply(&self, what: &Invalidation) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        match what {
            Invalidation::Key(id) => {
                for (digest, v) in self.keys.iter() {
                    if v.key_id == Some(*id) {
                        self.keys.invalidate(&*digest).await;
                    }
                }
            }
            Invalidation::Session(id) => {
                for (digest, v) in self.sessions.iter() {
                    if v.session_id == Some(*id) {
                        self.sessions.invalidate(&*digest).await;
                    }
                }
            }
            Invalidation::Roles => self.flush(),
        }
    }

    fn flush(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.keys.invalidate_all();
        self.sessions.invalidate_all();
    }
}

async fn listen_for_invalidations(caches: Caches, mut listener: InvalidationListener) {
    loop {
        match listener.next().await {
            Ok(Heard::Change(what)) => caches.apply(&what).await,
            Ok(Heard::Gap) => {
                tracing::warn!(
                    "credential-change listener reconnected; dropping cached credentials"
                );
                caches.flush();
            }
            Err(e) if e.is_pool_closed() => {
                tracing::debug!("credential-change listener stopped: the pool is closed");
                return;
            }
            Err(e) => {
                // Changes may be missed until the listener reconnects (on its next call).
                caches.flush();
                tracing::warn!(error = %e, "credential-change listener failed; retrying in 1 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

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
    keys: Option<Arc<SecretKeys>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.listener.abort();
        self.purger.abort();
    }
}

/// How often expired sessions' upstream credentials are deleted.
pub const PURGE_EVERY: Duration = Duration::from_secs(60);

async fn purge_expired_credentials(store: Store) {
    let mut tick = tokio::time::interval(PURGE_EVERY);
    loop {
        tick.tick().await;
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

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Auth").finish_non_exhaustive()
    }
}

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
                limiter: Limiter::new(cfg.key_rate, cfg.session_rate, cfg.verify_rate),
                verify_slots: Semaphore::new(slots),
                verified: Cache::builder()
                    .max_capacity(cfg.cache_capacity)
                    .time_to_live(Duration::from_secs(24 * 3600))
                    .build(),
                listener: task,
                purger: tokio::spawn(purge_expired_credentials(store.clone())),
                audit: AuditWriter::start(store.clone()),
                audit_budget: AuditBudget::new(),
                keys: cfg.secret_keys,
            }),
        })
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Whether the database answers (`/health`): one `SELECT 1`.
    pub async fn ping(&self) -> Result<(), crate::store::StoreError> {
        self.inner.store.ping().await
    }

    // ---- tier 1 ---------------------------------------------------------------------------------

    /// Verifies an `x-api-key` value: the bootstrap key, or an active server key. For keys
    /// presented over the network use [`Auth::authenticate_key_from`], so that secrets guessed
    /// elsewhere cannot throttle this caller.
    pub async fn authenticate_key(&self, presented: &str) -> Result<KeyPrincipal, AuthError> {
        self.authenticate_key_from(presented, None).await
    }

    /// [`Auth::authenticate_key`] for a request from `source` (the peer address of the
    /// connection). argon2 verifications of keys this instance has not verified before are
    /// throttled per public id **and** source: someone guessing secrets for a known public id
    /// exhausts only their own budget, not the key owner's. Behind a reverse proxy every
    /// request has the proxy's address (forwarding headers are not trusted), so callers behind
    /// one proxy share one budget.
    pub async fn authenticate_key_from(
        &self,
        presented: &str,
        source: Option<IpAddr>,
    ) -> Result<KeyPrincipal, AuthError> {
        if presented.is_empty() {
            return Err(AuthError::Unauthorized(
                "an API key is required: send it in the x-api-key header".into(),
            ));
        }
        if let Some(bootstrap) = &self.inner.bootstrap_key
            && secrets::secrets_equal(presented, bootstrap)
        {
            return Ok(KeyPrincipal::bootstrap());
        }
        let Some((public_id, secret)) = secrets::parse_key(presented) else {
            return Err(AuthError::Unauthorized("invalid API key".into()));
        };
        let digest = secrets::sha256(presented);
        let caches = &self.inner.caches;
        let mut cached = None;
        for _attempt in 0..2 {
            let entry = caches
                .keys
                .entry(digest)
                .or_try_insert_with(self.verify_key(public_id, secret, &digest, source))
                .await
                .map_err(|e| match &*e {
                    VerifyError::Store(e) => AuthError::from_store(e),
                    VerifyError::Throttled(wait) => {
                        let source = source.map(|s| Source::of(s).to_string());
                        tracing::warn!(public_id, source, "API key verification throttled");
                        AuthError::RateLimited {
                            retry_after_ms: millis(*wait),
                        }
                    }
                })?;
            let fresh = entry.is_fresh();
            let value = entry.into_value();
            let raced = fresh && caches.generation.load(Ordering::SeqCst) != value.generation;
            if raced {
                // An invalidation arrived while we asked the database: the answer may predate it.
                caches.keys.invalidate(&digest).await;
                cached = Some(value);
                continue;
            }
            cached = Some(value);
            break;
        }
        let Some(cached) = cached else {
            return Err(AuthError::Unauthorized("invalid API key".into()));
        };
        match cached.outcome {
            KeyOutcome::Valid(k) => {
                if k.expires_at.is_some_and(|at| at <= Utc::now()) {
                    return Err(AuthError::Unauthorized("the API key has expired".into()));
                }
                Ok((*k).clone())
            }
            KeyOutcome::Revoked => Err(AuthError::Unauthorized(
                "the API key has been revoked".into(),
            )),
            KeyOutcome::Unknown | KeyOutcome::WrongSecret => {
                Err(AuthError::Unauthorized("invalid API key".into()))
            }
        }
    }

    async fn verify_key(
        &self,
        public_id: &str,
        secret: &str,
        digest: &Digest,
        source: Option<IpAddr>,
    ) -> Result<CachedKey, VerifyError> {
        let generation = self.inner.caches.generation.load(Ordering::SeqCst);
        let Some(row) = self.inner.store.find_server_key(public_id).await? else {
            return Ok(CachedKey {
                outcome: KeyOutcome::Unknown,
                key_id: None,
                generation,
            });
        };
        let key_id = Some(row.id);
        if row.revoked_at.is_some() {
            return Ok(CachedKey {
                outcome: KeyOutcome::Revoked,
                key_id,
                generation,
            });
        }
        let Some(hash) = row.secret_hash.as_deref() else {
            return Ok(CachedKey {
                outcome: KeyOutcome::WrongSecret,
                key_id,
                generation,
            });
        };
        let seen_before = self
            .inner
            .verified
            .get(public_id)
            .await
            .is_some_and(|v| v.0 == *digest && v.1 == hash);
        let matches = seen_before || {
            self.inner
                .limiter
                .take(&[Subject::Verify {
                    public_id: public_id.to_string(),
                    source: source.map(Source::of),
                }])
                .map_err(VerifyError::Throttled)?;
            let ok = self.verify_blocking(secret, hash).await;
            if ok {
                self.inner
                    .verified
                    .insert(public_id.to_string(), Arc::new((*digest, hash.to_string())))
                    .await;
            }
            ok
        };
        if !matches {
            tracing::warn!(public_id, "API key refused: wrong secret");
            return Ok(CachedKey {
                outcome: KeyOutcome::WrongSecret,
                key_id,
                generation,
            });
        }
        self.touch_later(row.id);
        Ok(CachedKey {
            outcome: KeyOutcome::Valid(Arc::new(key_principal(row))),
            key_id,
            generation,
        })
    }

    async fn verify_blocking(&self, secret: &str, hash: &str) -> bool {
        let Ok(_permit) = self.inner.verify_slots.acquire().await else {
            return false;
        };
        let (secret, hash) = (secret.to_string(), hash.to_string());
        match tokio::task::spawn_blocking(move || secrets::verify_secret(&secret, &hash)).await {
            Ok(ok) => ok,
            Err(e) => {
                tracing::error!(error = %e, "argon2 verification task failed");
                false
            }
        }
    }

    fn touch_later(&self, id: Uuid) {
        let store = self.inner.store.clone();
        tokio::spawn(async move {
            if let Err(e) = store.touch(id).await {
                tracing::debug!(error = %e, "could not record last use");
            }
        });
    }

    // ---- tier 2 ---------------------------------------------------------------------------------

    /// Resolves a session token presented over an authenticated key. The principal carries the
    /// session's user, tenant and organization; its features are those both the key and the
    /// session hold, and it is read-only when either the session or the key is.
    pub async fn authenticate_session(
        &self,
        key: &KeyPrincipal,
        token: &str,
    ) -> Result<Principal, AuthError> {
        if token.is_empty() {
            return Err(AuthError::Unauthorized(
                "a session token is required: pass `_sessionToken` in the tool arguments (or the x-session-token header)".into(),
            ));
        }
        if !secrets::is_session_token(token) {
            return Err(AuthError::Unauthorized("invalid session token".into()));
        }
        let digest = secrets::sha256(token);
        let caches = &self.inner.caches;
        let mut cached = None;
        for _attempt in 0..2 {
            let entry = caches
                .sessions
                .entry(digest)
                .or_try_insert_with(self.load_session(&digest))
                .await
                .map_err(|e| AuthError::from_store(&e))?;
            let fresh = entry.is_fresh();
            let value = entry.into_value();
            let raced = fresh && caches.generation.load(Ordering::SeqCst) != value.generation;
            if raced {
                caches.sessions.invalidate(&digest).await;
                cached = Some(value);
                continue;
            }
            cached = Some(value);
            break;
        }
        let Some(cached) = cached else {
            return Err(AuthError::Unauthorized("invalid session token".into()));
        };
        let s = match cached.outcome {
            SessionOutcome::Valid(s) => s,
            SessionOutcome::Revoked => {
                return Err(AuthError::Unauthorized(
                    "the session has been revoked".into(),
                ));
            }
            SessionOutcome::Unknown => {
                return Err(AuthError::Unauthorized("invalid session token".into()));
            }
        };
        if s.expires_at <= Utc::now() {
            return Err(AuthError::SessionExpired);
        }
        let upstream = match &s.upstream {
            SessionCredentials::None => None,
            SessionCredentials::Ready(u) => Some(u.clone()),
            SessionCredentials::Unusable(why) => {
                return Err(AuthError::Credentials(why.clone()));
            }
        };
        Ok(Principal {
            key_id: key.key_id,
            key_label: key.label(),
            key_name: key.name.clone(),
            session_id: Some(s.id),
            user_id: Some(s.user_id.clone()),
            tenant_id: s.tenant_id.clone(),
            organization_id: s.organization_id.clone(),
            roles: s.roles.clone(),
            // The key says what the agent may do at all, the session what the user may: a
            // call needs both.
            features: s.features.intersection(&key.features),
            read_only: s.read_only || key.read_only,
            expires_at: Some(s.expires_at),
            upstream,
        })
    }

    async fn load_session(&self, digest: &Digest) -> Result<CachedSession, StoreError> {
        let generation = self.inner.caches.generation.load(Ordering::SeqCst);
        let Some(row) = self.inner.store.find_session(digest).await? else {
            return Ok(CachedSession {
                outcome: SessionOutcome::Unknown,
                session_id: None,
                generation,
            });
        };
        let session_id = Some(row.id);
        if row.revoked_at.is_some() {
            return Ok(CachedSession {
                outcome: SessionOutcome::Revoked,
                session_id,
                generation,
            });
        }
        let Some(expires_at) = row.expires_at else {
            return Ok(CachedSession {
                outcome: SessionOutcome::Unknown,
                session_id,
                generation,
            });
        };
        self.touch_later(row.id);
        let features = effective_features(&row);
        let upstream = self.open_upstream(&row);
        Ok(CachedSession {
            outcome: SessionOutcome::Valid(Arc::new(SessionData {
                id: row.id,
                user_id: row.user_id.unwrap_or_default(),
                tenant_id: row.tenant_id,
                organization_id: row.organization_id,
                roles: row.roles,
                features,
                read_only: row.read_only,
                expires_at,
                upstream,
            })),
            session_id,
            generation,
        })
    }

    /// Opens a session row's sealed upstream headers with the configured keys.
    fn open_upstream(&self, row: &KeyRow) -> SessionCredentials {
        let Some(sealed) = row.upstream_headers.as_deref() else {
            return SessionCredentials::None;
        };
        let Some(keys) = &self.inner.keys else {
            tracing::error!(session = %row.id,
                "a session carries upstream credentials but no secret key is configured \
                 (APIGATE_SECRET_KEY or --secret-key-file); its calls are refused");
            return SessionCredentials::Unusable("no secret key is configured".into());
        };
        match SessionUpstream::open(keys, row.id, sealed) {
            Ok(u) => SessionCredentials::Ready(Arc::new(u)),
            Err(e) => {
                tracing::error!(session = %row.id, error = %e,
                    "cannot open a session's upstream credentials; its calls are refused");
                SessionCredentials::Unusable(e.to_string())
            }
        }
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

    // ---- rate limits and audit --------------------------------------------------------------------

    /// Takes one call from the key's bucket and, with a session, the session's bucket.
    pub fn check_rate(&self, principal: &Principal) -> Result<(), AuthError> {
        self.take(&principal.rate_subjects())
    }

    /// Takes one call from the bucket of the principal's key only (a tool call does this
    /// before its session is checked, so a failed session check spends the key's budget).
    pub fn check_key_rate(&self, principal: &Principal) -> Result<(), AuthError> {
        let mut subjects = principal.rate_subjects();
        subjects.retain(|s| matches!(s, Subject::Key(_)));
        self.take(&subjects)
    }

    /// Takes one call from the principal's session bucket, if it has a session.
    pub fn check_session_rate(&self, principal: &Principal) -> Result<(), AuthError> {
        let mut subjects = principal.rate_subjects();
        subjects.retain(|s| matches!(s, Subject::Session(_)));
        self.take(&subjects)
    }

    fn take(&self, subjects: &[Subject]) -> Result<(), AuthError> {
        self.inner
            .limiter
            .take(subjects)
            .map_err(|wait| AuthError::RateLimited {
                retry_after_ms: millis(wait),
            })
    }

    /// Writes one audit row. Never fails the call: while the database is unreachable the row
    /// is held in memory and written when it is back (`auth/audit.rs`). Rows of refused calls
    /// are bounded per caller (`auth/audit_budget.rs`): beyond the budget they are counted
    /// and summarised instead of written one by one.
    pub async fn record_audit(&self, entry: AuditEntry) {
        for row in self.inner.audit_budget.admit(entry) {
            self.inner.audit.record(row).await;
        }
    }

    /// Records a request the admin API turned away: by `key` when it was verified (but lacks
    /// [`ADMIN_FEATURE`] or is rate-limited), else by nobody, naming the public id of the key
    /// presented when it has a key's shape (never any part of its secret). `route` is the
    /// route template, `code` the refusal's code. Bounded like every refusal
    /// (`auth/audit_budget.rs`): per key, and for all unauthenticated callers together.
    pub async fn record_admin_refusal(
        &self,
        key: Option<&KeyPrincipal>,
        presented: &str,
        method: &str,
        route: Option<&str>,
        code: &str,
    ) {
        let target = match key {
            Some(_) => None,
            None => secrets::parse_key(presented).map(|(public_id, _)| format!("key:{public_id}")),
        };
        let entry = AuditEntry {
            key_id: key.and_then(|k| k.key_id),
            session_id: None,
            user_id: None,
            tenant_id: None,
            organization_id: None,
            credential_sources: Vec::new(),
            tool: ADMIN_AUDIT_TOOL.into(),
            actor: key.map(KeyPrincipal::label),
            target,
            operation: Some(admin::ADMIN_ACCESS.into()),
            method: Some(method.to_string()),
            path: route.map(str::to_string),
            decision: Decision::Denied,
            upstream_status: None,
            duration_ms: 0,
            error_code: Some(code.to_string()),
            at: Utc::now(),
            call_id: Uuid::new_v4(),
        };
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
    pub fn admin_as(&self, key: &KeyPrincipal) -> Admin {
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

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

fn effective_features(row: &KeyRow) -> Features {
    Features::new(row.features.iter().chain(row.role_features.iter()))
}

fn key_principal(row: KeyRow) -> KeyPrincipal {
    let features = effective_features(&row);
    KeyPrincipal {
        key_id: Some(row.id),
        name: row.name.unwrap_or_default(),
        public_id: row.public_id,
        roles: row.roles,
        features,
        read_only: row.read_only,
        expires_at: row.expires_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(features: &[&str], read_only: bool) -> Principal {
        Principal {
            features: Features::new(features),
            read_only,
            ..Principal::dev()
        }
    }

    #[test]
    fn tools_need_their_feature() {
        let p = principal(&["apigate.discover"], false);
        assert!(p.may_use_tool("api_discover").is_ok());
        let e = p.may_use_tool("api_execute").unwrap_err();
        assert!(matches!(e, AuthError::Forbidden { .. }));
        assert!(e.to_string().contains("apigate.execute"));
        assert!(
            principal(&["apigate.*"], false)
                .may_use_tool("api_schema")
                .is_ok()
        );
    }

    #[test]
    fn operations_need_spec_and_rule_features() {
        let rules = PermissionRules::from_toml(
            "[[rule]]\nmethod = \"DELETE\"\npath = \"/repos/**\"\nfeatures = [\"github.admin\"]\n",
        )
        .unwrap();
        let p = principal(&["apigate.execute", "billing.*"], false);
        let billing = vec!["billing.read".to_string()];
        assert!(
            p.may_execute(Method::Get, "/invoices", &billing, &rules)
                .is_ok()
        );
        assert!(
            p.may_execute(Method::Get, "/repos/{o}/{r}", &[], &rules)
                .is_ok()
        );
        match p.may_execute(Method::Delete, "/repos/{o}/{r}", &[], &rules) {
            Err(AuthError::Forbidden { missing }) => assert_eq!(missing, "github.admin"),
            other => panic!("{other:?}"),
        }
        let crm = vec!["crm.read".to_string()];
        assert!(p.may_execute(Method::Get, "/c", &crm, &rules).is_err());
        assert!(p.may_see(Method::Get, "/invoices", &billing, &rules));
        assert!(!p.may_see(Method::Get, "/c", &crm, &rules));
        assert!(!principal(&["billing.*"], false).may_see(
            Method::Get,
            "/invoices",
            &billing,
            &rules
        ));
    }

    #[test]
    fn read_only_allows_only_safe_methods() {
        let p = principal(&["*"], true);
        let none = PermissionRules::default();
        for m in [Method::Get, Method::Head, Method::Options] {
            assert!(p.may_execute(m, "/x", &[], &none).is_ok(), "{m}");
        }
        for m in [Method::Post, Method::Trace] {
            let e = p.may_execute(m, "/x", &[], &none).unwrap_err();
            assert!(matches!(e, AuthError::ReadOnly { method } if method == m));
        }
        assert!(!p.may_see(Method::Delete, "/x", &[], &none));
    }

    #[test]
    fn config_debug_hides_the_bootstrap_key() {
        let cfg = AuthConfig {
            bootstrap_key: Some("super-secret-value".into()),
            ..AuthConfig::default()
        };
        assert!(!format!("{cfg:?}").contains("super-secret-value"));
    }
}
