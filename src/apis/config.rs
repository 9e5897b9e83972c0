//! `apigate.toml`: one `[[api]]` table per API behind the server, read and checked before
//! anything is loaded. Every key is known (an unknown one is refused with its name), names are
//! `[a-z0-9_-]+` and unique, and secrets are references only (`env:VAR`, `file:PATH`), resolved
//! here: a value written inline in the file is refused, and so is a file holding credential
//! settings that its group or others may read. An `[oauth]` table holds `serve`'s sign-in
//! settings ([`SignInFile`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::auth::RuleSpec;
use crate::types::AuthMode;

/// The most bytes a config file may have.
const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// The most bytes a `file:` secret may have.
const MAX_SECRET_BYTES: u64 = 64 << 10;
/// The most APIs one server serves.
pub const MAX_APIS: usize = 64;

/// Why a config file was refused; each names the file, the API and the key at fault. Its
/// `Display` is the whole story, for the log and the operator's reload route;
/// [`ConfigFileError::public`] is what anyone may read on `/health`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("{path}: {reason}")]
    Read { path: String, reason: String },
    /// The text is not TOML of the file's shape: the parser's message quotes the line.
    #[error("{path}: {reason}")]
    Toml {
        path: String,
        reason: String,
        line: usize,
        column: usize,
    },
    /// The file's shape is wrong in apigate's own words (no API, too many).
    #[error("{path}: {reason}")]
    Syntax { path: String, reason: String },
    #[error("{path}: api {api:?}: {reason}")]
    Api {
        path: String,
        api: String,
        reason: String,
        /// The same without values, variable names or paths.
        public: String,
    },
    #[error(
        "{path} holds credential settings and its group or other users may read it \
         (mode {mode:o}); run `chmod 600 {path}`"
    )]
    Readable { path: String, mode: u32 },
}

impl ConfigFileError {
    /// What `/health` may show anyone: the file's name (no folder), the line and column of a
    /// TOML error, which API and setting, and what kind of problem; never the file's text
    /// (a broken line may hold a secret), an environment variable's name or a secret file's
    /// path. The log and `POST /admin/v1/reload` carry the whole message.
    pub fn public(&self) -> String {
        match self {
            ConfigFileError::Read { path, .. } => {
                format!("{}: the config file cannot be read", file_name(path))
            }
            ConfigFileError::Toml {
                path, line, column, ..
            } => format!(
                "{}, line {line}, column {column}: not valid TOML, or a key or value apigate \
                 does not take there",
                file_name(path)
            ),
            ConfigFileError::Syntax { path, reason } => {
                format!("{}: {reason}", file_name(path))
            }
            ConfigFileError::Api {
                path, api, public, ..
            } => format!("{}: api {api:?}: {public}", file_name(path)),
            ConfigFileError::Readable { path, mode } => format!(
                "{} holds credential settings and its group or other users may read it (mode \
                 {mode:o})",
                file_name(path)
            ),
        }
    }
}

/// The last component of `path`, as `/health` names a file.
fn file_name(path: &str) -> String {
    let name = Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    crate::printable::cell(&name, 100)
}

/// Why one `[[api]]` table was refused: the whole reason, and the same for anyone to read.
struct Refusal {
    reason: String,
    public: String,
}

impl Refusal {
    /// A reason in apigate's own words only, safe to show anyone.
    fn plain(reason: impl Into<String>) -> Refusal {
        let reason = reason.into();
        Refusal {
            public: reason.clone(),
            reason,
        }
    }
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    #[serde(default)]
    api: Vec<ApiConfig>,
    /// `serve`'s sign-in settings ([`ConfigFile::sign_in`]), read at start-up only.
    #[serde(default)]
    oauth: Option<SignInFile>,
}

