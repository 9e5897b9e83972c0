//! Secrets at rest: AES-256-GCM (RustCrypto `aes-gcm`) under the server's secret key
//! (`APIGATE_SECRET_KEY`, base64 of 32 bytes, or `--secret-key-file`). A previous key
//! (`APIGATE_SECRET_KEY_PREVIOUS` or `--previous-secret-key-file`) is accepted for decryption
//! while keys are rotated; sealing always uses the current key.
//!
//! A sealed value is `version (1) ‖ key id (4) ‖ nonce (12) ‖ ciphertext+tag`. The key id is the
//! start of SHA-256 over the key (so the right key is picked without trial decryption, and an
//! unknown one is named as such); the nonce is random per value. The caller's `context` (e.g.
//! the session id) is authenticated as associated data: a value copied into another row does
//! not open. Pure functions over bytes; no I/O but reading the key file.

use std::path::Path;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine as _;
use rand::RngCore;
use sha2::{Digest, Sha256};
use zeroize::{Zeroize, Zeroizing};

/// The environment variable holding the current key.
pub(crate) const SECRET_KEY_ENV: &str = "APIGATE_SECRET_KEY";
/// The environment variable holding the previous key (decryption only).
pub(crate) const PREVIOUS_SECRET_KEY_ENV: &str = "APIGATE_SECRET_KEY_PREVIOUS";

const VERSION: u8 = 1;
const KEY_ID_LEN: usize = 4;
const NONCE_LEN: usize = 12;
const HEADER_LEN: usize = 1 + KEY_ID_LEN + NONCE_LEN;
const TAG_LEN: usize = 16;
/// The most plaintext one sealed value may hold.
pub(crate) const MAX_PLAINTEXT: usize = 64 * 1024;

/// What to tell an operator who has no key configured.
pub(crate) const HOW_TO_SET_A_KEY: &str = "set APIGATE_SECRET_KEY to 32 random bytes in base64 (e.g. \
    `openssl rand -base64 32`) or pass --secret-key-file FILE (a file holding that base64 \
    text), on `apigate serve` and on `apigate sessions create`";

/// Why a key could not be loaded or a value could not be opened. Never holds key material or
/// plaintext.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("{what} is not a usable secret key: {why}; {HOW_TO_SET_A_KEY}")]
    BadKey { what: String, why: &'static str },
    #[error("cannot read the secret key file {path}: {cause}")]
    KeyFile { path: String, cause: String },
    #[error(
        "the value was sealed with a key that is not configured (key id {key_id}); configure it \
         as APIGATE_SECRET_KEY or, while rotating, APIGATE_SECRET_KEY_PREVIOUS"
    )]
    UnknownKey { key_id: String },
    #[error("the sealed value does not open: it was altered, or belongs to another record")]
    Tampered,
    #[error("the sealed value is malformed")]
    Malformed,
    #[error("the value is too large to seal (at most {MAX_PLAINTEXT} bytes)")]
    TooLarge,
}

/// One AES-256 key and its id.
struct SecretKey {
    id: [u8; KEY_ID_LEN],
    cipher: Aes256Gcm,
}

impl SecretKey {
    fn from_bytes(bytes: &[u8], what: &str) -> Result<SecretKey, SealError> {
        if bytes.len() != 32 {
            return Err(SealError::BadKey {
                what: what.to_string(),
                why: "it must decode to exactly 32 bytes",
            });
        }
        let digest = Sha256::digest(bytes);
        let mut id = [0u8; KEY_ID_LEN];
        id.copy_from_slice(&digest[..KEY_ID_LEN]);
        let cipher = Aes256Gcm::new_from_slice(bytes).map_err(|_| SealError::BadKey {
            what: what.to_string(),
            why: "it must decode to exactly 32 bytes",
        })?;
        Ok(SecretKey { id, cipher })
    }

    /// Base64 text (standard or URL-safe alphabet, padding optional) → key.
    fn from_base64(text: &str, what: &str) -> Result<SecretKey, SealError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(SealError::BadKey {
                what: what.to_string(),
                why: "it is empty",
            });
        }
        use base64::engine::general_purpose::{
            STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD,
        };
        let decoded = [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
            .iter()
            .find_map(|e| e.decode(text).ok())
            .map(Zeroizing::new)
            .ok_or_else(|| SealError::BadKey {
                what: what.to_string(),
                why: "it is not base64",
            })?;
        SecretKey::from_bytes(&decoded, what)
    }
}

/// The configured keys: the current one seals and opens, the previous one only opens.
pub struct SecretKeys {
    current: SecretKey,
    previous: Option<SecretKey>,
}

crate::debug_fields!(|k: SecretKeys| {
    current: hex::encode(k.current.id),
    previous: k.previous.as_ref().map(|k| hex::encode(k.id)),
});

