//! apigate as an OAuth 2.1 protected resource: bearer tokens from trusted issuers are user
//! sessions. A token is a JWT signed by one of its issuer's published keys (RS*, PS*, ES256,
//! ES384, EdDSA; never `none`, never HS*), for this resource (`aud`, RFC 8707: a token minted
//! for another API is refused), within its lifetime (60 s of skew). Its `sub` is the user,
//! configurable claims the tenant, organization and roles, its scopes the features (through
//! the operator's table). An opaque token (not a JWT) is checked by asking the issuer
//! (RFC 7662, `introspect`) when introspection is configured, and its claims then pass the
//! same checks. The keys are in `keys`; the HTTP side (metadata, 401/403 with
//! `WWW-Authenticate`) in `http::guard`.

mod introspect;
mod keys;

pub use introspect::IntrospectionSettings;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, Validation};
use serde_json::Value;

use super::{Features, KeyPrincipal, Person, Principal};
use crate::types::Tool;

/// The longest `Authorization` header value read (a JWT with a few hundred claims fits).
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// The most scopes a token may carry.
const MAX_SCOPES: usize = 256;
/// The longest `sub` taken, in bytes: OpenID Connect's bound (Core §2: at most 255 ASCII
/// characters). A longer one is refused, never cut: a cut `sub` would make two people one.
/// The tenant, organization and each role are held to the same bound, for the same reason
/// (the identity assertion tells the upstream who the caller is by them).
pub const MAX_SUBJECT_BYTES: usize = 255;
/// Clock skew allowed on `exp` and `nbf`.
const LEEWAY: Duration = Duration::from_secs(60);

/// What the operator configured.
#[derive(Debug, Clone)]
pub struct OAuthSettings {
    /// Trusted issuers (their `iss`), each with its keys' URL when given.
    pub issuers: Vec<(String, Option<url::Url>)>,
    /// This resource's identifier: tokens must name it in `aud` (the public `/mcp` URL).
    pub audience: String,
    /// Scope → the features it grants.
    pub scopes: BTreeMap<String, Vec<String>>,
    /// The claims read as tenant, organization and roles.
    pub tenant_claim: String,
    pub organization_claim: String,
    pub roles_claim: String,
    /// Where opaque tokens are introspected (RFC 7662); without it only JWTs are taken.
    pub introspection: Option<IntrospectionSettings>,
}

impl OAuthSettings {
    /// The scope table used when the operator gives none: read (discover, schema), write
    /// (and execute), admin (the admin API).
    pub fn default_scopes() -> BTreeMap<String, Vec<String>> {
        let features = |tools: &[Tool]| tools.iter().map(|t| t.feature().to_string()).collect();
        BTreeMap::from([
            (
                "apigate:read".into(),
                features(&[Tool::Discover, Tool::Schema]),
            ),
            (
                "apigate:write".into(),
                features(&[Tool::Discover, Tool::Schema, Tool::Execute]),
            ),
            ("apigate:admin".into(), vec!["apigate.admin".into()]),
        ])
    }

    /// Parses `SCOPE=feature,feature` (`--oauth-scope-features`).
    pub fn parse_scope(text: &str) -> Result<(String, Vec<String>), String> {
        let (scope, features) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?}: expected SCOPE=feature,feature"))?;
        OAuthSettings::scope_entry(scope, features.split(',')).map_err(|e| format!("{text:?}: {e}"))
    }

    /// One row of the scope table (a flag's, or `[oauth.scopes]`'s): the scope one word, the
    /// features trimmed, blanks dropped.
    pub fn scope_entry<'a>(
        scope: &str,
        features: impl IntoIterator<Item = &'a str>,
    ) -> Result<(String, Vec<String>), String> {
        let scope = scope.trim();
        if scope.is_empty() || scope.contains(char::is_whitespace) {
            return Err("a scope is one word".into());
        }
        // RFC 6749 §3.3: printable ASCII but `"` and `\`, so that a challenge can quote it.
        if !scope
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
        {
            return Err(format!(
                "{:?}: a scope is printable ASCII without '\"' or '\\' (RFC 6749 §3.3)",
                crate::printable::cell(scope, 64)
            ));
        }
        let features: Vec<String> = features
            .into_iter()
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(String::from)
            .collect();
        Ok((scope.to_string(), features))
    }
}

