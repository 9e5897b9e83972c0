//! An issuer's signing keys: where they are (its metadata, RFC 8414, or OpenID discovery, unless
//! `--oauth-jwks-url` says), fetching them (bounded in time and size), and the cache tokens are
//! verified against, refreshed when a token names a key it does not hold, at most once a
//! minute. Asymmetric keys only: an `oct` key (HMAC) in a JWKS is never loaded, so an HS256
//! token signed with a published key cannot pass.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use chrono::{DateTime, Utc};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk};
use jsonwebtoken::{Algorithm, DecodingKey};

use super::OAuthError;

/// The largest metadata or JWKS document read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// The most keys one issuer's set may hold.
const MAX_KEYS: usize = 64;
/// How long a fetch may take, all in.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The fewest seconds between two fetches of one issuer's keys for unknown `kid`s.
const REFRESH_EVERY: Duration = Duration::from_secs(60);

/// One key a token may be signed with, and the algorithms it verifies.
pub(super) struct VerifyingKey {
    pub key: DecodingKey,
    pub algorithms: Vec<Algorithm>,
}

/// The keys of one issuer, by `kid` (a key without one is kept under "").
#[derive(Default)]
pub(super) struct KeySet {
    pub keys: HashMap<String, Arc<VerifyingKey>>,
    pub loaded_at: Option<DateTime<Utc>>,
}

/// One trusted issuer: its keys and where they come from.
pub(super) struct Issuer {
    pub issuer: String,
    /// `--oauth-jwks-url`, or the metadata's `jwks_uri` once read.
    jwks_url: Mutex<Option<url::Url>>,
    keys: ArcSwap<KeySet>,
    /// When the keys were last fetched (or tried): refreshes wait [`REFRESH_EVERY`].
    fetched: Mutex<Option<Instant>>,
    /// Serializes fetches: concurrent unknown `kid`s make one request.
    fetching: tokio::sync::Mutex<()>,
    last_error: Mutex<Option<String>>,
}

impl Issuer {
    pub fn new(issuer: String, jwks_url: Option<url::Url>) -> Issuer {
        Issuer {
            issuer,
            jwks_url: Mutex::new(jwks_url),
            keys: ArcSwap::from_pointee(KeySet::default()),
            fetched: Mutex::new(None),
            fetching: tokio::sync::Mutex::new(()),
            last_error: Mutex::new(None),
        }
    }

    /// The key `kid` names: from the cache, else after one refresh (at most one a minute per
    /// issuer). An unknown key fails closed.
    pub async fn key(
        &self,
        client: &reqwest::Client,
        kid: Option<&str>,
    ) -> Result<Arc<VerifyingKey>, OAuthError> {
        let kid = kid.unwrap_or_default();
        if let Some(k) = self.keys.load().keys.get(kid) {
            return Ok(k.clone());
        }
        let _one = self.fetching.lock().await;
        // Another request may have fetched them while this one waited.
        if let Some(k) = self.keys.load().keys.get(kid) {
            return Ok(k.clone());
        }
        let recently = lock(&self.fetched).is_some_and(|t| t.elapsed() < REFRESH_EVERY);
        if !recently {
            self.refresh(client).await;
        }
        let keys = self.keys.load();
        match keys.keys.get(kid) {
            Some(k) => Ok(k.clone()),
            None if keys.loaded_at.is_none() => Err(OAuthError::KeysUnavailable {
                issuer: self.issuer.clone(),
                why: lock(&self.last_error).clone().unwrap_or_default(),
            }),
            None => Err(OAuthError::UnknownKey {
                kid: crate::printable::cell(kid, 64),
            }),
        }
    }

