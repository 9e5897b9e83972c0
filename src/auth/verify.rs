//! Verifying credentials: a server key (tier 1: the bootstrap key, or argon2id against the
//! stored hash, throttled per public id and source) and a session token (tier 2: its row, its
//! roles' features, its sealed upstream credentials opened), each answer cached in
//! [`super::cache`].

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;

use chrono::Utc;
use uuid::Uuid;

use super::cache::{
    Cached, Caches, Digest, KeyOutcome, SessionCredentials, SessionData, SessionOutcome,
};
use super::principal::{KeyPrincipal, Principal, effective_features, key_principal};
use super::rate::{Refused, Source, Subject};
use super::secrets;
use super::session_upstream::SessionUpstream;
use super::{Auth, AuthError};
use crate::store::{KeyRow, StoreError};

/// Why a key could not be verified (never cached).
#[derive(Debug)]
enum VerifyError {
    Store(StoreError),
    /// Too many verifications for this public id lately, or the shared count unavailable.
    Throttled(Refused),
}

impl From<StoreError> for VerifyError {
    fn from(e: StoreError) -> Self {
        VerifyError::Store(e)
    }
}

impl Auth {
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
    pub(crate) async fn authenticate_key_from(
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
            && crate::secrets_equal(presented, bootstrap)
        {
            return Ok(KeyPrincipal::bootstrap());
        }
        let Some((public_id, secret)) = secrets::parse_key(presented) else {
            return Err(AuthError::Unauthorized("invalid API key".into()));
        };
        let digest = secrets::sha256(presented);
        let caches = &self.inner.caches;
        let cached = caches
            .lookup(&caches.keys, digest, || {
                self.verify_key(public_id, secret, &digest, source)
            })
            .await
            .map_err(|e| match &*e {
                VerifyError::Store(e) => AuthError::from_store(e),
                VerifyError::Throttled(why) => {
                    let source = source.map(|s| Source::of(s).to_string());
                    tracing::warn!(public_id, source, "API key verification throttled");
                    super::refused(*why)
                }
            })?;
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
    ) -> Result<Cached<KeyOutcome>, VerifyError> {
        let find = self.inner.store.find_server_key(public_id);
        let unknown_or_revoked = (KeyOutcome::Unknown, KeyOutcome::Revoked);
        let (row, cached) = match read_row(&self.inner.caches, find, unknown_or_revoked).await? {
            Ok(found) => found,
            Err(answer) => return Ok(answer),
        };
        let Some(hash) = row.secret_hash.as_deref() else {
            return Ok(cached(KeyOutcome::WrongSecret));
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
                .await
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
            return Ok(cached(KeyOutcome::WrongSecret));
        }
        self.touch_later(row.id);
        Ok(cached(KeyOutcome::Valid(Arc::new(key_principal(row)))))
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
        let cached = caches
            .lookup(&caches.sessions, digest, || self.load_session(&digest))
            .await
            .map_err(|e| AuthError::from_store(&e))?;
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
        let upstream = s.upstream.usable()?;
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
            person: None,
        })
    }

    async fn load_session(&self, digest: &Digest) -> Result<Cached<SessionOutcome>, StoreError> {
        let find = self.inner.store.find_session(digest);
        let unknown_or_revoked = (SessionOutcome::Unknown, SessionOutcome::Revoked);
        let (row, cached) = match read_row(&self.inner.caches, find, unknown_or_revoked).await? {
            Ok(found) => found,
            Err(answer) => return Ok(answer),
        };
        let Some(expires_at) = row.expires_at else {
            return Ok(cached(SessionOutcome::Unknown));
        };
        self.touch_later(row.id);
        let features = effective_features(&row);
        let upstream = self.open_upstream(row.id, row.upstream_headers.as_deref());
        Ok(cached(SessionOutcome::Valid(Arc::new(SessionData {
            id: row.id,
            user_id: row.user_id.unwrap_or_default(),
            tenant_id: row.tenant_id,
            organization_id: row.organization_id,
            roles: row.roles,
            features,
            read_only: row.read_only,
            expires_at,
            upstream,
        }))))
    }

    /// Opens the sealed upstream headers of a session or a signed-in person (`id`: the row
    /// they are bound to) with the configured keys.
    pub(super) fn open_upstream(&self, id: Uuid, sealed: Option<&[u8]>) -> SessionCredentials {
        let Some(sealed) = sealed else {
            return SessionCredentials::None;
        };
        let Some(keys) = &self.inner.keys else {
            tracing::error!(row = %id,
                "stored upstream credentials but no secret key is configured \
                 (APIGATE_SECRET_KEY or --secret-key-file); their calls are refused");
            return SessionCredentials::Unusable("no secret key is configured".into());
        };
        match SessionUpstream::open(keys, id, sealed) {
            Ok(u) => SessionCredentials::Ready(Arc::new(u)),
            Err(e) => {
                tracing::error!(row = %id, error = %e,
                    "cannot open stored upstream credentials; their calls are refused");
                SessionCredentials::Unusable(e.to_string())
            }
        }
    }
}

/// Reads a credential's row for the cache, the cache's generation first (see
/// [`Caches::lookup`]). No row is answered `unknown`, a revoked one `revoked`; otherwise the row
/// and how to answer for it.
async fn read_row<O>(
    caches: &Caches,
    find: impl Future<Output = Result<Option<KeyRow>, StoreError>>,
    (unknown, revoked): (O, O),
) -> Result<Result<(KeyRow, impl Fn(O) -> Cached<O>), Cached<O>>, StoreError> {
    let generation = caches.generation();
    let Some(row) = find.await? else {
        return Ok(Err(Cached {
            outcome: unknown,
            id: None,
            generation,
        }));
    };
    let id = Some(row.id);
    let cached = move |outcome| Cached {
        outcome,
        id,
        generation,
    };
    if row.revoked_at.is_some() {
        return Ok(Err(cached(revoked)));
    }
    Ok(Ok((row, cached)))
}