/// Why a bearer token was refused. Every one is a 401 with `error="invalid_token"` but
/// [`OAuthError::KeysUnavailable`] and [`OAuthError::IntrospectionUnavailable`] (503: the
/// issuer's keys could not be fetched and none are cached, or it did not answer) and
/// [`OAuthError::InsufficientScope`] (403).
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("the bearer token is not a JWT this server can read: {0}")]
    Malformed(String),
    #[error("the bearer token is over {MAX_TOKEN_BYTES} bytes")]
    TooLarge,
    #[error("the token's issuer {0:?} is not trusted by this server")]
    UnknownIssuer(String),
    #[error(
        "the token is signed with {0}, which this server does not accept (RS*, PS*, ES256, ES384, EdDSA)"
    )]
    Algorithm(String),
    #[error("the token names a signing key its issuer does not publish (kid {kid:?})")]
    UnknownKey { kid: String },
    #[error("the signing keys of {issuer} could not be fetched ({why}); try again shortly")]
    KeysUnavailable { issuer: String, why: String },
    #[error("the token could not be checked with its issuer ({why}); try again shortly")]
    IntrospectionUnavailable { why: String },
    #[error(
        "{} unknown tokens from this address are being checked already; try again shortly",
        introspect::PER_SOURCE
    )]
    TooManyAttempts,
    #[error("the token is not valid for this server: {0}")]
    Invalid(String),
    #[error(
        "the token's `{claim}` is {len} bytes, over the {MAX_SUBJECT_BYTES} this server takes \
         (it is never cut: a cut value could name someone else); ask the identity provider \
         for a shorter one"
    )]
    ClaimTooLong { claim: String, len: usize },
    #[error("the token's `{claim}` holds a NUL character, which no identifier may")]
    ClaimNul { claim: String },
    #[error("the token carries more than {MAX_SCOPES} scopes")]
    TooManyScopes,
    #[error("the token's scopes grant no use of this server; it needs one of: {}", scopes.join(" "))]
    InsufficientScope { scopes: Vec<String> },
}

/// A verified bearer token: who, for which client, with what.
#[derive(Debug, Clone)]
pub struct BearerToken {
    /// The configured issuer the token's `iss` names, exactly as configured.
    pub issuer: String,
    /// The token's `sub`, exactly (at most [`MAX_SUBJECT_BYTES`], no NUL): an identity, never
    /// escaped or cut; [`Person::shown`] is for display.
    pub subject: String,
    /// `client_id`, else `azp`: the application acting for the user.
    pub client_id: String,
    pub scopes: Vec<String>,
    pub features: Features,
    pub tenant: Option<String>,
    pub organization: Option<String>,
    pub roles: Vec<String>,
    pub expires_at: Option<DateTime<Utc>>,
}

impl BearerToken {
    /// The person the token names: its exact issuer and `sub`.
    pub fn person(&self) -> Person {
        Person {
            issuer: self.issuer.clone(),
            subject: self.subject.clone(),
        }
    }

    /// The principal a call with this token runs as: the user (`sub`), acting through the
    /// client (`actor` in the audit log: `oauth:CLIENT`), with the token's features, and with
    /// a server key also presented (`--auth both`), only what both grant.
    pub fn principal(&self, key: Option<&KeyPrincipal>) -> Principal {
        let (features, read_only, key_id) = match key {
            Some(k) => (
                self.features.intersection(&k.features),
                k.read_only,
                k.key_id,
            ),
            None => (self.features.clone(), false, None),
        };
        Principal {
            key_id,
            key_label: format!("oauth:{}", self.client_id),
            key_name: self.client_id.clone(),
            session_id: None,
            user_id: Some(self.subject.clone()),
            tenant_id: self.tenant.clone(),
            organization_id: self.organization.clone(),
            roles: self.roles.clone(),
            features,
            read_only,
            expires_at: self.expires_at,
            upstream: None,
            person: Some(self.person()),
        }
    }
}

/// The trusted issuers and how their tokens map to principals. Cheap to clone.
#[derive(Clone)]
pub struct ResourceServer {
    inner: Arc<Inner>,
}

