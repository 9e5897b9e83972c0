//! Signed identity assertions: a short-lived JWT (EdDSA, Ed25519) that apigate adds to every
//! upstream call so the API knows which user, tenant and organization the agent acts for
//! (`sub`, `tenant`, `org`), which agent key acts (`act`, RFC 8693), and that the token was
//! made for this very request (`aud`, `htm`, `htu`, `jti`, `exp`). APIs verify it with the
//! public keys at `GET /.well-known/jwks.json` (`docs/identity.md`).
//!
//! Keys are PKCS#8 PEM files (`apigate signing-key create`, or `openssl genpkey -algorithm
//! ed25519`); each key's `kid` is its RFC 7638 JWK thumbprint. The first configured key signs,
//! all are published, so a new key can be published before it signs.
//!
//! Signing uses `jsonwebtoken` with the aws-lc-rs backend, the one rustls already links.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use http::{HeaderName, HeaderValue};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use url::Url;
use zeroize::Zeroizing;

use super::Principal;

/// How long an assertion is valid after it was made, in seconds (the issue's bound is 60).
pub(crate) const LIFETIME_SECS: i64 = 60;

/// A key file larger than this is not a key (an Ed25519 PKCS#8 PEM is about 120 bytes).
pub(crate) const MAX_KEY_FILE_BYTES: u64 = 16 * 1024;

/// Signing keys published at once (a rotation needs two; a few more is a mistake).
pub const MAX_KEYS: usize = 8;

/// What a dry run shows in place of the assertion (never a value).
pub const DRY_RUN_PLACEHOLDER: &str = "[signed identity assertion, added when sent]";

const PEM_BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const PEM_END: &str = "-----END PRIVATE KEY-----";

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("reading the signing key {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the signing key {path} is over {MAX_KEY_FILE_BYTES} bytes: not a key file")]
    TooLarge { path: PathBuf },
    #[error(
        "{path} is not an Ed25519 private key in PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`); \
         make one with `apigate signing-key create --out FILE`"
    )]
    NotAKey { path: PathBuf },
    #[error("{path} already exists; apigate never overwrites a key (pick another file)")]
    Exists { path: PathBuf },
    #[error("writing the signing key {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the system random generator failed while making a key")]
    Generate,
    #[error("--identity-header needs at least one --signing-key")]
    NoKey,
    #[error("--signing-key given {MAX_KEYS}+ times; publish at most {MAX_KEYS} keys")]
    TooManyKeys,
    #[error("the signing key {path} is given twice (kid {kid})")]
    Duplicate { path: PathBuf, kid: String },
    #[error(
        "--identity-header {0:?} cannot carry the assertion: use a header name such as \
         X-Apigate-Identity (not a hop-by-hop, framing or cookie header)"
    )]
    BadHeader(String),
    #[error("--identity-issuer must not be empty")]
    NoIssuer,
    #[error("signing the identity assertion failed: {0}")]
    Sign(jsonwebtoken::errors::Error),
}

/// One Ed25519 signing key: its `kid`, the key jsonwebtoken signs with, and its public half.
pub struct SigningKey {
    kid: String,
    encoding: EncodingKey,
    /// The public key, base64url (the JWK's `x`).
    x: String,
}

crate::debug_fields!(SigningKey { kid });

