//! What `api_execute` makes of a binary response ([`BinaryBody`]): a PNG, JPEG, GIF or WebP
//! whose bytes really are that type (by magic number) and within `--max-image-bytes` becomes
//! MCP `image` content; anything else is held (`crate::held`) and comes back as a
//! `resource_link` the same API key can read with `resources/read`. In `apigate dev`,
//! `--download-dir` also writes the bytes to a new file with a generated name ([`DownloadDir`]:
//! apigate's files there hold at most `--max-download-bytes` together, the oldest removed first,
//! and none outlives `--response-ttl`). The JSON result
//! always describes the body (`{contentType, bytes, sha256, …}`); the bytes themselves travel
//! beside it as a [`BinaryOut`], which the MCP adapter turns into a content item.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::held::HeldMeta;
use crate::held::HeldResponses;
use crate::upstream::BinaryBody;

/// Default largest image returned as `image` content (`--max-image-bytes`): 1 MiB.
pub(crate) const DEFAULT_MAX_IMAGE_BYTES: usize = 1024 * 1024;

/// How binary responses leave the server.
#[derive(Debug, Clone)]
pub struct BinaryOptions {
    /// Larger images are held and linked like any binary response.
    pub max_image_bytes: usize,
    /// `apigate dev --download-dir`: every binary response is also written here.
    pub download_dir: Option<Arc<DownloadDir>>,
}

impl Default for BinaryOptions {
    fn default() -> Self {
        BinaryOptions {
            max_image_bytes: DEFAULT_MAX_IMAGE_BYTES,
            download_dir: None,
        }
    }
}

/// The bytes of an `api_execute` result that do not travel in its JSON: what the MCP adapter
/// adds to the result's content (`mcp::binary_content`).
#[derive(Debug, Clone)]
pub(crate) enum BinaryOut {
    /// MCP `image` content: the bytes, of a type their magic number confirmed.
    Image {
        mime_type: String,
        data: bytes::Bytes,
    },
    /// MCP `resource_link` content to a held response.
    Resource(HeldMeta),
}

/// The image types sent as `image` content, by their magic number.
fn sniff_image(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// The image type to embed `body` as: its declared type, when that is one of the four and the
/// bytes begin as that type does, and it is within `max` bytes.
fn embeddable_image(body: &BinaryBody, max: usize) -> Option<&'static str> {
    let declared = match body.content_type.as_str() {
        "image/jpg" | "image/pjpeg" => "image/jpeg",
        t => t,
    };
    sniff_image(&body.bytes).filter(|t| *t == declared && body.bytes.len() <= max)
}

/// Delivers `body` for `owner` (the API key's id): fills in `shown` (the result's `body`,
/// already `{contentType, bytes, sha256}`) with how it comes back, and returns the bytes'
/// way out, if any. A response that cannot be held is described with the reason.
pub(super) async fn deliver(
    options: &BinaryOptions,
    held: &HeldResponses,
    owner: &str,
    body: &BinaryBody,
    shown: &mut Value,
) -> Option<BinaryOut> {
    let Value::Object(out) = shown else {
        return None;
    };
    if let Some(dir) = &options.download_dir {
        match dir.write(body).await {
            Ok(path) => {
                out.insert("file".into(), path.display().to_string().into());
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not write a download to --download-dir");
                out.insert(
                    "fileError".into(),
                    format!("not written to the download folder: {e}").into(),
                );
            }
        }
    }
    if let Some(mime_type) = embeddable_image(body, options.max_image_bytes) {
        out.insert("returnedAs".into(), "image".into());
        return Some(BinaryOut::Image {
            mime_type: mime_type.to_string(),
            data: body.bytes.clone(),
        });
    }
    match held.hold(owner, body).await {
        Ok(meta) => {
            out.insert("returnedAs".into(), "resource_link".into());
            out.insert("uri".into(), meta.uri().into());
            out.insert(
                "expiresAt".into(),
                meta.expires_at
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    .into(),
            );
            Some(BinaryOut::Resource(meta))
        }
        Err(e) => {
            tracing::warn!(error = %e, "a binary response was not held");
            out.insert(
                "note".into(),
                format!("binary content, not returned: {e}").into(),
            );
            None
        }
    }
}

/// Why `--download-dir` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DownloadDirError {
    #[error("--download-dir {0}: {1}")]
    Unusable(String, std::io::Error),
    #[error("--download-dir {0} is not a folder")]
    NotAFolder(String),
}