struct Inner {
    settings: OAuthSettings,
    issuers: Vec<keys::Issuer>,
    introspector: Option<introspect::Introspector>,
    client: reqwest::Client,
}

impl ResourceServer {
    /// A resource server for `settings`; fetches each issuer's keys now (an issuer that does
    /// not answer is logged, and its tokens are refused with 503 until its keys load).
    pub async fn start(settings: OAuthSettings) -> anyhow::Result<ResourceServer> {
        if settings.issuers.is_empty() {
            anyhow::bail!("give at least one --oauth-issuer");
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .redirect(reqwest::redirect::Policy::limited(3))
            .build()?;
        let issuers = settings
            .issuers
            .iter()
            .map(|(iss, jwks)| keys::Issuer::new(iss.clone(), jwks.clone()))
            .collect();
        let introspector = settings
            .introspection
            .clone()
            .map(introspect::Introspector::new);
        let server = ResourceServer {
            inner: Arc::new(Inner {
                settings,
                issuers,
                introspector,
                client,
            }),
        };
        for issuer in &server.inner.issuers {
            issuer.refresh(&server.inner.client).await;
        }
        Ok(server)
    }

    pub fn settings(&self) -> &OAuthSettings {
        &self.inner.settings
    }

    /// Verifies a bearer token and reads what it grants.
    pub async fn verify(&self, token: &str) -> Result<BearerToken, OAuthError> {
        self.verify_from(token, None).await
    }

    /// [`ResourceServer::verify`] of a token sent from `peer`: an opaque token the issuer
    /// never called active counts against its source's share of introspection.
    pub async fn verify_from(
        &self,
        token: &str,
        peer: Option<std::net::IpAddr>,
    ) -> Result<BearerToken, OAuthError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(OAuthError::TooLarge);
        }
        if let Some(introspector) = &self.inner.introspector
            && token.split('.').count() != 3
        {
            let claims = introspector.claims(&self.inner.client, token, peer).await?;
            return self.check_introspected(&claims);
        }
        let header = jsonwebtoken::decode_header(token).map_err(|e| {
            OAuthError::Malformed(match e.kind() {
                jsonwebtoken::errors::ErrorKind::Json(_) => {
                    "its header names no algorithm this server knows (`none` is never accepted)"
                        .into()
                }
                _ => e.to_string(),
            })
        })?;
        if matches!(
            header.alg,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
        ) {
            return Err(OAuthError::Algorithm(format!("{:?}", header.alg)));
        }
        // The issuer picks the keys; its claim is checked again with the signature.
        let claims: Value = jsonwebtoken::dangerous::insecure_decode::<Value>(token)
            .map_err(|e| OAuthError::Malformed(e.to_string()))?
            .claims;
        let iss = claims
            .get("iss")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let issuer = self.trusted(iss)?;
        let key = issuer
            .key(&self.inner.client, header.kid.as_deref())
            .await?;
        if !key.algorithms.contains(&header.alg) {
            return Err(OAuthError::Algorithm(format!(
                "{:?} (the key {:?} is for {:?})",
                header.alg,
                header.kid.unwrap_or_default(),
                key.algorithms
            )));
        }
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.leeway = LEEWAY.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[iss]);
        validation.set_audience(&[self.inner.settings.audience.as_str()]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = jsonwebtoken::decode::<Value>(token, &key.key, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind;
            OAuthError::Invalid(match e.kind() {
                ErrorKind::ExpiredSignature => "it has expired".into(),
                ErrorKind::ImmatureSignature => "it is not valid yet (nbf)".into(),
                ErrorKind::InvalidAudience => format!(
                    "it was issued for another resource (its aud does not name {})",
                    self.inner.settings.audience
                ),
                ErrorKind::InvalidSignature => "its signature does not verify".into(),
                ErrorKind::MissingRequiredClaim(c) => format!("it has no `{c}` claim"),
                _ => e.to_string(),
            })
        })?;
        self.read_claims(&issuer.issuer, &data.claims)
    }

    /// The configured issuer `iss` names (compared without a trailing `/`).
    fn trusted(&self, iss: &str) -> Result<&keys::Issuer, OAuthError> {
        self.inner
            .issuers
            .iter()
            .find(|i| i.issuer.trim_end_matches('/') == iss.trim_end_matches('/'))
            .ok_or_else(|| OAuthError::UnknownIssuer(crate::printable::cell(iss, 200)))
    }

    /// An introspection answer's claims, checked as a JWT's are: a trusted `iss` (the only
    /// issuer when the answer names none), an `aud` naming this resource, `exp` (required) and
    /// `nbf` with the skew, a `sub`.
    fn check_introspected(&self, claims: &Value) -> Result<BearerToken, OAuthError> {
        let s = &self.inner.settings;
        let issuer = match claims.get("iss").and_then(Value::as_str) {
            Some(iss) => self.trusted(iss)?.issuer.as_str(),
            None if s.issuers.len() == 1 => s.issuers[0].0.as_str(),
            None => {
                return Err(OAuthError::Invalid(
                    "its introspection answer names no issuer".into(),
                ));
            }
        };
        let audience = s.audience.as_str();
        let for_us = match claims.get("aud") {
            Some(Value::String(a)) => a == audience,
            Some(Value::Array(a)) => a.iter().any(|a| a.as_str() == Some(audience)),
            _ => false,
        };
        if !for_us {
            return Err(OAuthError::Invalid(format!(
                "it was issued for another resource (its aud does not name {audience})"
            )));
        }
        let now = Utc::now().timestamp();
        let leeway = LEEWAY.as_secs() as i64;
        match claims.get("exp").and_then(Value::as_i64) {
            None => return Err(OAuthError::Invalid("it has no `exp` claim".into())),
            Some(exp) if exp + leeway < now => {
                return Err(OAuthError::Invalid("it has expired".into()));
            }
            Some(_) => {}
        }
        if claims
            .get("nbf")
            .and_then(Value::as_i64)
            .is_some_and(|nbf| nbf - leeway > now)
        {
            return Err(OAuthError::Invalid("it is not valid yet (nbf)".into()));
        }
        self.read_claims(issuer, claims)
    }

    fn read_claims(&self, issuer: &str, claims: &Value) -> Result<BearerToken, OAuthError> {
        let s = &self.inner.settings;
        // Identifiers are kept exactly: escaping and cutting are for display only.
        let exact = |claim: &str, value: &str| -> Result<String, OAuthError> {
            if value.len() > MAX_SUBJECT_BYTES {
                return Err(OAuthError::ClaimTooLong {
                    claim: crate::printable::cell(claim, 64),
                    len: value.len(),
                });
            }
            if value.contains('\0') {
                return Err(OAuthError::ClaimNul {
                    claim: crate::printable::cell(claim, 64),
                });
            }
            Ok(value.to_string())
        };
        let text = |name: &str| -> Result<Option<String>, OAuthError> {
            claims
                .get(name)
                .and_then(Value::as_str)
                .map(|v| exact(name, v))
                .transpose()
        };
        let subject = text("sub")?
            .filter(|s| !s.is_empty())
            .ok_or_else(|| OAuthError::Invalid("it has no `sub` claim".into()))?;
        let scopes: Vec<String> = match (claims.get("scope"), claims.get("scp")) {
            (Some(Value::String(s)), _) => s.split_whitespace().map(String::from).collect(),
            (_, Some(Value::Array(a))) => a
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
            (_, Some(Value::String(s))) => s.split_whitespace().map(String::from).collect(),
            _ => Vec::new(),
        };
        if scopes.len() > MAX_SCOPES {
            return Err(OAuthError::TooManyScopes);
        }
        let features = Features::new(
            scopes
                .iter()
                .filter_map(|sc| s.scopes.get(sc))
                .flatten()
                .cloned(),
        );
        let roles = match claims.get(&s.roles_claim) {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .take(MAX_SCOPES)
                .map(|r| exact(&s.roles_claim, r))
                .collect::<Result<_, _>>()?,
            Some(Value::String(r)) => r
                .split_whitespace()
                .take(MAX_SCOPES)
                .map(|r| exact(&s.roles_claim, r))
                .collect::<Result<_, _>>()?,
            _ => Vec::new(),
        };
        // The client is a label (the audit's actor), never an identity: shown escaped.
        let label = |name: &str| {
            claims
                .get(name)
                .and_then(Value::as_str)
                .map(|v| crate::printable::cell(v, 200))
        };
        let client_id = label("client_id")
            .or_else(|| label("azp"))
            .unwrap_or_else(|| "unknown-client".into());
        let expires_at = claims
            .get("exp")
            .and_then(Value::as_i64)
            .and_then(|t| DateTime::from_timestamp(t, 0));
        Ok(BearerToken {
            issuer: issuer.to_string(),
            subject,
            client_id,
            scopes,
            features,
            tenant: text(&s.tenant_claim)?,
            organization: text(&s.organization_claim)?,
            roles,
            expires_at,
        })
    }

    /// The scopes that grant `feature` (for `WWW-Authenticate: … scope="…"`).
    pub fn scopes_granting(&self, feature: &str) -> Vec<String> {
        self.inner
            .settings
            .scopes
            .iter()
            .filter(|(_, features)| Features::new(features.iter().cloned()).allows(feature))
            .map(|(scope, _)| scope.clone())
            .collect()
    }

    /// The scopes a token must add to grant what a call lacks (`WWW-Authenticate: Bearer
    /// error="insufficient_scope", scope="…"`); see [`step_up_scopes`].
    pub fn step_up_scopes(
        &self,
        lacking: &[Vec<String>],
        limit: Option<&Features>,
    ) -> Option<Vec<String>> {
        step_up_scopes(&self.inner.settings.scopes, lacking, limit)
    }

    /// RFC 9728 protected resource metadata.
    pub fn metadata(&self) -> Value {
        let s = &self.inner.settings;
        serde_json::json!({
            "resource": s.audience,
            "authorization_servers": s.issuers.iter().map(|(i, _)| i).collect::<Vec<_>>(),
            "scopes_supported": s.scopes.keys().collect::<Vec<_>>(),
            "bearer_methods_supported": ["header"],
            "resource_name": "apigate",
        })
    }

    /// Where the metadata is published: the resource's origin, `/.well-known/oauth-protected-resource`
    /// and the resource's path (RFC 9728 §3.1).
    pub fn metadata_url(&self) -> String {
        match url::Url::parse(&self.inner.settings.audience) {
            Ok(u) => format!(
                "{}/.well-known/oauth-protected-resource{}",
                u.origin().ascii_serialization(),
                u.path().trim_end_matches('/')
            ),
            Err(_) => "/.well-known/oauth-protected-resource".into(),
        }
    }

    /// What `/health` shows of each issuer.
    pub fn health(&self) -> Value {
        Value::Array(
            self.inner
                .issuers
                .iter()
                .map(keys::Issuer::health)
                .collect(),
        )
    }

    /// Each issuer as `apigate oauth check` shows it: `issuer`, `jwksUrl`, `keys` (`kid`,
    /// `algorithms`), `lastError`.
    pub fn describe(&self) -> Vec<Value> {
        self.inner
            .issuers
            .iter()
            .map(|i| {
                let keys: Vec<Value> = i
                    .key_list()
                    .into_iter()
                    .map(|(kid, algs)| {
                        let algs: Vec<String> = algs.iter().map(|a| format!("{a:?}")).collect();
                        serde_json::json!({"kid": kid, "algorithms": algs})
                    })
                    .collect();
                serde_json::json!({"issuer": i.issuer, "jwksUrl": i.jwks_url(), "keys": keys,
                    "lastError": i.health()["lastError"]})
            })
            .collect()
    }
}