impl SigningKey {
    /// Reads a PKCS#8 PEM Ed25519 private key (v1 or v2).
    pub fn load(path: &Path) -> Result<SigningKey, IdentityError> {
        let read_err = |source| IdentityError::Read {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(read_err)?;
        if meta.len() > MAX_KEY_FILE_BYTES {
            return Err(IdentityError::TooLarge {
                path: path.to_path_buf(),
            });
        }
        warn_if_readable_by_others(path, &meta);
        let text = Zeroizing::new(std::fs::read_to_string(path).map_err(read_err)?);
        SigningKey::from_pem(&text).ok_or_else(|| IdentityError::NotAKey {
            path: path.to_path_buf(),
        })
    }

    /// The key in a PEM text, or `None` when it holds no Ed25519 PKCS#8 private key.
    pub(crate) fn from_pem(text: &str) -> Option<SigningKey> {
        let start = text.find(PEM_BEGIN)? + PEM_BEGIN.len();
        let end = start + text[start..].find(PEM_END)?;
        let body: Zeroizing<String> = Zeroizing::new(
            text[start..end]
                .chars()
                .filter(|c| !c.is_ascii_whitespace())
                .collect(),
        );
        let der = Zeroizing::new(STANDARD.decode(body.as_bytes()).ok()?);
        SigningKey::from_pkcs8(&der)
    }

    fn from_pkcs8(der: &[u8]) -> Option<SigningKey> {
        let pair = Ed25519KeyPair::from_pkcs8(der).ok()?;
        let x = URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
        // jsonwebtoken parses the key again for each signature: the seed-only (v1) form spares
        // it the check that the public key it derives matches the one a v2 document carries.
        let v1 = pair.to_pkcs8v1().ok()?;
        Some(SigningKey {
            kid: thumbprint(&x),
            encoding: EncodingKey::from_ed_der(v1.as_ref()),
            x,
        })
    }

    /// The RFC 7638 thumbprint of the public key, used as `kid`.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public key as a JWK (RFC 8037 `OKP`).
    pub fn jwk(&self) -> Value {
        json!({
            "kty": "OKP",
            "crv": "Ed25519",
            "x": self.x,
            "kid": self.kid,
            "alg": "EdDSA",
            "use": "sig",
        })
    }
}

#[cfg(unix)]
fn warn_if_readable_by_others(path: &Path, meta: &std::fs::Metadata) {
    use std::os::unix::fs::PermissionsExt;
    if meta.permissions().mode() & 0o077 != 0 {
        tracing::warn!(
            path = %path.display(),
            "the signing key file can be read by other users; `chmod 600` it"
        );
    }
}

#[cfg(not(unix))]
fn warn_if_readable_by_others(_: &Path, _: &std::fs::Metadata) {}

/// RFC 7638: base64url(SHA-256 of the required members, sorted, no whitespace).
fn thumbprint(x: &str) -> String {
    let canonical = format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{x}"}}"#);
    URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
}

/// Makes a new Ed25519 key and writes it to `path` as PKCS#8 PEM, readable by its owner only
/// (0600), refusing to replace an existing file. Returns the key (for its `kid`).
pub fn create_key_file(path: &Path) -> Result<SigningKey, IdentityError> {
    let rng = aws_lc_rs::rand::SystemRandom::new();
    // PKCS#8 v1, as `openssl genpkey -algorithm ed25519` writes it: OpenSSL 3.0 and Python's
    // `cryptography` cannot read the v2 form (with the public key) that aws-lc writes.
    let doc = Ed25519KeyPair::generate_pkcs8v1(&rng).map_err(|_| IdentityError::Generate)?;
    let key = SigningKey::from_pkcs8(doc.as_ref()).ok_or(IdentityError::Generate)?;
    let mut pem = String::with_capacity(160);
    pem.push_str(PEM_BEGIN);
    pem.push('\n');
    let body = STANDARD.encode(doc.as_ref());
    for chunk in body.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        pem.push('\n');
    }
    pem.push_str(PEM_END);
    pem.push('\n');
    let write_err = |source: std::io::Error| {
        if source.kind() == std::io::ErrorKind::AlreadyExists {
            IdentityError::Exists {
                path: path.to_path_buf(),
            }
        } else {
            IdentityError::Write {
                path: path.to_path_buf(),
                source,
            }
        }
    };
    let mut options = std::fs::OpenOptions::new();
    // `create_new` fails on an existing file or symlink, atomically.
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(write_err)?;
    let written = file
        .write_all(pem.as_bytes())
        .and_then(|()| file.sync_all());
    // The PEM text holds the key: wipe it.
    drop(Zeroizing::new(pem.into_bytes()));
    if let Err(e) = written {
        drop(file);
        let _ = std::fs::remove_file(path);
        return Err(write_err(e));
    }
    Ok(key)
}

/// The configured assertion: where it goes, who issues it, and the keys.
pub struct Identity {
    header: HeaderName,
    issuer: String,
    /// The first signs; all are published.
    keys: Vec<SigningKey>,
    jwt_header: Header,
    jwks: Value,
}

crate::debug_fields!(Identity {
    header,
    issuer,
    keys
});

/// The RFC 8693 actor: the agent's server key.
#[derive(Serialize)]
struct Actor<'a> {
    sub: &'a str,
    name: &'a str,
}

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    sub: Option<&'a str>,
    aud: String,
    act: Actor<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tenant: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    org: Option<&'a str>,
    roles: &'a [String],
    features: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sid: Option<String>,
    jti: &'a str,
    op: &'a str,
    htm: &'a str,
    htu: String,
    iat: i64,
    exp: i64,
}

/// What one assertion is about, besides who calls.
pub struct CallFacts<'a> {
    /// The call id (the audit row's `call_id`).
    pub call_id: &'a str,
    /// The operationId.
    pub operation: &'a str,
    pub method: &'a str,
    pub url: &'a Url,
}

impl Identity {
    /// Loads the keys (the first signs) for assertions in header `header`, issued as `issuer`.
    pub fn new(
        header: &str,
        issuer: &str,
        key_files: &[PathBuf],
    ) -> Result<Identity, IdentityError> {
        let mut keys = Vec::with_capacity(key_files.len());
        for path in key_files {
            keys.push((path.clone(), SigningKey::load(path)?));
        }
        Identity::from_keys(header, issuer, keys)
    }