/// `--download-dir`, checked at start-up: an existing folder, as its canonical path (a
/// symbolic link to it is followed once, here, not at each write).
pub fn download_dir(dir: &Path) -> Result<PathBuf, DownloadDirError> {
    let shown = dir.display().to_string();
    let canonical =
        std::fs::canonicalize(dir).map_err(|e| DownloadDirError::Unusable(shown.clone(), e))?;
    if !canonical.is_dir() {
        return Err(DownloadDirError::NotAFolder(shown));
    }
    Ok(canonical)
}

/// The default of `--max-download-bytes`: 1 GiB of apigate's files in the download folder.
pub const DEFAULT_MAX_DOWNLOAD_BYTES: u64 = 1 << 30;

/// The most files apigate keeps in the download folder (empty answers weigh nothing).
const MAX_DOWNLOAD_FILES: usize = 10_000;

/// Why a download was not written to the folder.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error(
        "{bytes} bytes is more than --max-download-bytes ({max}) lets the download folder hold; \
         raise it to keep answers this large as files"
    )]
    TooLarge { bytes: u64, max: u64 },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The download folder of `apigate dev --download-dir`: the files apigate writes there
/// (`apigate-<16 hex>.<ext>`; nothing else in the folder is counted or touched) hold at most
/// `max_bytes` together and [`MAX_DOWNLOAD_FILES`] in number, the oldest removed first to make
/// room, and each is removed once older than `ttl` (`--response-ttl`, as held responses).
#[derive(Debug)]
pub struct DownloadDir {
    path: PathBuf,
    max_bytes: u64,
    ttl: Duration,
    /// One write or sweep at a time, so that the room counted is the room there is.
    busy: tokio::sync::Mutex<()>,
}

impl DownloadDir {
    /// The folder at `path` (already checked by [`download_dir`]).
    pub fn new(path: PathBuf, max_bytes: u64, ttl: Duration) -> DownloadDir {
        DownloadDir {
            path,
            max_bytes,
            ttl,
            busy: tokio::sync::Mutex::new(()),
        }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `body` to a new file in the folder, after removing files past their time and,
    /// oldest first, as many as it takes to stay within the caps. A body larger than the
    /// whole cap is not written.
    async fn write(&self, body: &BinaryBody) -> Result<PathBuf, DownloadError> {
        let bytes = body.bytes.len() as u64;
        if bytes > self.max_bytes {
            return Err(DownloadError::TooLarge {
                bytes,
                max: self.max_bytes,
            });
        }
        let _one = self.busy.lock().await;
        let mut files = self.own_files().await?;
        files.sort_by_key(|f| f.modified);
        let mut total: u64 = files.iter().map(|f| f.bytes).sum();
        let mut count = files.len();
        for f in &files {
            if total + bytes <= self.max_bytes && count < MAX_DOWNLOAD_FILES {
                break;
            }
            remove(&f.path).await;
            total -= f.bytes;
            count -= 1;
        }
        Ok(write_download(&self.path, body).await?)
    }

    /// Removes apigate's files older than the time to live.
    pub async fn sweep(&self) {
        let _one = self.busy.lock().await;
        if let Err(e) = self.own_files().await {
            tracing::warn!(error = %e, "could not sweep --download-dir");
        }
    }

    /// Removes [`DownloadDir::sweep`]'s expired files every so often (a tenth of the time to
    /// live, between 1 s and 1 min), for as long as the process runs.
    pub fn sweep_in_background(self: &Arc<DownloadDir>) {
        let me = self.clone();
        let every = (self.ttl / 10).clamp(Duration::from_secs(1), Duration::from_secs(60));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                me.sweep().await;
            }
        });
    }

    /// apigate's files in the folder that are still within their time (the expired ones are
    /// removed on the way). Only regular files named as [`write_download`] names them.
    async fn own_files(&self) -> std::io::Result<Vec<OwnFile>> {
        let now = SystemTime::now();
        let mut out = Vec::new();
        let mut entries = tokio::fs::read_dir(&self.path).await?;
        while let Some(entry) = entries.next_entry().await? {
            if !is_own_name(&entry.file_name().to_string_lossy()) {
                continue;
            }
            // The entry itself, never what a link points at.
            let Ok(meta) = entry.metadata().await else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            let modified = meta.modified().unwrap_or(now);
            let path = entry.path();
            if now.duration_since(modified).unwrap_or_default() >= self.ttl {
                remove(&path).await;
                continue;
            }
            out.push(OwnFile {
                path,
                bytes: meta.len(),
                modified,
            });
        }
        Ok(out)
    }
}