/// Where the keys come from: files win over the environment.
#[derive(Debug, Clone, Default)]
pub struct KeySource<'a> {
    pub file: Option<&'a Path>,
    pub previous_file: Option<&'a Path>,
    /// The value of `APIGATE_SECRET_KEY`, if set.
    pub env: Option<String>,
    /// The value of `APIGATE_SECRET_KEY_PREVIOUS`, if set.
    pub previous_env: Option<String>,
}

impl KeySource<'_> {
    /// The environment's keys (`APIGATE_SECRET_KEY`, `APIGATE_SECRET_KEY_PREVIOUS`).
    pub(crate) fn with_env(self) -> Self {
        let var = |n: &str| std::env::var(n).ok().filter(|v| !v.trim().is_empty());
        KeySource {
            env: var(SECRET_KEY_ENV),
            previous_env: var(PREVIOUS_SECRET_KEY_ENV),
            ..self
        }
    }
}

fn read_key_file(path: &Path) -> Result<SecretKey, SealError> {
    let text = std::fs::read_to_string(path)
        .map(Zeroizing::new)
        .map_err(|e| SealError::KeyFile {
            path: path.display().to_string(),
            cause: e.to_string(),
        })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(path = %path.display(),
                "the secret key file is readable by other users; chmod 600 it");
        }
    }
    SecretKey::from_base64(&text, &format!("the key in {}", path.display()))
}

impl SecretKeys {
    /// The keys `source` names; `Ok(None)` when no current key is configured. A previous key
    /// without a current one is an error (it would silently make sealing impossible).
    pub fn load(source: &KeySource<'_>) -> Result<Option<SecretKeys>, SealError> {
        let current = match (source.file, source.env.as_deref()) {
            (Some(path), _) => Some(read_key_file(path)?),
            (None, Some(text)) => Some(SecretKey::from_base64(text, SECRET_KEY_ENV)?),
            (None, None) => None,
        };
        let previous = match (source.previous_file, source.previous_env.as_deref()) {
            (Some(path), _) => Some(read_key_file(path)?),
            (None, Some(text)) => Some(SecretKey::from_base64(text, PREVIOUS_SECRET_KEY_ENV)?),
            (None, None) => None,
        };
        match (current, previous) {
            (Some(current), previous) => Ok(Some(SecretKeys { current, previous })),
            (None, None) => Ok(None),
            (None, Some(_)) => Err(SealError::BadKey {
                what: "the previous secret key".into(),
                why: "it is set without a current key",
            }),
        }
    }

    /// Keys from raw bytes (tests, benches).
    pub fn from_bytes(current: &[u8], previous: Option<&[u8]>) -> Result<SecretKeys, SealError> {
        Ok(SecretKeys {
            current: SecretKey::from_bytes(current, "the key")?,
            previous: previous
                .map(|p| SecretKey::from_bytes(p, "the previous key"))
                .transpose()?,
        })
    }

    /// The current key's id (hex), for logs.
    pub(crate) fn current_id(&self) -> String {
        hex::encode(self.current.id)
    }

    /// Encrypts `plaintext` under the current key, binding `context`.
    pub fn seal(&self, plaintext: &[u8], context: &[u8]) -> Result<Vec<u8>, SealError> {
        if plaintext.len() > MAX_PLAINTEXT {
            return Err(SealError::TooLarge);
        }
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let ciphertext = self
            .current
            .cipher
            .encrypt(
                &Nonce::from(nonce),
                Payload {
                    msg: plaintext,
                    aad: context,
                },
            )
            .map_err(|_| SealError::TooLarge)?;
        let mut out = Vec::with_capacity(HEADER_LEN + ciphertext.len());
        out.push(VERSION);
        out.extend_from_slice(&self.current.id);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ciphertext);
        Ok(out)
    }

    /// Decrypts a value [`SecretKeys::seal`] made with the current or the previous key and the
    /// same `context`. The plaintext is wiped when dropped.
    pub fn open(&self, sealed: &[u8], context: &[u8]) -> Result<Zeroizing<Vec<u8>>, SealError> {
        if sealed.len() < HEADER_LEN + TAG_LEN || sealed[0] != VERSION {
            return Err(SealError::Malformed);
        }
        let key_id = &sealed[1..1 + KEY_ID_LEN];
        let key = std::iter::once(&self.current)
            .chain(self.previous.as_ref())
            .find(|k| k.id == key_id)
            .ok_or_else(|| SealError::UnknownKey {
                key_id: hex::encode(key_id),
            })?;
        let nonce: [u8; NONCE_LEN] = sealed[1 + KEY_ID_LEN..HEADER_LEN]
            .try_into()
            .map_err(|_| SealError::Malformed)?;
        key.cipher
            .decrypt(
                &Nonce::from(nonce),
                Payload {
                    msg: &sealed[HEADER_LEN..],
                    aad: context,
                },
            )
            .map(Zeroizing::new)
            .map_err(|_| SealError::Tampered)
    }
}

/// Generates a new key as base64 text (32 random bytes).
pub fn generate_key_base64() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let text = base64::engine::general_purpose::STANDARD.encode(bytes);
    bytes.zeroize();
    text
}