    /// As [`Identity::new`], from keys already loaded (`path` names each in errors).
    pub(crate) fn from_keys(
        header: &str,
        issuer: &str,
        keys: Vec<(PathBuf, SigningKey)>,
    ) -> Result<Identity, IdentityError> {
        let header = assertion_header(header)?;
        let issuer = issuer.trim();
        if issuer.is_empty() {
            return Err(IdentityError::NoIssuer);
        }
        if keys.is_empty() {
            return Err(IdentityError::NoKey);
        }
        if keys.len() > MAX_KEYS {
            return Err(IdentityError::TooManyKeys);
        }
        let mut loaded: Vec<SigningKey> = Vec::with_capacity(keys.len());
        for (path, key) in keys {
            if loaded.iter().any(|k| k.kid == key.kid) {
                return Err(IdentityError::Duplicate { path, kid: key.kid });
            }
            loaded.push(key);
        }
        let mut jwt_header = Header::new(Algorithm::EdDSA);
        jwt_header.kid = Some(loaded[0].kid.clone());
        let jwks = json!({"keys": loaded.iter().map(SigningKey::jwk).collect::<Vec<_>>()});
        Ok(Identity {
            header,
            issuer: issuer.to_string(),
            keys: loaded,
            jwt_header,
            jwks,
        })
    }

    /// The header the assertion travels in.
    pub fn header(&self) -> &HeaderName {
        &self.header
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The `kid` of the key that signs.
    pub(crate) fn signing_kid(&self) -> &str {
        &self.keys[0].kid
    }

    /// `{"keys": [JWK, …]}`: every configured public key, for `/.well-known/jwks.json`.
    pub fn jwks(&self) -> &Value {
        &self.jwks
    }

    /// The signed assertion for one call by `who`.
    pub fn assertion(
        &self,
        who: &Principal,
        call: &CallFacts<'_>,
    ) -> Result<String, IdentityError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default();
        self.assertion_at(who, call, now)
    }

    /// As [`Identity::assertion`], issued at `now` (seconds since the epoch).
    pub(crate) fn assertion_at(
        &self,
        who: &Principal,
        call: &CallFacts<'_>,
        now: i64,
    ) -> Result<String, IdentityError> {
        let mut htu = call.url.clone();
        htu.set_query(None);
        htu.set_fragment(None);
        // Never user info in a token an API may log.
        let _ = htu.set_username("");
        let _ = htu.set_password(None);
        let claims = Claims {
            iss: &self.issuer,
            sub: who.user_id.as_deref(),
            aud: call.url.origin().ascii_serialization(),
            act: Actor {
                sub: who.key_label.strip_prefix("key:").unwrap_or(&who.key_label),
                name: &who.key_name,
            },
            tenant: who.tenant_id.as_deref(),
            org: who.organization_id.as_deref(),
            roles: &who.roles,
            features: who.features.iter().collect(),
            sid: who.session_id.map(|s| s.to_string()),
            jti: call.call_id,
            op: call.operation,
            htm: call.method,
            htu: htu.to_string(),
            iat: now,
            exp: now + LIFETIME_SECS,
        };
        jsonwebtoken::encode(&self.jwt_header, &claims, &self.keys[0].encoding)
            .map_err(IdentityError::Sign)
    }

    /// The assertion as the header value [`crate::upstream::CallCredentials`] carries: the
    /// compact JWT, after `Bearer ` in `Authorization`.
    pub fn header_value(
        &self,
        who: &Principal,
        call: &CallFacts<'_>,
    ) -> Result<HeaderValue, IdentityError> {
        let mut token = self.assertion(who, call)?;
        if self.header == http::header::AUTHORIZATION {
            token.insert_str(0, "Bearer ");
        }
        // A compact JWS is base64url and dots: always a valid header value.
        HeaderValue::from_str(&token)
            .map_err(|_| IdentityError::Sign(jsonwebtoken::errors::ErrorKind::InvalidToken.into()))
    }

    /// Marks in a dry run's request view that the assertion will be added (without a value).
    pub(crate) fn mark_dry_run(&self, view: &mut Value) {
        if let Some(Value::Object(headers)) = view.get_mut("headers") {
            // The agent's own header of that name (if the operation declares one) is replaced.
            headers.retain(|k, _| !k.eq_ignore_ascii_case(self.header.as_str()));
            headers.insert(
                self.header.as_str().to_string(),
                Value::String(DRY_RUN_PLACEHOLDER.into()),
            );
        }
    }
}