/// `[oauth]`: the `--oauth-*` flags of `serve` (people sign in with their identity provider's
/// tokens), with the scope table as `[oauth.scopes]` (`"apigate:read" = ["apigate.discover",
/// "apigate.schema"]`). A flag given on the command line wins over the file. Nothing here is a
/// secret.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SignInFile {
    #[serde(default)]
    pub issuers: Vec<String>,
    pub audience: Option<String>,
    pub jwks_url: Option<String>,
    pub tenant_claim: Option<String>,
    pub organization_claim: Option<String>,
    pub roles_claim: Option<String>,
    /// `keys`, `oauth` or `both`.
    pub auth: Option<AuthMode>,
    /// RFC 7662 introspection of opaque tokens (the secret: APIGATE_OAUTH_INTROSPECTION_SECRET).
    pub introspection_url: Option<String>,
    pub introspection_client_id: Option<String>,
    #[serde(default)]
    pub scopes: BTreeMap<String, Vec<String>>,
}

/// What one config file says: the APIs to serve, and who may sign in (`[oauth]`, which
/// `serve` reads at start-up only: a reload does not change it).
#[derive(Debug)]
pub struct ConfigFile {
    pub apis: Vec<ApiConfig>,
    pub sign_in: Option<SignInFile>,
}

impl ConfigFile {
    /// Reads and checks `path`, resolving every secret reference. A file holding credential
    /// settings is refused when others may read it.
    pub fn read(path: &Path) -> Result<ConfigFile, ConfigFileError> {
        let shown = path.display().to_string();
        let (text, meta) = read_config(path)?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut file = parse_file(&text, &shown)?;
        let sign_in = file.oauth.take();
        let apis = checked(file, &shown, &dir)?;
        let has_credentials = apis.iter().any(|a| {
            !a.upstream_headers.is_empty()
                || !a.upstream_credentials.is_empty()
                || a.oauth.is_some()
        });
        if has_credentials && let Some(mode) = readable_by_others(&meta) {
            return Err(ConfigFileError::Readable { path: shown, mode });
        }
        Ok(ConfigFile { apis, sign_in })
    }
}

/// The APIs of the config file at `path` ([`ConfigFile::read`]).
pub fn load(path: &Path) -> Result<Vec<ApiConfig>, ConfigFileError> {
    ConfigFile::read(path).map(|c| c.apis)
}

/// The `[oauth]` table of the config file at `path`, if it has one ([`ConfigFile::read`]).
pub fn sign_in(path: &Path) -> Result<Option<SignInFile>, ConfigFileError> {
    ConfigFile::read(path).map(|c| c.sign_in)
}

/// The config file's text and metadata, at most [`MAX_CONFIG_BYTES`].
fn read_config(path: &Path) -> Result<(String, std::fs::Metadata), ConfigFileError> {
    read_small(path, MAX_CONFIG_BYTES).map_err(|reason| ConfigFileError::Read {
        path: path.display().to_string(),
        reason,
    })
}

/// The text as TOML of the file's shape (every key known); `path` for the message.
fn parse_file(text: &str, path: &str) -> Result<Written, ConfigFileError> {
    toml::from_str(text).map_err(|e: toml::de::Error| {
        let at = e.span().map_or(0, |s| s.start.min(text.len()));
        let before = text.get(..at).unwrap_or_default();
        let line = before.matches('\n').count() + 1;
        let column = before
            .rsplit('\n')
            .next()
            .unwrap_or_default()
            .chars()
            .count()
            + 1;
        ConfigFileError::Toml {
            path: path.to_string(),
            reason: e.to_string(),
            line,
            column,
        }
    })
}

