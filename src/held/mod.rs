//! Binary responses held for MCP `resources/read`: each under an unguessable id
//! (`apigate://responses/<id>`), for the principal that made the call only (the signed-in
//! person, else the user session, else the API key: `auth::Principal::held_owner`), for a
//! limited time (`--response-ttl`), at most `--max-held-bytes` per owner and
//! `--max-held-total-bytes` for all owners together (the oldest are dropped first). Dev
//! keeps them in memory ([`memory`], a moka cache with a time to live, weighted by bytes);
//! production in Postgres (`store::responses`), so that any replica serves a read, expired rows
//! purged on every write. Knows nothing of MCP or of the tools: it holds bytes for an owner.

mod memory;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::store::{Store, StoreError};
use crate::upstream::BinaryBody;

/// Default time a held response stays readable (`--response-ttl`): 10 minutes.
pub(crate) const DEFAULT_RESPONSE_TTL: Duration = Duration::from_secs(10 * 60);
/// Default total of held bytes per owner (`--max-held-bytes`): 64 MiB.
pub(crate) const DEFAULT_MAX_HELD_BYTES: usize = 64 * 1024 * 1024;
/// Default total of held bytes of all owners together (`--max-held-total-bytes`): 256 MiB.
pub(crate) const DEFAULT_MAX_HELD_TOTAL_BYTES: usize = 256 * 1024 * 1024;
/// The URI scheme and path of a held response: `apigate://responses/<id>`.
pub(crate) const URI_PREFIX: &str = "apigate://responses/";
/// The resource template `resources/templates/list` names.
pub(crate) const URI_TEMPLATE: &str = "apigate://responses/{id}";
/// Random bytes in an id (hex-encoded: 48 characters, 192 bits).
const ID_BYTES: usize = 24;

/// How long and how much is held.
#[derive(Debug, Clone, Copy)]
pub struct HeldConfig {
    pub ttl: Duration,
    /// The most bytes held for one owner; a response larger than this (or than the total)
    /// is not held at all.
    pub max_bytes_per_owner: usize,
    /// The most bytes held for all owners together; the oldest of anyone's go first.
    pub max_total_bytes: usize,
}

impl Default for HeldConfig {
    fn default() -> Self {
        HeldConfig {
            ttl: DEFAULT_RESPONSE_TTL,
            max_bytes_per_owner: DEFAULT_MAX_HELD_BYTES,
            max_total_bytes: DEFAULT_MAX_HELD_TOTAL_BYTES,
        }
    }
}

/// Why a response could not be held or read.
#[derive(Debug, thiserror::Error)]
pub enum HeldError {
    #[error(
        "the response is {size} bytes, more than the {max} bytes held for one caller \
         (--max-held-bytes, --max-held-total-bytes)"
    )]
    TooLarge { size: usize, max: usize },
    #[error("the held responses are unavailable: {0}")]
    Database(#[from] StoreError),
}

pub use crate::store::{Held, HeldMeta};

impl HeldMeta {
    /// `apigate://responses/<id>`.
    pub fn uri(&self) -> String {
        format!("{URI_PREFIX}{}", self.id)
    }
}

/// Where held responses live. Cheap to clone.
#[derive(Clone)]
pub struct HeldResponses {
    cfg: HeldConfig,
    backend: Backend,
}

#[derive(Clone)]
enum Backend {
    Memory(Arc<memory::Memory>),
    /// The store, and the reads of it that may run at once ([`DATABASE_READS`]).
    Database(Store, Arc<tokio::sync::Semaphore>),
}

/// The held responses read from Postgres at once: reads beyond it wait their turn, so that
/// many `resources/read`s cannot take every connection of the pool from the tool calls and
/// `/health`.
const DATABASE_READS: usize = 2;

impl std::fmt::Debug for HeldResponses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = match self.backend {
            Backend::Memory(_) => "memory",
            Backend::Database(..) => "database",
        };
        f.debug_struct("HeldResponses")
            .field("cfg", &self.cfg)
            .field("backend", &backend)
            .finish()
    }
}