    /// Fetches the keys now; on failure the cached ones stay and the error is kept for
    /// `/health`.
    pub async fn refresh(&self, client: &reqwest::Client) {
        *lock(&self.fetched) = Some(Instant::now());
        match self.fetch(client).await {
            Ok(set) => {
                tracing::info!(issuer = %self.issuer, keys = set.keys.len(), "OAuth issuer keys loaded");
                self.keys.store(Arc::new(set));
                *lock(&self.last_error) = None;
            }
            Err(e) => {
                tracing::warn!(issuer = %self.issuer, error = %e, "OAuth issuer keys did not load; the cached ones (if any) stay");
                *lock(&self.last_error) = Some(e);
            }
        }
    }

    async fn fetch(&self, client: &reqwest::Client) -> Result<KeySet, String> {
        let known = lock(&self.jwks_url).clone();
        let url = match known {
            Some(u) => u,
            None => {
                let found = jwks_uri(client, &self.issuer).await?;
                *lock(&self.jwks_url) = Some(found.clone());
                found
            }
        };
        let bytes = get(client, &url).await?;
        let set: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{}: not JSON: {e}", shown(&url)))?;
        let Some(listed) = set.get("keys").and_then(|k| k.as_array()) else {
            return Err(format!("{}: not a JWK set (no `keys`)", shown(&url)));
        };
        // One key at a time: a key of a kind this server does not read is skipped, not fatal.
        let jwks: Vec<Jwk> = listed
            .iter()
            .take(MAX_KEYS)
            .filter_map(|k| serde_json::from_value(k.clone()).ok())
            .collect();
        let keys = verifying_keys(&jwks);
        if keys.is_empty() {
            return Err(format!(
                "{}: no RSA, EC (P-256, P-384) or Ed25519 signing key in it",
                shown(&url)
            ));
        }
        Ok(KeySet {
            keys,
            loaded_at: Some(Utc::now()),
        })
    }

    /// What `/health` shows: the issuer, how many keys, when loaded, the last error.
    pub fn health(&self) -> serde_json::Value {
        let keys = self.keys.load();
        serde_json::json!({
            "issuer": self.issuer,
            "keysLoaded": keys.keys.len(),
            "loadedAt": keys.loaded_at,
            "lastError": lock(&self.last_error).clone(),
        })
    }

    /// The JWKS URL, once known.
    pub fn jwks_url(&self) -> Option<String> {
        lock(&self.jwks_url).as_ref().map(shown)
    }