/// One API: an `[[api]]` table, which takes the flags of `dev`, `serve` and `stdio` that are
/// about one API under the same names; or those flags themselves. Read from a file, its secret
/// references are resolved by [`parse`].
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ApiConfig {
    #[serde(default)]
    pub name: String,
    /// A file path (relative to the config file's folder, made absolute) or a URL.
    pub spec: String,
    pub upstream: Option<String>,
    /// `Name: value` lines, as `--upstream-header` takes them; in the file, a table of header
    /// name → secret reference. Secret.
    #[serde(default, deserialize_with = "header_lines")]
    pub upstream_headers: Vec<String>,
    /// `SCHEME=value`, as `--upstream-credential` takes them; in the file, a table of scheme
    /// → secret reference. Secret.
    #[serde(default, deserialize_with = "credential_lines")]
    pub upstream_credentials: Vec<String>,
    pub oauth: Option<ClientCredentialsFile>,
    #[serde(default, deserialize_with = "duration")]
    pub upstream_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    pub connect_timeout: Option<Duration>,
    pub max_response_bytes: Option<usize>,
    pub max_read_bytes: Option<usize>,
    /// How often a URL spec is fetched again (`If-None-Match`).
    #[serde(default, deserialize_with = "duration")]
    pub poll: Option<Duration>,
    /// Origins (`https://host[:port]`) beyond the spec's own that a URL spec's `$ref`s may
    /// fetch documents from; loopback and private addresses only when the spec itself came
    /// from one.
    #[serde(default, deserialize_with = "origins")]
    pub ref_origins: Vec<url::Origin>,
    /// Per-operation feature rules, as in `--permissions FILE`.
    #[serde(default, rename = "rule")]
    pub rules: Vec<RuleSpec>,
}

crate::debug_fields!(ApiConfig {
    name,
    spec,
    upstream_timeout,
    poll,
    ..
});

/// OAuth client credentials for one API's upstream.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ClientCredentialsFile {
    pub token_url: String,
    pub client_id: String,
    /// Secret (in the file, a reference).
    pub client_secret: String,
    pub scope: Option<String>,
    pub audience: Option<String>,
}

/// A table of header name → value as `Name: value` lines.
fn header_lines<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    lines(d, ": ")
}

/// A table of scheme → value as `SCHEME=value` lines.
fn credential_lines<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    lines(d, "=")
}

fn lines<'de, D: serde::Deserializer<'de>>(d: D, sep: &str) -> Result<Vec<String>, D::Error> {
    let table = BTreeMap::<String, String>::deserialize(d)?;
    Ok(table
        .into_iter()
        .map(|(name, value)| format!("{name}{sep}{value}"))
        .collect())
}

/// A list of origins (`ref-origins`), each `scheme://host[:port]`.
fn origins<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<url::Origin>, D::Error> {
    Vec::<String>::deserialize(d)?
        .iter()
        .map(|o| crate::spec::parse_origin(o).map_err(serde::de::Error::custom))
        .collect()
}

