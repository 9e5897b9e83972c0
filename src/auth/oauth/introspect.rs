//! Opaque bearer tokens (not JWTs), checked by asking the issuer (RFC 7662 token
//! introspection, `--oauth-introspection-url`): apigate authenticates as a confidential client
//! (HTTP Basic), the answer is bounded and timed out like a key fetch, and an active answer is
//! kept for at most [`KEEP`] (never past the token's `exp`), so a revoked token stops working
//! within that time. At most [`MAX_IN_FLIGHT`] requests are in flight. The claims it returns
//! are checked as a JWT's are (`iss`, `aud`, `exp`, `nbf`, `sub`) by the caller.

use std::sync::Arc;
use std::time::Duration;

use moka::future::Cache;
use serde_json::Value;
use zeroize::Zeroizing;

use super::OAuthError;

/// How long an active answer is reused.
const KEEP: Duration = Duration::from_secs(30);
/// The most introspection requests in flight: a flood of made-up tokens costs the issuer at
/// most this many requests at a time, and waits (then 503) beyond it.
const MAX_IN_FLIGHT: usize = 16;
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
    slots: tokio::sync::Semaphore,
}

impl Introspector {
    pub(super) fn new(settings: IntrospectionSettings) -> Introspector {
        Introspector {
            settings,
            answers: Cache::builder()
                .max_capacity(10_000)
                .time_to_live(KEEP)
                .build(),
            slots: tokio::sync::Semaphore::new(MAX_IN_FLIGHT),
        }
    }

    /// The claims of an active token; a token the issuer says is inactive is refused.
    pub(super) async fn claims(
        &self,
        client: &reqwest::Client,
        token: &str,
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
        let busy = || OAuthError::IntrospectionUnavailable {
            why: format!("over {MAX_IN_FLIGHT} tokens were being checked at once"),
        };
        let _slot = tokio::time::timeout(SLOT_WAIT, self.slots.acquire())
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
            return Err(OAuthError::Invalid(
                "its issuer says it is not active (revoked, expired or unknown)".into(),
            ));
        }
        let claims = Arc::new(claims);
        self.answers.insert(digest, claims.clone()).await;
        Ok(claims)
    }
}