impl HeldResponses {
    /// Held in this process's memory (dev, stdio).
    pub(crate) fn in_memory(cfg: HeldConfig) -> HeldResponses {
        HeldResponses {
            cfg,
            backend: Backend::Memory(Arc::new(memory::Memory::new(cfg))),
        }
    }

    /// The same limits, held in Postgres (production: every replica reads them).
    pub fn in_database(&self, store: Store) -> HeldResponses {
        HeldResponses {
            cfg: self.cfg,
            backend: Backend::Database(
                store,
                Arc::new(tokio::sync::Semaphore::new(DATABASE_READS)),
            ),
        }
    }

    pub fn config(&self) -> &HeldConfig {
        &self.cfg
    }

    /// Holds `body` for `owner` under a new id, dropping the owner's oldest responses beyond
    /// the per-owner bound, then anyone's oldest beyond the total (and, in Postgres, every
    /// expired row).
    pub async fn hold(&self, owner: &str, body: &BinaryBody) -> Result<HeldMeta, HeldError> {
        let size = body.bytes.len();
        let max = self.cfg.max_bytes_per_owner.min(self.cfg.max_total_bytes);
        if size > max {
            return Err(HeldError::TooLarge { size, max });
        }
        let ttl = chrono::Duration::from_std(self.cfg.ttl).unwrap_or(chrono::Duration::MAX);
        let meta = HeldMeta {
            id: new_id(),
            content_type: body.content_type.clone(),
            sha256: body.sha256.clone(),
            size,
            expires_at: Utc::now()
                .checked_add_signed(ttl)
                .unwrap_or(DateTime::<Utc>::MAX_UTC),
        };
        match &self.backend {
            Backend::Memory(m) => m.hold(owner, meta.clone(), body.bytes.clone()),
            Backend::Database(store, _) => {
                store
                    .hold_response(
                        owner,
                        &meta,
                        &body.bytes,
                        self.cfg.ttl,
                        self.cfg.max_bytes_per_owner,
                        self.cfg.max_total_bytes,
                    )
                    .await?
            }
        }
        Ok(meta)
    }

    /// The response `uri` names, if it is `owner`'s and has not expired; `None` for every
    /// other case alike (malformed, unknown, expired, another owner's).
    pub async fn read(&self, owner: &str, uri: &str) -> Result<Option<Held>, HeldError> {
        let Some(id) = parse_uri(uri) else {
            return Ok(None);
        };
        Ok(match &self.backend {
            Backend::Memory(m) => m.read(owner, id),
            Backend::Database(store, reads) => {
                // Never closed: a failed acquire cannot happen, and would only mean no wait.
                let _turn = reads.acquire().await.ok();
                store.read_response(owner, id).await?
            }
        })
    }

    /// `owner`'s held responses, oldest first.
    pub async fn list(&self, owner: &str) -> Result<Vec<HeldMeta>, HeldError> {
        Ok(match &self.backend {
            Backend::Memory(m) => m.list(owner),
            Backend::Database(store, _) => store.list_responses(owner).await?,
        })
    }
}

/// A fresh random id: 192 bits from the operating system's CSPRNG (via `rand`'s thread RNG),
/// hex-encoded.
fn new_id() -> String {
    hex::encode(rand::random::<[u8; ID_BYTES]>())
}

/// The id in `apigate://responses/<id>`, when it has the shape of one.
pub(crate) fn parse_uri(uri: &str) -> Option<&str> {
    let id = uri.strip_prefix(URI_PREFIX)?;
    (id.len() == ID_BYTES * 2 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_random_and_uris_parse_only_their_own_shape() {
        let (a, b) = (new_id(), new_id());
        assert_ne!(a, b);
        assert_eq!(parse_uri(&format!("{URI_PREFIX}{a}")), Some(a.as_str()));
        assert_eq!(
            parse_uri(&format!("{URI_PREFIX}{}", a.to_uppercase())),
            None
        );
        assert_eq!(parse_uri(&format!("{URI_PREFIX}{a}/x")), None);
        assert_eq!(parse_uri(&format!("{URI_PREFIX}../{}", &a[3..])), None);
        assert_eq!(parse_uri(&format!("file:///{a}")), None);
    }
}
