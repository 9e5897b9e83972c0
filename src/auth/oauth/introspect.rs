//! Opaque bearer tokens (not JWTs), checked by asking the issuer (RFC 7662 token
//! introspection, `--oauth-introspection-url`): apigate authenticates as a confidential client
//! (HTTP Basic), the answer is bounded and timed out like a key fetch, and an active answer is
//! kept for at most [`KEEP`] (never past the token's `exp`), so a revoked token stops working
//! within that time. The claims it returns are checked as a JWT's are (`iss`, `aud`, `exp`,
//! `nbf`, `sub`) by the caller.
//!
//! Made-up tokens cannot crowd out real ones: an inactive answer is kept for
//! [`KEEP_INACTIVE`] (a token sent again costs the issuer nothing), a source address has at
//! most [`PER_SOURCE`] unknown tokens being checked at once (beyond it, 429), at most
//! [`MAX_IN_FLIGHT`] requests are in flight, and [`RESERVED`] of them are kept for tokens the
//! issuer called active before (remembered by SHA-256 for [`REMEMBER_ACTIVE`]), so a person
//! whose cached answer lapsed during a flood still gets through.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moka::future::Cache;
use serde_json::Value;
use zeroize::Zeroizing;

use super::OAuthError;

/// How long an active answer is reused.
const KEEP: Duration = Duration::from_secs(30);
/// How long an inactive answer is reused (a token does not become active later).
const KEEP_INACTIVE: Duration = Duration::from_secs(30);
/// How long a token the issuer called active is remembered as one (its hash only), for the
/// reserved slots.
const REMEMBER_ACTIVE: Duration = Duration::from_secs(24 * 3600);
/// The most introspection requests in flight: a flood of made-up tokens costs the issuer at
/// most this many requests at a time, and waits (then 503) beyond it.
const MAX_IN_FLIGHT: usize = 16;
/// Of [`MAX_IN_FLIGHT`], the slots only tokens the issuer called active before may take.
const RESERVED: usize = 4;
/// Unknown tokens one source address (an IPv6 /64) may have checked at once.
pub(super) const PER_SOURCE: usize = 4;
/// How long a check waits for a free slot.
const SLOT_WAIT: Duration = Duration::from_secs(5);

/// Where and as whom to introspect.
#[derive(Clone)]
pub struct IntrospectionSettings {
    pub url: url::Url,
    pub client_id: String,
    pub client_secret: Arc<Zeroizing<String>>,
}

crate::debug_fields!(|s: IntrospectionSettings| { url: s.url.as_str(), client_id: s.client_id, .. });

pub(super) struct Introspector {
    settings: IntrospectionSettings,
    /// sha256(token) → the active answer's claims.
    answers: Cache<[u8; 32], Arc<Value>>,
    /// sha256(token) of tokens the issuer called inactive.
    inactive: Cache<[u8; 32], ()>,
    /// sha256(token) of tokens the issuer called active, for the reserved slots.
    known: Cache<[u8; 32], ()>,
    /// Slots any token may take.
    open: tokio::sync::Semaphore,
    /// Slots only known tokens may take.
    reserved: tokio::sync::Semaphore,
    /// Source → its unknown tokens being checked now (entries leave at zero).
    sources: Mutex<HashMap<IpAddr, usize>>,
}

/// One unknown token of a source being checked; counted out when dropped.
struct SourceSlot<'a> {
    sources: &'a Mutex<HashMap<IpAddr, usize>>,
    source: IpAddr,
}

impl Drop for SourceSlot<'_> {
    fn drop(&mut self) {
        let mut sources = lock(self.sources);
        if let Some(n) = sources.get_mut(&self.source) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                sources.remove(&self.source);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The address a source is counted under: an IPv4 address, or an IPv6 address's /64 (one
/// host holds a whole /64).
fn source_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(
                u128::from(v6) & !((1u128 << 64) - 1),
            )),
        },
    }
}