/// One of apigate's files in the download folder.
struct OwnFile {
    path: PathBuf,
    bytes: u64,
    modified: SystemTime,
}

/// Removes a file of the download folder; a failure is logged (the next sweep tries again).
async fn remove(path: &Path) {
    if let Err(e) = tokio::fs::remove_file(path).await
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(error = %e, file = %path.display(), "could not remove a download");
    }
}

/// Whether `name` is one [`write_download`] gives: `apigate-`, 16 hex digits, `.`, a known
/// extension.
fn is_own_name(name: &str) -> bool {
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return false;
    };
    stem.strip_prefix("apigate-")
        .is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        && !ext.is_empty()
        && ext.bytes().all(|b| b.is_ascii_lowercase())
}

/// The most files tried for one download before giving up (a name is random: a clash is
/// all but impossible).
const NAME_ATTEMPTS: usize = 4;

/// Writes `body` to a new file in `dir` (never an existing one: created exclusively, mode
/// 0600), named `apigate-<random>.<extension of its type>`; nothing the upstream sent names it.
async fn write_download(dir: &Path, body: &BinaryBody) -> std::io::Result<PathBuf> {
    use tokio::io::AsyncWriteExt as _;
    let ext = extension(&body.content_type);
    let mut last = None;
    for _ in 0..NAME_ATTEMPTS {
        let name = format!("apigate-{}.{ext}", hex::encode(rand::random::<[u8; 8]>()));
        let path = dir.join(name);
        let mut options = tokio::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        options.mode(0o600);
        match options.open(&path).await {
            Ok(mut file) => {
                file.write_all(&body.bytes).await?;
                file.flush().await?;
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free file name")))
}

/// A file extension for a media type: the common ones by name, `bin` otherwise.
fn extension(content_type: &str) -> &'static str {
    match content_type {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "application/zip" | "application/x-zip-compressed" => "zip",
        "application/pdf" => "pdf",
        "application/gzip" | "application/x-gzip" => "gz",
        "application/x-tar" => "tar",
        _ => "bin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(ct: &str, bytes: &'static [u8]) -> BinaryBody {
        BinaryBody {
            content_type: ct.into(),
            bytes: bytes::Bytes::from_static(bytes),
            sha256: String::new(),
        }
    }

    #[test]
    fn only_apigates_own_names_are_counted() {
        assert!(is_own_name("apigate-0123456789abcdef.zip"));
        assert!(is_own_name("apigate-0123456789abcdef.bin"));
        for other in [
            "notes.txt",
            "apigate-0123.zip",
            "apigate-0123456789abcdeg.zip",
            "apigate-0123456789abcdef",
            "apigate-0123456789abcdef.",
            "xapigate-0123456789abcdef.zip",
        ] {
            assert!(!is_own_name(other), "{other}");
        }
    }

    #[test]
    fn images_only_when_the_bytes_agree_with_the_type() {
        let png: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        assert_eq!(
            embeddable_image(&body("image/png", png), 100),
            Some("image/png")
        );
        // Too large, or the header says another type.
        assert_eq!(embeddable_image(&body("image/png", png), 10), None);
        assert_eq!(embeddable_image(&body("image/jpeg", png), 100), None);
        assert_eq!(
            embeddable_image(&body("application/octet-stream", png), 100),
            None
        );
        // A type the magic number does not confirm.
        assert_eq!(
            embeddable_image(&body("image/png", b"\xff\xd8\xff\xe0"), 100),
            None
        );
        assert_eq!(
            embeddable_image(&body("image/jpg", b"\xff\xd8\xff\xe0"), 100),
            Some("image/jpeg")
        );
        assert_eq!(
            embeddable_image(&body("image/webp", b"RIFF\0\0\0\0WEBPVP8 "), 100),
            Some("image/webp")
        );
        assert_eq!(
            embeddable_image(&body("image/gif", b"GIF89a\x01\0"), 100),
            Some("image/gif")
        );
        assert_eq!(
            embeddable_image(&body("image/svg+xml", b"<svg/>"), 100),
            None
        );
    }
}
