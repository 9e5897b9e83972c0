//! Reading raw documents: from a file path or an `http(s)://` URL, within one byte budget per
//! load (`--max-spec-bytes`, read streaming: never more than the budget in memory) and a
//! timeout, parsed as JSON or YAML into a `serde_json::Value`. Knows nothing about OpenAPI;
//! which URLs a `$ref` may name is `remote.rs`'s.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::SpecError;

/// How long one document may take to fetch; all the documents a spec's `$ref`s name share
/// one such span too (`refs::bundle_external`).
pub(crate) const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a document came from; relative `$ref`s resolve against it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Location {
    File(PathBuf),
    Url(url::Url),
}

impl Location {
    /// Parses a command-line source: `http(s)://…` is a URL, anything else a file path.
    pub fn parse(source: &str) -> Result<Location, SpecError> {
        if source.starts_with("http://") || source.starts_with("https://") {
            let url = url::Url::parse(source).map_err(|e| SpecError::Read {
                file: shown_source(source),
                message: format!("not a valid URL: {e}"),
            })?;
            Ok(Location::Url(url))
        } else {
            Ok(Location::File(PathBuf::from(source)))
        }
    }

    /// The location of `reference` (the part of a `$ref` before `#`) relative to this one.
    pub fn join(&self, reference: &str) -> Result<Location, SpecError> {
        match self {
            Location::Url(base) => {
                base.join(reference)
                    .map(Location::Url)
                    .map_err(|e| SpecError::Read {
                        file: shown_source(reference),
                        message: format!("cannot resolve against {}: {e}", shown_url(base)),
                    })
            }
            Location::File(path) => {
                if reference.starts_with("http://") || reference.starts_with("https://") {
                    return Location::parse(reference);
                }
                let dir = path.parent().unwrap_or(Path::new("."));
                Ok(Location::File(normalize_path(&dir.join(reference))))
            }
        }
    }

    /// The name used in messages and as [`crate::spec::Spec::source`]: the path, or the URL
    /// without user info, query or fragment (each may hold a credential).
    pub fn display(&self) -> String {
        match self {
            Location::File(p) => p.display().to_string(),
            Location::Url(u) => shown_url(u),
        }
    }

    fn looks_like_yaml(&self) -> bool {
        let name = match self {
            Location::File(p) => p.to_string_lossy().to_lowercase(),
            Location::Url(u) => u.path().to_lowercase(),
        };
        name.ends_with(".yaml") || name.ends_with(".yml")
    }
}