impl Introspector {
    pub(super) fn new(settings: IntrospectionSettings) -> Introspector {
        Introspector {
            settings,
            answers: Cache::builder()
                .max_capacity(10_000)
                .time_to_live(KEEP)
                .build(),
            inactive: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(KEEP_INACTIVE)
                .build(),
            known: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(REMEMBER_ACTIVE)
                .build(),
            open: tokio::sync::Semaphore::new(MAX_IN_FLIGHT - RESERVED),
            reserved: tokio::sync::Semaphore::new(RESERVED),
            sources: Mutex::default(),
        }
    }

    /// A count for one more unknown token of `peer`, or `TooManyAttempts` when it has
    /// [`PER_SOURCE`] being checked.
    fn count_source(&self, peer: Option<IpAddr>) -> Result<Option<SourceSlot<'_>>, OAuthError> {
        let Some(source) = peer.map(source_of) else {
            return Ok(None);
        };
        let mut sources = lock(&self.sources);
        let n = sources.entry(source).or_default();
        if *n >= PER_SOURCE {
            return Err(OAuthError::TooManyAttempts);
        }
        *n += 1;
        Ok(Some(SourceSlot {
            sources: &self.sources,
            source,
        }))
    }

    /// The claims of an active token; a token the issuer says is inactive is refused. `peer`
    /// is the address the token came from (its unknown tokens are limited per source).
    pub(super) async fn claims(
        &self,
        client: &reqwest::Client,
        token: &str,
        peer: Option<IpAddr>,
    ) -> Result<Arc<Value>, OAuthError> {
        let digest = crate::auth::secrets::sha256(token);
        let now = chrono::Utc::now().timestamp();
        if let Some(claims) = self.answers.get(&digest).await
            && claims
                .get("exp")
                .and_then(Value::as_i64)
                .is_some_and(|e| e > now)
        {
            return Ok(claims);
        }
        if self.inactive.contains_key(&digest) {
            return Err(not_active());
        }
        let known = self.known.contains_key(&digest);
        let _source = if known {
            None
        } else {
            self.count_source(peer)?
        };
        let busy = || OAuthError::IntrospectionUnavailable {
            why: format!("over {MAX_IN_FLIGHT} tokens were being checked at once"),
        };
        let slot = async {
            if known {
                tokio::select! {
                    s = self.reserved.acquire() => s,
                    s = self.open.acquire() => s,
                }
            } else {
                self.open.acquire().await
            }
        };
        let _slot = tokio::time::timeout(SLOT_WAIT, slot)
            .await
            .map_err(|_| busy())?
            .map_err(|_| busy())?;
        let s = &self.settings;
        let request = client
            .post(s.url.clone())
            .basic_auth(&s.client_id, Some(s.client_secret.as_str()))
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(
                url::form_urlencoded::Serializer::new(String::new())
                    .append_pair("token", token)
                    .append_pair("token_type_hint", "access_token")
                    .finish(),
            );
        let body = super::keys::read_bounded(request, &s.url)
            .await
            .map_err(|why| OAuthError::IntrospectionUnavailable { why })?;
        let claims: Value =
            serde_json::from_slice(&body).map_err(|e| OAuthError::IntrospectionUnavailable {
                why: format!("the introspection answer is not JSON: {e}"),
            })?;
        if !claims.is_object() {
            return Err(OAuthError::IntrospectionUnavailable {
                why: "the introspection answer is not a JSON object".into(),
            });
        }
        if claims.get("active") != Some(&Value::Bool(true)) {
            self.inactive.insert(digest, ()).await;
            return Err(not_active());
        }
        let claims = Arc::new(claims);
        self.answers.insert(digest, claims.clone()).await;
        self.known.insert(digest, ()).await;
        Ok(claims)
    }
}

fn not_active() -> OAuthError {
    OAuthError::Invalid("its issuer says it is not active (revoked, expired or unknown)".into())
}

#[cfg(test)]
mod tests {
    use super::source_of;

    #[test]
    fn an_ipv6_source_is_its_64_and_a_mapped_ipv4_its_address() {
        let a: std::net::IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: std::net::IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: std::net::IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(source_of(a), source_of(b));
        assert_ne!(source_of(a), source_of(c));
        let mapped: std::net::IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(
            source_of(mapped),
            "192.0.2.7".parse::<std::net::IpAddr>().unwrap()
        );
    }
}
