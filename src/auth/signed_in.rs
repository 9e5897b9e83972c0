//! People signed in with a bearer token ([`BearerToken`]): the principal a verified token runs
//! as, carrying the person's own upstream credentials (stored by the operator under the token's
//! issuer and `sub`, sealed as a session's are), and the record that they were seen (once per
//! cache fill, not per request) for `apigate oauth users list` and `apigate sessions list`.

use std::sync::Arc;

use super::cache::{Cached, SessionCredentials};
use super::oauth::BearerToken;
use super::principal::Principal;
use super::{Auth, AuthError, secrets};
use crate::store::StoreError;

impl Auth {
    /// `principal` (what a verified bearer token grants, [`BearerToken::principal`]) with the
    /// person's stored upstream credentials. A person whose credentials cannot be opened here
    /// is refused, as a session's is.
    pub async fn signed_in(
        &self,
        token: &BearerToken,
        mut principal: Principal,
    ) -> Result<Principal, AuthError> {
        // `sub` is unique within its issuer only.
        let digest = secrets::sha256(&format!("{}\0{}", token.issuer, token.subject));
        let caches = &self.inner.caches;
        let cached = caches
            .lookup(&caches.oauth_users, digest, || self.load_oauth_user(token))
            .await
            .map_err(|e| AuthError::from_store(&e))?;
        principal.upstream = cached.outcome.usable()?;
        Ok(principal)
    }

    async fn load_oauth_user(
        &self,
        token: &BearerToken,
    ) -> Result<Cached<Arc<SessionCredentials>>, StoreError> {
        let generation = self.inner.caches.generation();
        let row = self
            .inner
            .store
            .seen_oauth_user(&token.issuer, &token.subject, &token.client_id)
            .await?;
        let upstream = self.open_upstream(row.id, row.upstream_headers.as_deref());
        Ok(Cached {
            outcome: Arc::new(upstream),
            id: Some(row.id),
            generation,
        })
    }
}