/// The header name, if it can carry the assertion: a valid name that is not hop-by-hop,
/// framing, `Host` or a cookie.
fn assertion_header(name: &str) -> Result<HeaderName, IdentityError> {
    let bad = || IdentityError::BadHeader(name.chars().take(80).collect());
    let parsed = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| bad())?;
    let forbidden = !crate::upstream::headers::may_carry_assertion(parsed.as_str());
    if forbidden {
        return Err(bad());
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Features;

    fn key() -> SigningKey {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let doc = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        SigningKey::from_pkcs8(doc.as_ref()).unwrap()
    }

    #[test]
    fn the_kid_is_the_rfc7638_thumbprint() {
        // RFC 8037 appendix A.3: the thumbprint of its Ed25519 example key.
        assert_eq!(
            thumbprint("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"),
            "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
        );
    }

    #[test]
    fn a_pem_from_openssl_loads_and_garbage_does_not() {
        // RFC 8410 §10.3: an Ed25519 PKCS#8 v1 private key.
        let pem = "-----BEGIN PRIVATE KEY-----\n\
                   MC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC\n\
                   -----END PRIVATE KEY-----\n";
        let k = SigningKey::from_pem(pem).expect("an RFC 8410 key loads");
        assert_eq!(k.jwk()["x"], "Gb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE");
        assert!(
            SigningKey::from_pem("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----")
                .is_none()
        );
        assert!(SigningKey::from_pem("no key here").is_none());
    }

    #[test]
    fn header_names_that_cannot_carry_it_are_refused() {
        for bad in [
            "Host",
            "Connection",
            "Cookie",
            "Content-Length",
            "bad name",
            "",
        ] {
            assert!(assertion_header(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["X-Apigate-Identity", "Authorization", "apigate-assertion"] {
            assert!(assertion_header(good).is_ok(), "{good:?} refused");
        }
    }

    #[test]
    fn the_assertion_carries_the_claims_and_verifies() {
        let k = key();
        let jwk: jsonwebtoken::jwk::Jwk = serde_json::from_value(k.jwk()).unwrap();
        let id = Identity::from_keys(
            "X-Apigate-Identity",
            "https://gate.example",
            vec![(PathBuf::from("k"), k)],
        )
        .unwrap();
        let who = Principal {
            user_id: Some("u-42".into()),
            tenant_id: Some("acme".into()),
            session_id: Some(uuid::Uuid::nil()),
            key_label: "key:abcd1234".into(),
            key_name: "agent".into(),
            features: Features::new(["pets.read"]),
            ..Principal::dev()
        };
        let url = Url::parse("https://user:pw@api.example:8443/v1/pets/7?secret=1#f").unwrap();
        let facts = CallFacts {
            call_id: "call-1",
            operation: "getPet",
            method: "GET",
            url: &url,
        };
        let token = id.assertion(&who, &facts).unwrap();
        let mut v = jsonwebtoken::Validation::new(Algorithm::EdDSA);
        v.set_audience(&["https://api.example:8443"]);
        v.set_issuer(&["https://gate.example"]);
        let data = jsonwebtoken::decode::<Value>(
            &token,
            &jsonwebtoken::DecodingKey::from_jwk(&jwk).unwrap(),
            &v,
        )
        .unwrap();
        assert_eq!(data.header.kid.as_deref(), Some(id.signing_kid()));
        let c = data.claims;
        assert_eq!(c["sub"], "u-42");
        assert_eq!(c["act"], json!({"sub": "abcd1234", "name": "agent"}));
        assert_eq!(c["tenant"], "acme");
        assert!(c.get("org").is_none());
        assert_eq!(c["features"], json!(["pets.read"]));
        assert_eq!(c["sid"], uuid::Uuid::nil().to_string());
        assert_eq!(c["jti"], "call-1");
        assert_eq!(c["op"], "getPet");
        assert_eq!(c["htm"], "GET");
        assert_eq!(c["htu"], "https://api.example:8443/v1/pets/7");
        assert_eq!(c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(), 60);
    }

    #[test]
    fn a_key_is_written_once_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.pem");
        let made = create_key_file(&path).unwrap();
        let loaded = SigningKey::load(&path).unwrap();
        assert_eq!(made.kid(), loaded.kid());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let before = std::fs::read(&path).unwrap();
        assert!(matches!(
            create_key_file(&path),
            Err(IdentityError::Exists { .. })
        ));
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "the key was replaced"
        );
    }

    #[test]
    fn the_same_key_twice_and_no_key_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.pem");
        create_key_file(&path).unwrap();
        let twice = Identity::new("X-Id", "https://g", &[path.clone(), path.clone()]);
        assert!(matches!(twice, Err(IdentityError::Duplicate { .. })));
        assert!(matches!(
            Identity::new("X-Id", "https://g", &[]),
            Err(IdentityError::NoKey)
        ));
    }
}
