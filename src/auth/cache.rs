//! This instance's caches of verified credentials (≤ [`super::MAX_CACHE_TTL`]), what they hold,
//! and the task that empties them when any instance announces a change (`LISTEN/NOTIFY`).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use moka::future::Cache;
use uuid::Uuid;

use super::features::Features;
use super::principal::KeyPrincipal;
use super::session_upstream::SessionUpstream;
use crate::store::{Heard, Invalidation, InvalidationListener};

pub(super) type Digest = [u8; 32];

/// What a lookup found, with the row's id (to drop the entry when the row changes).
#[derive(Clone)]
pub(super) struct Cached<O> {
    pub(super) outcome: O,
    /// The key's or the session's id; `None` when there is no such row.
    pub(super) id: Option<Uuid>,
    /// The invalidation generation read before the database was asked.
    pub(super) generation: u64,
}

#[derive(Clone)]
pub(super) enum KeyOutcome {
    Valid(Arc<KeyPrincipal>),
    Unknown,
    WrongSecret,
    Revoked,
}

#[derive(Debug)]
pub(super) struct SessionData {
    pub(super) id: Uuid,
    pub(super) user_id: String,
    pub(super) tenant_id: Option<String>,
    pub(super) organization_id: Option<String>,
    pub(super) roles: Vec<String>,
    pub(super) features: Features,
    pub(super) read_only: bool,
    pub(super) expires_at: DateTime<Utc>,
    /// Opened once per cache fill and kept only as long as this entry.
    pub(super) upstream: SessionCredentials,
}

/// A session's (or a signed-in person's) upstream credentials as loaded.
#[derive(Debug)]
pub(super) enum SessionCredentials {
    None,
    Ready(Arc<SessionUpstream>),
    /// Stored but cannot be opened here: the session's calls fail (closed).
    Unusable(String),
}

impl SessionCredentials {
    /// The headers a call sends (none stored: `None`); credentials that cannot be opened
    /// refuse the call rather than let it go out with the server's.
    pub(super) fn usable(&self) -> Result<Option<Arc<SessionUpstream>>, super::AuthError> {
        match self {
            SessionCredentials::None => Ok(None),
            SessionCredentials::Ready(u) => Ok(Some(u.clone())),
            SessionCredentials::Unusable(why) => Err(super::AuthError::Credentials(why.clone())),
        }
    }
}

#[derive(Clone)]
pub(super) enum SessionOutcome {
    Valid(Arc<SessionData>),
    Unknown,
    Revoked,
}

/// The caches and the counter the invalidation listener shares with [`super::Auth`].
#[derive(Clone)]
pub(super) struct Caches {
    pub(super) keys: Cache<Digest, Cached<KeyOutcome>>,
    pub(super) sessions: Cache<Digest, Cached<SessionOutcome>>,
    /// Signed-in people (by issuer and `sub`): their own upstream credentials.
    pub(super) oauth_users: Cache<Digest, Cached<Arc<SessionCredentials>>>,
    /// Bumped before every invalidation, so a lookup racing with one does not cache its result.
    pub(super) generation: Arc<AtomicU64>,
}

impl Caches {
    pub(super) fn new(ttl: Duration, capacity: u64) -> Caches {
        Caches {
            keys: Cache::builder()
                .max_capacity(capacity)
                .time_to_live(ttl)
                .build(),
            sessions: Cache::builder()
                .max_capacity(capacity)
                .time_to_live(ttl)
                .build(),
            oauth_users: Cache::builder()
                .max_capacity(capacity)
                .time_to_live(ttl)
                .build(),
            generation: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The generation to store with a value about to be read from the database.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    pub(super) async fn apply(&self, what: &Invalidation) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        match what {
            Invalidation::Key(id) => invalidate_id(&self.keys, *id).await,
            Invalidation::Session(id) => invalidate_id(&self.sessions, *id).await,
            Invalidation::OAuthUser(id) => invalidate_id(&self.oauth_users, *id).await,
            Invalidation::Roles => self.flush(),
        }
    }

    pub(super) fn flush(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.keys.invalidate_all();
        self.sessions.invalidate_all();
        self.oauth_users.invalidate_all();
    }

    /// The entry of `digest` in `cache`, filled by `load` when missing. An entry filled while
    /// an invalidation arrived is dropped (the database's answer may predate the change) and
    /// loaded once more.
    pub(super) async fn lookup<O, E, F>(
        &self,
        cache: &Cache<Digest, Cached<O>>,
        digest: Digest,
        load: impl Fn() -> F,
    ) -> Result<Cached<O>, Arc<E>>
    where
        O: Clone + Send + Sync + 'static,
        E: Send + Sync + 'static,
        F: Future<Output = Result<Cached<O>, E>>,
    {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let entry = cache.entry(digest).or_try_insert_with(load()).await?;
            let fresh = entry.is_fresh();
            let value = entry.into_value();
            let raced = fresh && self.generation() != value.generation;
            if raced {
                cache.invalidate(&digest).await;
                if attempts < 2 {
                    continue;
                }
            }
            return Ok(value);
        }
    }
}

async fn invalidate_id<O>(cache: &Cache<Digest, Cached<O>>, id: Uuid)
where
    O: Clone + Send + Sync + 'static,
{
    for (digest, v) in cache.iter() {
        if v.id == Some(id) {
            cache.invalidate(&*digest).await;
        }
    }
}

pub(super) async fn listen_for_invalidations(caches: Caches, mut listener: InvalidationListener) {
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