/// The scopes of `table` to ask for so that a token grants what a call lacks. `lacking` holds
/// one entry per requirement the call does not meet, each the features any one of which would
/// meet it (`apigate.execute`; `NAME.execute` or `NAME:operationId`). For each, the narrowest
/// scope granting one of them (not `*`, then the fewest wildcards, then the fewest features,
/// then by name), unless a scope already chosen does; only features `limit` (a server key
/// presented beside the token, whose features the call also needs) allows count. `None` when some requirement
/// no scope can meet: a token with more scopes would be refused all the same.
///
/// Only the scopes the call needs, not those the token holds already: RFC 6750 §3.1, and MCP's
/// authorization spec since 2026-07-28 (SEP-2350), leaves adding them up to the client.
pub fn step_up_scopes(
    table: &BTreeMap<String, Vec<String>>,
    lacking: &[Vec<String>],
    limit: Option<&Features>,
) -> Option<Vec<String>> {
    type Narrowness = (bool, usize, usize);
    let mut by_narrowness: Vec<(&String, Features, Narrowness)> = table
        .iter()
        .map(|(scope, features)| {
            let everything = features.iter().any(|f| f == "*");
            let wildcards = features.iter().filter(|f| f.contains('*')).count();
            let narrowness = (everything, wildcards, features.len());
            (scope, Features::new(features.iter()), narrowness)
        })
        .collect();
    // Stable: scopes equally narrow stay in name order.
    by_narrowness.sort_by_key(|(_, _, narrowness)| *narrowness);
    let usable = |f: &String| limit.is_none_or(|l| l.allows(f));
    let mut chosen: Vec<&(&String, Features, Narrowness)> = Vec::new();
    for alternatives in lacking {
        let meets = |(_, features, _): &&(&String, Features, Narrowness)| {
            alternatives.iter().any(|f| usable(f) && features.allows(f))
        };
        if chosen.iter().any(meets) {
            continue;
        }
        chosen.push(by_narrowness.iter().find(meets)?);
    }
    Some(
        chosen
            .iter()
            .map(|(scope, _, _)| scope.to_string())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lacking(clauses: &[&[&str]]) -> Vec<Vec<String>> {
        clauses
            .iter()
            .map(|c| c.iter().map(|f| f.to_string()).collect())
            .collect()
    }

    #[test]
    fn step_up_asks_for_the_narrowest_scope_that_grants_each_lack() {
        let mut table = OAuthSettings::default_scopes();
        let ask = |table: &BTreeMap<String, Vec<String>>, clauses: &[&[&str]]| {
            step_up_scopes(table, &lacking(clauses), None)
        };
        // apigate:read and apigate:write both grant the schema: read is narrower.
        assert_eq!(
            ask(&table, &[&["apigate.schema"]]).unwrap(),
            ["apigate:read"]
        );
        assert_eq!(
            ask(&table, &[&["apigate.execute"]]).unwrap(),
            ["apigate:write"]
        );
        // Nothing grants it: asking for more would not help.
        assert_eq!(ask(&table, &[&["billing.write"]]), None);
        table.insert("billing:write".into(), vec!["billing.*".into()]);
        table.insert("everything".into(), vec!["*".into()]);
        // One scope per lack, none twice; a wildcard scope only when nothing narrower grants.
        assert_eq!(
            ask(
                &table,
                &[
                    &["apigate.execute"],
                    &["billing.write"],
                    &["apigate.schema"]
                ]
            )
            .unwrap(),
            ["apigate:write", "billing:write"]
        );
        assert_eq!(ask(&table, &[&["crm.read"]]).unwrap(), ["everything"]);
        // Any one of the alternatives will do.
        assert_eq!(
            ask(&table, &[&["petstore.execute", "billing.refund"]]).unwrap(),
            ["billing:write"]
        );
        assert_eq!(ask(&table, &[]).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn step_up_counts_only_what_the_key_beside_the_token_allows() {
        let mut table = OAuthSettings::default_scopes();
        table.insert("billing:write".into(), vec!["billing.*".into()]);
        let key = Features::new(["apigate.*"]);
        let lacks = lacking(&[&["apigate.execute"]]);
        assert_eq!(
            step_up_scopes(&table, &lacks, Some(&key)).unwrap(),
            ["apigate:write"]
        );
        // The key does not allow it: no token would make the call pass.
        let lacks = lacking(&[&["apigate.execute"], &["billing.write"]]);
        assert_eq!(step_up_scopes(&table, &lacks, Some(&key)), None);
    }

    #[test]
    fn scopes_are_words_a_challenge_can_quote() {
        assert!(OAuthSettings::parse_scope("apigate:read=apigate.discover").is_ok());
        for bad in ["a\"b=x", "a\\b=x", "é=x", "a b=x", "=x"] {
            assert!(OAuthSettings::parse_scope(bad).is_err(), "{bad}");
        }
    }
}
