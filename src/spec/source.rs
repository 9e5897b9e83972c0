//! Reading raw documents: from a file path or an `http(s)://` URL (size cap, timeout), parsed
//! as JSON or YAML into a `serde_json::Value`. Knows nothing about OpenAPI.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::SpecError;

/// Largest document apigate reads (file or URL).
pub(crate) const MAX_DOCUMENT_BYTES: u64 = 64 * 1024 * 1024;
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

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
fn shown_url(url: &url::Url) -> String {
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

/// Reads and parses a document, and the sha256 of the bytes read (hex).
pub async fn read(location: &Location) -> Result<(Value, String), SpecError> {
    match read_unless(location, None).await? {
        Some(Read { value, sha256, .. }) => Ok((value, sha256)),
        None => Err(SpecError::Read {
            file: location.display(),
            message: "the server answered 304 Not Modified to a plain GET".into(),
        }),
    }
}

/// A document read: its value, the sha256 of its bytes, and the `ETag` a URL answered with.
pub(crate) struct Read {
    pub value: Value,
    pub sha256: String,
    pub etag: Option<String>,
}

/// The longest `ETag` kept (a longer one is not sent back).
const MAX_ETAG_BYTES: usize = 256;

/// [`read`], for a URL asked with `If-None-Match: etag`: `None` when the server answered
/// 304 Not Modified (the document did not change, and was neither downloaded nor parsed).
pub(crate) async fn read_unless(
    location: &Location,
    etag: Option<&str>,
) -> Result<Option<Read>, SpecError> {
    let (bytes, etag) = match location {
        Location::File(path) => (read_file(path, location)?, None),
        Location::Url(url) => match fetch(url, etag).await? {
            Some(fetched) => fetched,
            None => return Ok(None),
        },
    };
    Ok(Some(Read {
        value: parse(&bytes, location)?,
        sha256: digest(&bytes),
        etag,
    }))
}

/// The sha256 of `bytes`, hex.
pub fn digest(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

fn read_file(path: &Path, location: &Location) -> Result<Vec<u8>, SpecError> {
    let err = |message: String| SpecError::Read {
        file: location.display(),
        message,
    };
    let meta = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
    if meta.len() > MAX_DOCUMENT_BYTES {
        return Err(err(format!(
            "{} bytes is over the {MAX_DOCUMENT_BYTES}-byte limit",
            meta.len()
        )));
    }
    std::fs::read(path).map_err(|e| err(e.to_string()))
}

/// GETs `url` (with `If-None-Match` when `etag` is known): the body and its `ETag`, or `None`
/// for 304 Not Modified.
async fn fetch(
    url: &url::Url,
    etag: Option<&str>,
) -> Result<Option<(Vec<u8>, Option<String>)>, SpecError> {
    let err = |message: String| SpecError::Read {
        file: shown_url(url),
        message,
    };
    let client = reqwest::Client::builder()
        .timeout(FETCH_TIMEOUT)
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| err(e.to_string()))?;
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
    if !response.status().is_success() {
        return Err(err(format!("server answered HTTP {}", response.status())));
    }
    let etag = response
        .headers()
        .get(reqwest::header::ETAG)
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.len() <= MAX_ETAG_BYTES)
        .map(str::to_string);
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| {
        err(format!(
            "reading the body: {}",
            crate::error_chain(&e.without_url())
        ))
    })? {
        body.extend_from_slice(&chunk);
        if body.len() as u64 > MAX_DOCUMENT_BYTES {
            return Err(err(format!(
                "body is over the {MAX_DOCUMENT_BYTES}-byte limit"
            )));
        }
    }
    Ok(Some((body, etag)))
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