    /// The keys as `kid` → algorithms, for `apigate oauth check`.
    pub fn key_list(&self) -> Vec<(String, Vec<Algorithm>)> {
        let mut v: Vec<_> = self
            .keys
            .load()
            .keys
            .iter()
            .map(|(kid, k)| (kid.clone(), k.algorithms.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The signing keys of a JWK set that tokens may be verified with, by `kid`: RSA, EC P-256 and
/// P-384, Ed25519, each for the algorithms of its kind (or the one its `alg` names). `oct`
/// keys, encryption keys and keys of other curves are skipped.
fn verifying_keys(jwks: &[Jwk]) -> HashMap<String, Arc<VerifyingKey>> {
    let mut keys = HashMap::new();
    for jwk in jwks {
        if jwk
            .common
            .public_key_use
            .as_ref()
            .is_some_and(|u| *u != jsonwebtoken::jwk::PublicKeyUse::Signature)
        {
            continue;
        }
        let kind: &[Algorithm] = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => &[
                Algorithm::RS256,
                Algorithm::RS384,
                Algorithm::RS512,
                Algorithm::PS256,
                Algorithm::PS384,
                Algorithm::PS512,
            ],
            AlgorithmParameters::EllipticCurve(p) => match p.curve {
                EllipticCurve::P256 => &[Algorithm::ES256],
                EllipticCurve::P384 => &[Algorithm::ES384],
                _ => continue,
            },
            AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
                &[Algorithm::EdDSA]
            }
            _ => continue,
        };
        let algorithms: Vec<Algorithm> = match jwk.common.key_algorithm {
            Some(named) => kind
                .iter()
                .copied()
                .filter(|a| format!("{a:?}") == format!("{named:?}"))
                .collect(),
            None => kind.to_vec(),
        };
        if algorithms.is_empty() {
            continue;
        }
        let Ok(key) = DecodingKey::from_jwk(jwk) else {
            continue;
        };
        let kid = jwk.common.key_id.clone().unwrap_or_default();
        keys.insert(kid, Arc::new(VerifyingKey { key, algorithms }));
    }
    keys
}

/// The issuer's `jwks_uri`: from its OAuth metadata (RFC 8414, the well-known path inserted
/// before the issuer's path), else its OpenID configuration. The metadata must name the same
/// issuer.
async fn jwks_uri(client: &reqwest::Client, issuer: &str) -> Result<url::Url, String> {
    let metadata = metadata(client, issuer).await?;
    let uri = metadata
        .get("jwks_uri")
        .and_then(|v| v.as_str())
        .ok_or_else(|| format!("the metadata of {issuer} has no jwks_uri"))?;
    let url = url::Url::parse(uri).map_err(|e| format!("jwks_uri {uri:?}: {e}"))?;
    if !matches!(url.scheme(), "https" | "http") {
        return Err(format!("jwks_uri {uri:?} is not http(s)"));
    }
    Ok(url)
}

/// The issuer's authorization server metadata (RFC 8414 first, then OpenID discovery).
async fn metadata(client: &reqwest::Client, issuer: &str) -> Result<serde_json::Value, String> {
    let base = url::Url::parse(issuer).map_err(|e| format!("issuer {issuer:?}: {e}"))?;
    let path = base.path().trim_end_matches('/').to_string();
    let mut tried = Vec::new();
    for well_known in [
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ] {
        // RFC 8414 puts the well-known part before the issuer's path; OpenID after it.
        let candidates = [format!("{well_known}{path}"), format!("{path}{well_known}")];
        for candidate in candidates {
            let mut url = base.clone();
            url.set_path(&candidate);
            url.set_query(None);
            if tried.contains(&url) {
                continue;
            }
            tried.push(url.clone());
            let Ok(bytes) = get(client, &url).await else {
                continue;
            };
            let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
                continue;
            };
            let named = doc.get("issuer").and_then(|v| v.as_str()).unwrap_or("");
            if named.trim_end_matches('/') != issuer.trim_end_matches('/') {
                return Err(format!(
                    "{} names the issuer {named:?}, not {issuer:?}",
                    shown(&url)
                ));
            }
            return Ok(doc);
        }
    }
    Err(format!(
        "no authorization server metadata at {}",
        tried.iter().map(shown).collect::<Vec<_>>().join(" or ")
    ))
}

/// GETs `url`: 2xx, at most [`MAX_DOCUMENT_BYTES`], within [`FETCH_TIMEOUT`].
async fn get(client: &reqwest::Client, url: &url::Url) -> Result<Vec<u8>, String> {
    read_bounded(client.get(url.clone()), url).await
}

/// Sends `request` (to `url`) for JSON: 2xx, at most [`MAX_DOCUMENT_BYTES`], within
/// [`FETCH_TIMEOUT`]; why not, without the URL's user info or query.
pub(super) async fn read_bounded(
    request: reqwest::RequestBuilder,
    url: &url::Url,
) -> Result<Vec<u8>, String> {
    let fetch = async {
        let mut response = request
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| format!("{}: {}", shown(url), crate::error_chain(&e.without_url())))?;
        if !response.status().is_success() {
            return Err(format!("{}: HTTP {}", shown(url), response.status()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("{}: {}", shown(url), crate::error_chain(&e.without_url())))?
        {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_DOCUMENT_BYTES {
                return Err(format!(
                    "{}: over the {MAX_DOCUMENT_BYTES}-byte limit",
                    shown(url)
                ));
            }
        }
        Ok(body)
    };
    tokio::time::timeout(FETCH_TIMEOUT, fetch)
        .await
        .map_err(|_| format!("{}: no answer within {FETCH_TIMEOUT:?}", shown(url)))?
}

/// A URL for messages: no user info, no query.
fn shown(url: &url::Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.set_query(None);
    u.to_string()
}