/// Whether `sealed` was made with the previous key (and should be sealed again): what the
/// rotation tests check.
#[cfg(test)]
impl SecretKeys {
    fn is_sealed_with_previous(&self, sealed: &[u8]) -> bool {
        sealed.len() > KEY_ID_LEN
            && self
                .previous
                .as_ref()
                .is_some_and(|p| p.id == sealed[1..1 + KEY_ID_LEN])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 32] = [7u8; 32];
    const B: [u8; 32] = [9u8; 32];

    #[test]
    fn round_trip() {
        let keys = SecretKeys::from_bytes(&A, None).unwrap();
        let sealed = keys.seal(b"Bearer s3cret", b"session:1").unwrap();
        assert!(!sealed.windows(6).any(|w| w == b"s3cret"));
        assert_eq!(
            &**keys.open(&sealed, b"session:1").unwrap(),
            b"Bearer s3cret"
        );
        // A fresh nonce each time.
        assert_ne!(sealed, keys.seal(b"Bearer s3cret", b"session:1").unwrap());
    }

    #[test]
    fn wrong_key_is_named_not_guessed() {
        let sealed = SecretKeys::from_bytes(&A, None)
            .unwrap()
            .seal(b"x", b"c")
            .unwrap();
        let other = SecretKeys::from_bytes(&B, None).unwrap();
        assert!(matches!(
            other.open(&sealed, b"c"),
            Err(SealError::UnknownKey { .. })
        ));
    }

    #[test]
    fn tampering_and_other_contexts_do_not_open() {
        let keys = SecretKeys::from_bytes(&A, None).unwrap();
        let sealed = keys.seal(b"value", b"session:1").unwrap();
        for i in HEADER_LEN..sealed.len() {
            let mut t = sealed.clone();
            t[i] ^= 1;
            assert_eq!(keys.open(&t, b"session:1"), Err(SealError::Tampered), "{i}");
        }
        let mut nonce_flipped = sealed.clone();
        nonce_flipped[HEADER_LEN - 1] ^= 1;
        assert_eq!(
            keys.open(&nonce_flipped, b"session:1"),
            Err(SealError::Tampered)
        );
        assert_eq!(keys.open(&sealed, b"session:2"), Err(SealError::Tampered));
        assert_eq!(
            keys.open(&sealed[..10], b"session:1"),
            Err(SealError::Malformed)
        );
        let mut v = sealed.clone();
        v[0] = 2;
        assert_eq!(keys.open(&v, b"session:1"), Err(SealError::Malformed));
    }

    #[test]
    fn rotation_opens_old_values_and_seals_with_the_new_key() {
        let old = SecretKeys::from_bytes(&A, None).unwrap();
        let sealed_old = old.seal(b"old", b"c").unwrap();
        let rotated = SecretKeys::from_bytes(&B, Some(&A)).unwrap();
        assert_eq!(&**rotated.open(&sealed_old, b"c").unwrap(), b"old");
        assert!(rotated.is_sealed_with_previous(&sealed_old));
        let sealed_new = rotated.seal(b"new", b"c").unwrap();
        assert!(!rotated.is_sealed_with_previous(&sealed_new));
        // After the rotation ends (previous key dropped) new values still open, old do not.
        let after = SecretKeys::from_bytes(&B, None).unwrap();
        assert_eq!(&**after.open(&sealed_new, b"c").unwrap(), b"new");
        assert!(matches!(
            after.open(&sealed_old, b"c"),
            Err(SealError::UnknownKey { .. })
        ));
    }

    #[test]
    fn keys_load_from_base64_text_and_files() {
        let text = generate_key_base64();
        let keys = SecretKeys::load(&KeySource {
            env: Some(text.clone()),
            ..KeySource::default()
        })
        .unwrap()
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, format!("{text}\n")).unwrap();
        let from_file = SecretKeys::load(&KeySource {
            file: Some(&path),
            ..KeySource::default()
        })
        .unwrap()
        .unwrap();
        assert_eq!(keys.current_id(), from_file.current_id());
        assert!(SecretKeys::load(&KeySource::default()).unwrap().is_none());
        for bad in ["", "not base64!", "c2hvcnQ="] {
            let e = SecretKeys::load(&KeySource {
                env: Some(bad.into()),
                ..KeySource::default()
            });
            assert!(e.is_err(), "{bad:?}");
            if let Err(e) = e {
                assert!(e.to_string().contains("openssl rand -base64 32"), "{e}");
            }
        }
        let only_previous = SecretKeys::load(&KeySource {
            previous_env: Some(text.clone()),
            ..KeySource::default()
        });
        assert!(only_previous.is_err());
        assert!(!format!("{keys:?}").contains(&text));
    }

    #[test]
    fn oversized_plaintext_is_refused() {
        let keys = SecretKeys::from_bytes(&A, None).unwrap();
        assert_eq!(
            keys.seal(&vec![0u8; MAX_PLAINTEXT + 1], b""),
            Err(SealError::TooLarge)
        );
    }
}