/// A duration as the flags write it (`30s`, `2m`, `500ms`).
fn duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    crate::types::duration::parse_duration(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// Whether `name` may name an API: `[a-z0-9_-]+`, at most 64 characters.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// A file of at most `max` bytes, as text, and what its metadata says (its mode); why not.
fn read_small(path: &Path, max: u64) -> Result<(String, std::fs::Metadata), String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.len() > max {
        return Err(format!("{} bytes, over the {max}-byte limit", meta.len()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    Ok((text, meta))
}

/// The file's mode when its group or others may read it.
fn readable_by_others(meta: &std::fs::Metadata) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        (mode & 0o044 != 0).then_some(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

/// Checks the text of a config file; `dir` is where relative paths start.
pub fn parse(text: &str, path: &str, dir: &Path) -> Result<Vec<ApiConfig>, ConfigFileError> {
    checked(parse_file(text, path)?, path, dir)
}

/// The file's `[[api]]` tables checked, their secret references resolved.
fn checked(file: Written, path: &str, dir: &Path) -> Result<Vec<ApiConfig>, ConfigFileError> {
    if file.api.is_empty() {
        return Err(ConfigFileError::Syntax {
            path: path.to_string(),
            reason: "no [[api]] table: name at least one API".into(),
        });
    }
    if file.api.len() > MAX_APIS {
        return Err(ConfigFileError::Syntax {
            path: path.to_string(),
            reason: format!(
                "{} APIs; one server serves at most {MAX_APIS}",
                file.api.len()
            ),
        });
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(file.api.len());
    for table in file.api {
        let shown = crate::printable::cell(&table.name, 64);
        let fail = |refusal: Refusal| ConfigFileError::Api {
            path: path.to_string(),
            api: shown.clone(),
            reason: refusal.reason,
            public: refusal.public,
        };
        if !valid_name(&table.name) {
            return Err(fail(Refusal::plain(
                "a name is 1 to 64 of a-z, 0-9, '_' and '-' (it prefixes operation ids as \
                 NAME:operationId, so it holds no ':')",
            )));
        }
        if !seen.insert(table.name.clone()) {
            return Err(fail(Refusal::plain("two [[api]] tables have this name")));
        }
        out.push(resolve(table, dir).map_err(fail)?);
    }
    Ok(out)
}

/// One table's values checked and its secret references replaced by their values.
fn resolve(mut t: ApiConfig, dir: &Path) -> Result<ApiConfig, Refusal> {
    if let Some(u) = &t.upstream
        && let Ok(url) = url::Url::parse(u)
        && (!url.username().is_empty() || url.password().is_some())
    {
        return Err(Refusal::plain(
            "upstream: user info in the URL is a secret written inline; put it in \
             upstream-headers as Authorization = \"env:VAR\"",
        ));
    }
    // A reference that does not resolve names a variable or a path: for the operator only.
    let unresolved = |setting: String, reference: &str, e: String| {
        let public = if reference.starts_with("env:") {
            "the environment variable its env: reference names is not set; the server's log \
             says which"
                .to_string()
        } else if reference.starts_with("file:") {
            "the file its file: reference names cannot be read, or others may read it; the \
             server's log says which"
                .to_string()
        } else {
            e.clone()
        };
        Refusal {
            reason: format!("{setting}: {e}"),
            public: format!("{setting}: {public}"),
        }
    };
    for (key, list, sep) in [
        ("upstream-headers", &mut t.upstream_headers, ": "),
        ("upstream-credentials", &mut t.upstream_credentials, "="),
    ] {
        for line in list.iter_mut() {
            let Some((name, reference)) = line.split_once(sep) else {
                continue;
            };
            let value = secret(reference, dir)
                .map_err(|e| unresolved(format!("{key}.{name}"), reference, e))?;
            *line = format!("{name}{sep}{value}");
        }
    }
    if let Some(o) = &mut t.oauth {
        o.client_secret = secret(&o.client_secret, dir)
            .map_err(|e| unresolved("oauth.client-secret".into(), &o.client_secret, e))?;
    }
    if !(t.spec.starts_with("http://") || t.spec.starts_with("https://")) {
        t.spec = dir.join(&t.spec).display().to_string();
    }
    if t.poll.is_some_and(|p| p < Duration::from_secs(1)) {
        return Err(Refusal::plain("poll: at least 1s"));
    }
    Ok(t)
}

/// The value a secret reference names: `env:VAR` or `file:PATH` (relative to `dir`, trailing
/// newline dropped). Anything else is a secret written inline, refused.
fn secret(reference: &str, dir: &Path) -> Result<String, String> {
    if let Some(var) = reference.strip_prefix("env:") {
        return std::env::var(var)
            .map_err(|_| format!("the environment variable {var} is not set (or not UTF-8)"));
    }
    if let Some(file) = reference.strip_prefix("file:") {
        let path: PathBuf = dir.join(file);
        let shown = path.display();
        let (text, meta) =
            read_small(&path, MAX_SECRET_BYTES).map_err(|e| format!("{shown}: {e}"))?;
        if let Some(mode) = readable_by_others(&meta) {
            return Err(format!(
                "{shown}: its group or other users may read it (mode {mode:o}); run `chmod 600 {shown}`"
            ));
        }
        return Ok(text.trim_end_matches(['\r', '\n']).to_string());
    }
    Err(format!(
        "a secret is written as a reference, env:VAR or file:PATH, never inline (this value \
         has {} characters)",
        reference.chars().count()
    ))
}

#[cfg(test)]
mod tests;