/// A URL as messages show it: no user info, no query, no fragment.
pub(crate) fn shown_url(url: &url::Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// A spec source (a [`Location::display`]) as an unauthenticated caller may see it
/// (`/health`): a URL without user info or query, or a file's name without its directory.
pub(crate) fn public_name(source: &str) -> String {
    match Location::parse(source) {
        Ok(Location::Url(u)) => shown_url(&u),
        _ => Path::new(source).file_name().map_or_else(
            || "(file)".to_string(),
            |n| n.to_string_lossy().into_owned(),
        ),
    }
}

/// Removes `.` and `..` segments without touching the file system.
fn normalize_path(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The default of `--max-spec-bytes`: 32 MiB for a spec and every document its `$ref`s name,
/// together. Parsed, a document of many small schemas takes some 30 times its size.
pub const DEFAULT_MAX_SPEC_BYTES: u64 = 32 << 20;

/// The bytes one load may still read, out of `max`: the spec and the documents its `$ref`s
/// name share one budget.
#[derive(Debug)]
pub(crate) struct Budget {
    left: u64,
    max: u64,
}

impl Budget {
    pub fn new(max: u64) -> Budget {
        Budget { left: max, max }
    }

    /// The message of a document refused for the budget.
    fn over(&self, what: &str) -> String {
        format!(
            "{what}: a spec and the documents its $refs name may have {} bytes ({} MiB) \
             together; raise --max-spec-bytes if this document is meant to be that large",
            self.max,
            self.max >> 20
        )
    }
}

/// The longest `ETag` kept (a longer one is not sent back).
const MAX_ETAG_BYTES: usize = 256;

/// A document's bytes as read, before parsing.
pub(crate) struct Raw {
    pub bytes: Vec<u8>,
    /// The `ETag` a URL answered with.
    pub etag: Option<String>,
    /// The address a URL's answer really came from (`remote::is_internal` judges it).
    pub from: Option<std::net::IpAddr>,
}

/// Where a `$ref`'s URL may be fetched from: the addresses its host resolved to, all checked.
/// The fetch connects only to them (no second lookup, no proxy, no redirect).
pub(crate) struct Pinned {
    pub host: Option<String>,
    pub addrs: Vec<std::net::SocketAddr>,
}

/// Reads a document's bytes within `budget` (with `If-None-Match: etag` for a URL when an
/// `etag` is known): `None` when the server answered 304 Not Modified (nothing downloaded).
/// With `pin`, a URL is fetched only from the pinned addresses.
pub(crate) async fn read_raw(
    location: &Location,
    etag: Option<&str>,
    budget: &mut Budget,
    pin: Option<&Pinned>,
) -> Result<Option<Raw>, SpecError> {
    match location {
        Location::File(path) => Ok(Some(Raw {
            bytes: read_file(path, location, budget)?,
            etag: None,
            from: None,
        })),
        Location::Url(url) => fetch(url, etag, budget, pin).await,
    }
}

/// Parses `bytes`, the document at `location` (logged at debug level: a reload that finds the
/// same bytes does not come here).
pub(crate) fn parse_read(bytes: &[u8], location: &Location) -> Result<Value, SpecError> {
    let value = parse(bytes, location)?;
    tracing::debug!(source = %location.display(), bytes = bytes.len(), "document parsed");
    Ok(value)
}

/// The sha256 of `bytes`, hex.
pub fn digest(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

/// Reads the file within `budget`: its size is checked on the open file, and at most one byte
/// more than the budget is ever read.
fn read_file(path: &Path, location: &Location, budget: &mut Budget) -> Result<Vec<u8>, SpecError> {
    use std::io::Read as _;
    let err = |message: String| SpecError::Read {
        file: location.display(),
        message,
    };
    let file = std::fs::File::open(path).map_err(|e| err(e.to_string()))?;
    let len = file.metadata().map_err(|e| err(e.to_string()))?.len();
    if len > budget.left {
        return Err(err(budget.over(&format!("{len} bytes"))));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(budget.left + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| err(e.to_string()))?;
    if bytes.len() as u64 > budget.left {
        return Err(err(
            budget.over("the file grew while it was read; it is over the limit")
        ));
    }
    budget.left -= bytes.len() as u64;
    Ok(bytes)
}

/// GETs `url` (with `If-None-Match` when `etag` is known) within `budget`, streaming: a
/// `Content-Length` over the budget is refused before the body is read, and the body stops at
/// the budget. `None` for 304 Not Modified.
async fn fetch(
    url: &url::Url,
    etag: Option<&str>,
    budget: &mut Budget,
    pin: Option<&Pinned>,
) -> Result<Option<Raw>, SpecError> {
    let err = |message: String| SpecError::Read {
        file: shown_url(url),
        message,
    };
    let mut builder = reqwest::Client::builder()
        .timeout(FETCH_TIMEOUT)
        .connect_timeout(Duration::from_secs(10));
    if let Some(pin) = pin {
        builder = builder
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none());
        if let Some(host) = &pin.host {
            builder = builder.resolve_to_addrs(host, &pin.addrs);
        }
    }
    let client = builder.build().map_err(|e| err(e.to_string()))?;
    let mut request = client.get(url.clone());
    if let Some(etag) = etag {
        request = request.header(reqwest::header::IF_NONE_MATCH, etag);
    }
    let mut response = request.send().await.map_err(|e| {
        err(format!(
            "request failed: {}",
            crate::error_chain(&e.without_url())
        ))
    })?;
    if etag.is_some() && response.status() == reqwest::StatusCode::NOT_MODIFIED {
        return Ok(None);
    }
    if pin.is_some() && response.status().is_redirection() {
        return Err(err(format!(
            "server answered HTTP {}: a $ref's redirect is not followed; name the document's \
             own URL",
            response.status()
        )));
    }
    if !response.status().is_success() {
        return Err(err(format!("server answered HTTP {}", response.status())));
    }
    let from = response.remote_addr().map(|a| a.ip());
    let etag = response
        .headers()
        .get(reqwest::header::ETAG)
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.len() <= MAX_ETAG_BYTES)
        .map(str::to_string);
    let announced = response.content_length();
    if let Some(len) = announced.filter(|len| *len > budget.left) {
        return Err(err(
            budget.over(&format!("the server announces {len} bytes"))
        ));
    }
    let mut body = Vec::with_capacity(announced.unwrap_or(0).min(budget.left) as usize);
    while let Some(chunk) = response.chunk().await.map_err(|e| {
        err(format!(
            "reading the body: {}",
            crate::error_chain(&e.without_url())
        ))
    })? {
        if (body.len() + chunk.len()) as u64 > budget.left {
            return Err(err(budget.over("the body is over the limit")));
        }
        body.extend_from_slice(&chunk);
    }
    budget.left -= body.len() as u64;
    Ok(Some(Raw {
        bytes: body,
        etag,
        from,
    }))
}

/// A source as typed, for a message: user info, query and fragment removed even when it does
/// not parse.
fn shown_source(source: &str) -> String {
    let source = source.split(['?', '#']).next().unwrap_or_default();
    match source.split_once("://") {
        Some((scheme, rest)) => {
            let end = rest.find('/').unwrap_or(rest.len());
            let rest = rest[..end].rfind('@').map_or(rest, |at| &rest[at + 1..]);
            format!("{scheme}://{rest}")
        }
        None => source.to_string(),
    }
}

/// Parses bytes as JSON (when they look like JSON) or YAML.
pub fn parse(bytes: &[u8], location: &Location) -> Result<Value, SpecError> {
    let file = location.display();
    let text = std::str::from_utf8(bytes).map_err(|e| SpecError::Parse {
        file: file.clone(),
        message: format!("not UTF-8 text: {e}"),
    })?;
    let trimmed = text.trim_start_matches('\u{feff}').trim();
    if trimmed.is_empty() {
        return Err(SpecError::Parse {
            file,
            message: "the document is empty".into(),
        });
    }
    let as_json = trimmed.starts_with('{') || trimmed.starts_with('[');
    if as_json && !location.looks_like_yaml() {
        serde_json::from_str(trimmed).map_err(|e| SpecError::Parse {
            file,
            message: format!(
                "invalid JSON at line {}, column {}: {e}",
                e.line(),
                e.column()
            ),
        })
    } else {
        yaml_serde::from_str::<Value>(trimmed).map_err(|e| SpecError::Parse {
            file,
            message: format!("invalid YAML: {e}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_relative_files() {
        let base = Location::File(PathBuf::from("specs/api/main.yaml"));
        let joined = base.join("../common/schemas.yaml").unwrap();
        assert_eq!(
            joined,
            Location::File(PathBuf::from("specs/common/schemas.yaml"))
        );
    }

    #[test]
    fn empty_and_broken_documents_are_errors() {
        let loc = Location::File(PathBuf::from("x.json"));
        let e = parse(b"  \n", &loc).unwrap_err().to_string();
        assert!(e.contains("x.json") && e.contains("empty"), "{e}");
        let e = parse(b"{\"openapi\": \"3.0.0\", \"paths\": {", &loc)
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid JSON at line 1"), "{e}");
        let loc = Location::File(PathBuf::from("x.yaml"));
        let e = parse(b"openapi: 3.0.0\npaths: [a\n  b: :", &loc)
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid YAML"), "{e}");
    }
}
