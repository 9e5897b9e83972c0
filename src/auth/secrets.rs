//! The credential formats: server keys `agk_<8-char public id>_<secret>` (argon2id with the
//! OWASP parameters, which are argon2's defaults: 19 MiB, 2 passes, 1 lane) and session tokens
//! `sess_<32 hex>` (stored as a SHA-256 digest). Pure functions; no I/O.

use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use argon2::{Algorithm, Argon2, Params, Version};
use rand::Rng;
use sha2::{Digest, Sha256};

pub(crate) const KEY_PREFIX: &str = "agk_";
pub(crate) const SESSION_PREFIX: &str = "sess_";
const PUBLIC_ID_LEN: usize = 8;
const SECRET_LEN: usize = 40;
const MIN_SECRET_LEN: usize = 32;
const LOWER_ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

fn random_string(alphabet: &[u8], len: usize) -> String {
    let mut rng = rand::rng();
    (0..len)
        .map(|_| char::from(alphabet[rng.random_range(0..alphabet.len())]))
        .collect()
}

/// A freshly generated server key: the full text (shown once) and its parts.
pub(crate) struct GeneratedKey {
    pub full: String,
    pub public_id: String,
    pub secret: String,
}

pub(crate) fn generate_key() -> GeneratedKey {
    let public_id = random_string(LOWER_ALNUM, PUBLIC_ID_LEN);
    let secret = random_string(ALNUM, SECRET_LEN);
    GeneratedKey {
        full: format!("{KEY_PREFIX}{public_id}_{secret}"),
        public_id,
        secret,
    }
}

/// Whether the text has the shape of a key's public id.
pub(crate) fn is_public_id(text: &str) -> bool {
    text.len() == PUBLIC_ID_LEN && text.bytes().all(|b| LOWER_ALNUM.contains(&b))
}

/// Splits `agk_<public id>_<secret>`; `None` when the text cannot be a server key.
pub(crate) fn parse_key(presented: &str) -> Option<(&str, &str)> {
    let rest = presented.strip_prefix(KEY_PREFIX)?;
    let (public_id, secret) = rest.split_once('_')?;
    let ok = is_public_id(public_id)
        && secret.len() >= MIN_SECRET_LEN
        && secret.len() <= 256
        && secret.bytes().all(|b| b.is_ascii_alphanumeric());
    ok.then_some((public_id, secret))
}

fn argon2() -> Argon2<'static> {
    Argon2::new(Algorithm::Argon2id, Version::V0x13, Params::default())
}

/// The argon2id PHC string for a secret. CPU-heavy: call from a blocking thread.
pub(crate) fn hash_secret(secret: &str) -> Result<String, String> {
    argon2()
        .hash_password(secret.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

/// Whether `secret` matches the PHC string (the parameters come from the string).
/// CPU-heavy: call from a blocking thread.
pub(crate) fn verify_secret(secret: &str, phc: &str) -> bool {
    argon2().verify_password(secret.as_bytes(), phc).is_ok()
}

pub(crate) fn generate_session_token() -> String {
    let bytes: [u8; 16] = rand::rng().random();
    format!("{SESSION_PREFIX}{}", hex::encode(bytes))
}

/// Whether the text has the shape `sess_<32 lowercase hex>`.
pub(crate) fn is_session_token(token: &str) -> bool {
    token.strip_prefix(SESSION_PREFIX).is_some_and(|h| {
        h.len() == 32
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

pub(crate) fn sha256(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets_equal;

    #[test]
    fn generated_keys_parse_back() {
        let k = generate_key();
        assert_eq!(
            parse_key(&k.full),
            Some((k.public_id.as_str(), k.secret.as_str()))
        );
        assert!(k.full.starts_with("agk_"));
    }

    #[test]
    fn malformed_keys_are_rejected() {
        for bad in [
            "",
            "agk_",
            "agk_abcdefgh",
            "agk_abcdefgh_short",
            "agk_ABCDEFGH_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "xyz_abcdefgh_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "agk_abcdefgh_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-",
        ] {
            assert_eq!(parse_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn hash_verifies_only_the_right_secret() {
        let h = hash_secret("correct horse battery staple").unwrap();
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{h}");
        assert!(verify_secret("correct horse battery staple", &h));
        assert!(!verify_secret("correct horse battery stapl", &h));
        assert!(!verify_secret("x", "not a phc string"));
    }

    #[test]
    fn session_tokens_have_the_documented_shape() {
        let t = generate_session_token();
        assert!(is_session_token(&t), "{t}");
        assert_eq!(t.len(), 5 + 32);
        assert!(!is_session_token("sess_XYZ"));
        assert!(!is_session_token("sess_0123456789abcdef0123456789abcdeg"));
    }

    #[test]
    fn secrets_compare() {
        assert!(secrets_equal("abc", "abc"));
        assert!(!secrets_equal("abc", "abcd"));
    }
}
