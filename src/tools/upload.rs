//! The bytes in `api_execute`'s `body`, typed at the tools edge. Which values the chosen
//! media type makes binary (the whole body of `application/octet-stream`, `image/png`, …;
//! the file fields of `multipart/form-data`), their `{"base64": …}` or `{"file": …}` values
//! decoded or read into [`Upload`]s within `--max-request-bytes`, refusals of bytes sent to a
//! text media type, and the operator's upload folder (`apigate dev --upload-dir`). The
//! request builder (`upstream::build`) only encodes what this module decided.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;

use super::error::ToolError;
use crate::spec::{MediaType, Operation, Spec, Violation};
use crate::upstream::choose_media;
use crate::upstream::upload::{
    BodyKind, FileField, Upload, Uploads, body_kind, check_filename, check_media_type, file_field,
    file_items, part_type,
};

/// The longest name `{"file": NAME}` may give, in bytes.
const MAX_FILE_NAME_BYTES: usize = 1024;

/// Standard base64 (`A–Z a–z 0–9 + /`), with or without `=` padding.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A binary value as the agent writes it: `{"base64": "…"}` or `{"file": "NAME"}`, and for a
/// multipart file part its `filename` and `contentType`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BinaryArg<'a> {
    #[serde(default, borrow)]
    base64: Option<&'a str>,
    #[serde(default, borrow)]
    file: Option<&'a str>,
    #[serde(default, borrow)]
    filename: Option<&'a str>,
    #[serde(default, borrow)]
    content_type: Option<&'a str>,
}

/// Whether `v` is written as a binary value: an object with `base64` or `file` and no keys
/// but those, `filename` and `contentType`.
fn is_binary_value(v: &Value) -> bool {
    let Value::Object(m) = v else { return false };
    (m.contains_key("base64") || m.contains_key("file"))
        && m.keys()
            .all(|k| matches!(k.as_str(), "base64" | "file" | "filename" | "contentType"))
}

/// The folder `{"file": NAME}` reads from (`apigate dev --upload-dir`), so large files need
/// not pass through the model. Names stay inside it, in one step: each file is opened beneath
/// the folder's descriptor with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, so no
/// component of the name (not only the last) may be a symbolic link or lead out, whatever is
/// renamed meanwhile. A file with more than one hard link is refused (it may be an outside
/// file linked in). Without `openat2` (Linux before 5.6, other systems) the folder is refused
/// at start-up: there is no safe fallback.
#[derive(Debug)]
pub struct UploadDir {
    /// Canonical: no symbolic link, no `..`.
    root: PathBuf,
    /// The folder, opened once: names are resolved beneath it.
    #[cfg(target_os = "linux")]
    fd: rustix::fd::OwnedFd,
}

/// How many times an open that raced a rename in the folder (`EAGAIN`) is tried again.
#[cfg(target_os = "linux")]
const OPEN_ATTEMPTS: usize = 8;

impl UploadDir {
    /// The folder at `dir`, which must exist, on a kernel that has `openat2`.
    pub fn new(dir: &Path) -> anyhow::Result<UploadDir> {
        let root = std::fs::canonicalize(dir)
            .map_err(|e| anyhow::anyhow!("--upload-dir {}: {e}", dir.display()))?;
        if !root.is_dir() {
            anyhow::bail!("--upload-dir {}: not a directory", dir.display());
        }
        UploadDir::open_root(root, dir)
    }

    #[cfg(target_os = "linux")]
    fn open_root(root: PathBuf, dir: &Path) -> anyhow::Result<UploadDir> {
        use rustix::fs::{Mode, OFlags, ResolveFlags, openat2};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(&root, flags, Mode::empty())
            .map_err(|e| anyhow::anyhow!("--upload-dir {}: {e}", dir.display()))?;
        // Fail closed: without openat2 a name could not be resolved safely.
        openat2(&fd, ".", flags, Mode::empty(), ResolveFlags::BENEATH).map_err(|e| {
            anyhow::anyhow!(
                "--upload-dir needs the openat2 system call (Linux 5.6 or later, not blocked by \
                 a seccomp profile) to open files safely beneath the folder, and it failed \
                 here: {e}; leave out --upload-dir and send bytes as {{\"base64\": …}}"
            )
        })?;
        Ok(UploadDir { root, fd })
    }

    #[cfg(not(target_os = "linux"))]
    fn open_root(_root: PathBuf, _dir: &Path) -> anyhow::Result<UploadDir> {
        anyhow::bail!(
            "--upload-dir needs Linux (openat2, to open files safely beneath the folder); \
             send bytes as {{\"base64\": …}} instead"
        )
    }

    /// The folder, canonical.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Opens `name` (already checked to be plain relative components) beneath the folder in
    /// one step: no symbolic link anywhere on the way, nothing outside.
    #[cfg(target_os = "linux")]
    fn open(&self, name: &str) -> Result<std::fs::File, String> {
        use rustix::fs::{Mode, OFlags, ResolveFlags, openat2};
        use rustix::io::Errno;
        // No FIFO to block on (O_NONBLOCK), no terminal to adopt (O_NOCTTY).
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        for _ in 0..OPEN_ATTEMPTS {
            return match openat2(&self.fd, name, flags, Mode::empty(), resolve) {
                Ok(fd) => Ok(std::fs::File::from(fd)),
                // The kernel saw a rename in the folder while resolving: try again.
                Err(Errno::AGAIN) => continue,
                Err(Errno::NOENT | Errno::NOTDIR) => {
                    Err(format!("the upload folder has no file {name:?}"))
                }
                Err(Errno::LOOP | Errno::XDEV) => Err(format!(
                    "{name:?} is refused: it leads out of the upload folder or through a \
                     symbolic link (no link is followed there; copy the file in instead)"
                )),
                Err(e) => Err(format!("{name:?}: {e}")),
            };
        }
        Err(format!(
            "{name:?}: the upload folder kept changing while the file was opened; try again"
        ))
    }

    #[cfg(not(target_os = "linux"))]
    fn open(&self, name: &str) -> Result<std::fs::File, String> {
        Err(format!("{name:?}: --upload-dir needs Linux"))
    }

    /// The bytes of the regular file `name` inside the folder, at most `cap` of them. Nothing
    /// is read from a name that leads out of the folder or passes a symbolic link, from a file
    /// with other hard links, or from a file over `cap` (checked on the open file).
    fn read(&self, name: &str, cap: usize) -> Result<Bytes, String> {
        if name.is_empty() || name.len() > MAX_FILE_NAME_BYTES {
            return Err(format!(
                "a file name of 1 to {MAX_FILE_NAME_BYTES} bytes inside the upload folder"
            ));
        }
        let rel = Path::new(name);
        let plain = !crate::printable::has_unprintable(name)
            && rel.components().all(|c| matches!(c, Component::Normal(_)));
        if !plain {
            return Err(format!(
                "{name:?} is refused: give a name inside the upload folder (no absolute path, \
                 no '.' or '..', no control or bidirectional characters)"
            ));
        }
        let file = self.open(name)?;
        let meta = file.metadata().map_err(|e| format!("{name:?}: {e}"))?;
        if !meta.is_file() {
            return Err(format!("{name:?} is not a regular file"));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            if meta.nlink() > 1 {
                return Err(format!(
                    "{name:?} is refused: it has {} hard links, and one may be a file outside \
                     the upload folder; copy the file into the folder instead",
                    meta.nlink()
                ));
            }
        }
        let too_big = |len: u64| {
            format!("{name:?} has {len} bytes, over the limit of {cap} (--max-request-bytes)")
        };
        if meta.len() > cap as u64 {
            return Err(too_big(meta.len()));
        }
        let mut bytes = Vec::with_capacity(meta.len().min(cap as u64) as usize);
        file.take(cap as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("{name:?}: {e}"))?;
        if bytes.len() > cap {
            return Err(too_big(bytes.len() as u64));
        }
        Ok(Bytes::from(bytes))
    }
}

/// What [`extract`] found: the bytes, and where the body now holds a placeholder.
#[derive(Debug, Default)]
pub struct ExtractedFiles {
    pub uploads: Uploads,
    /// The media type picked for the bytes when the call named none and the operation's
    /// default is text (an operation taking JSON or `image/png` gets `{"base64": …}`).
    pub content_type: Option<String>,
    /// JSON pointers of the binary values, replaced by `""` for schema validation.
    leaves: Vec<String>,
}

impl ExtractedFiles {
    /// `violations` without those at or under a binary value: the schema there is a binary
    /// string, which the placeholder only stands for. Every other violation stays.
    pub fn keep(&self, violations: Vec<Violation>) -> Vec<Violation> {
        violations
            .into_iter()
            .filter(|v| {
                !self.leaves.iter().any(|l| {
                    v.pointer == *l
                        || v.pointer
                            .strip_prefix(l.as_str())
                            .is_some_and(|rest| rest.starts_with('/'))
                })
            })
            .collect()
    }
}

/// Where a call's bytes may be read from, and how many it may upload.
#[derive(Debug, Clone, Copy)]
pub struct UploadLimits<'a> {
    /// The dev upload folder (`--upload-dir`), if any: `{"file": NAME}` reads beneath it.
    pub dir: Option<&'a UploadDir>,
    /// `--max-request-bytes`, counted decoded.
    pub max_request_bytes: usize,
}

/// Decodes the bytes `body` carries for `op` in the media type `content_type` picks (or the
/// operation's default): a whole binary body, or multipart file fields (a binary string, or
/// an array of them). Each binary value is replaced by `""` in `body`. Bytes sent to a text
/// media type, malformed base64, a bad filename or part type, a file name that leaves the
/// upload folder and more than `--max-request-bytes` in all are `INVALID_ARGUMENTS`, every
/// one named by its pointer.
pub fn extract(
    limits: UploadLimits<'_>,
    spec: &crate::spec::Spec,
    op: &Operation,
    content_type: Option<&str>,
    body: &mut Option<Value>,
) -> Result<ExtractedFiles, ToolError> {
    let out = ExtractedFiles::default();
    let Some(value) = body.as_mut() else {
        return Ok(out);
    };
    // An unknown media type is the request builder's to report.
    let Ok(Some(media)) = choose_media(spec, op, content_type) else {
        return Ok(out);
    };
    extract_in(limits, spec, op, media, value, content_type.is_none())
}

/// [`extract`] for the media type `media`; `may_switch` when the call named no media type,
/// so bytes sent where the default is text go to the operation's binary or multipart type.
fn extract_in(
    limits: UploadLimits<'_>,
    spec: &crate::spec::Spec,
    op: &Operation,
    media: &MediaType,
    value: &mut Value,
    may_switch: bool,
) -> Result<ExtractedFiles, ToolError> {
    let mut out = ExtractedFiles::default();
    let mut reader = Reader {
        dir: limits.dir,
        cap: limits.max_request_bytes,
        used: 0,
        violations: Vec::new(),
    };
    match body_kind(spec, media) {
        BodyKind::Binary => {
            if is_binary_value(value) {
                if let Some(u) = reader.take("/body", value, false) {
                    out.uploads = Uploads::Body(u);
                }
                *value = Value::String(String::new());
                out.leaves.push("/body".into());
            }
        }
        BodyKind::Multipart => {
            let mut parts = Vec::new();
            let properties = properties(spec, &media.schema);
            // A binary string takes a string as the file's bytes; any other file field only a
            // value written as bytes (a string there is a text part).
            let takes = |field: FileField, v: &Value| match field {
                FileField::Binary => v.is_string() || is_binary_value(v),
                FileField::Accepts => is_binary_value(v),
                FileField::No => false,
            };
            if let Value::Object(fields) = value {
                for (name, v) in fields.iter_mut() {
                    let pointer = format!("/body/{}", crate::spec::escape_pointer(name));
                    let schema = properties.iter().find(|(n, _)| n == name).map(|(_, s)| *s);
                    let field = file_field(spec, media, name, schema);
                    let items = file_items(spec, media, name, schema);
                    let typed = |mut u: Upload| {
                        if u.content_type.is_none() {
                            u.content_type = part_type(media, name);
                        }
                        (name.clone(), u)
                    };
                    if takes(field, v) {
                        if let Some(u) = reader.take(&pointer, v, true) {
                            parts.push(typed(u));
                        }
                        *v = Value::String(String::new());
                        out.leaves.push(pointer);
                    } else if let (FileField::Binary | FileField::Accepts, Value::Array(list)) =
                        (items, &mut *v)
                    {
                        for (i, item) in
                            list.iter_mut().enumerate().filter(|(_, v)| takes(items, v))
                        {
                            let at = format!("{pointer}/{i}");
                            if let Some(u) = reader.take(&at, item, true) {
                                parts.push(typed(u));
                            }
                            *item = Value::String(String::new());
                            out.leaves.push(at);
                        }
                    } else if is_binary_value(v) {
                        reader.refuse(
                            &pointer,
                            format!(
                                "{name:?} is not a file field of {}: bytes go only to a field \
                                 whose schema is a string or says no type, or one the media \
                                 type's `encoding` gives a contentType",
                                op.key()
                            ),
                        );
                    }
                }
            }
            if !parts.is_empty() {
                out.uploads = Uploads::Parts(parts);
            }
        }
        BodyKind::Text => {
            let declares = |schema: &Value, v: &Value| {
                let props = properties(spec, schema);
                v.as_object()
                    .is_some_and(|m| m.keys().all(|k| props.iter().any(|(n, _)| n == k)))
            };
            let mut at = Vec::new();
            if is_binary_value(value) && !declares(&media.schema, value) {
                at.push("/body".to_string());
            } else if let Value::Object(fields) = &*value {
                let props = properties(spec, &media.schema);
                for (name, v) in fields {
                    let schema = props.iter().find(|(n, _)| n == name).map(|(_, s)| *s);
                    if is_binary_value(v) && !schema.is_some_and(|s| declares(s, v)) {
                        at.push(format!("/body/{}", crate::spec::escape_pointer(name)));
                    }
                }
            }
            let offered = || op.request_body.iter().flat_map(|b| &b.content);
            // Bytes as the whole body go to a binary type, bytes in fields to multipart.
            let wanted = if at.first().is_some_and(|p| p == "/body") {
                BodyKind::Binary
            } else {
                BodyKind::Multipart
            };
            let switch = offered().find(|m| body_kind(spec, m) == wanted);
            if let (true, false, Some(other)) = (may_switch, at.is_empty(), switch) {
                let mut out = extract_in(limits, spec, op, other, value, false)?;
                out.content_type = Some(other.content_type.clone());
                return Ok(out);
            }
            let binary: Vec<&str> = offered()
                .filter(|m| body_kind(spec, m) != BodyKind::Text)
                .map(|m| m.content_type.as_str())
                .collect();
            for pointer in at {
                reader.refuse(
                    &pointer,
                    format!(
                        "{} is a text media type: bytes ({{\"base64\": …}} or {{\"file\": …}}) go \
                         only to a binary body or a multipart file field ({})",
                        media.content_type,
                        if binary.is_empty() {
                            format!("{} takes neither", op.key())
                        } else {
                            format!("pick one with contentType: {}", binary.join(", "))
                        }
                    ),
                );
            }
        }
    }
    if !reader.violations.is_empty() {
        return Err(ToolError::invalid(
            "the body's bytes cannot be sent (see `violations`): give bytes as {\"base64\": \
             \"…\"} (standard base64, padding optional, line breaks ignored) where api_schema \
             shows a binary body or file field",
            reader.violations,
        ));
    }
    Ok(out)
}

/// Reads binary values within the request-size cap, collecting every violation.
struct Reader<'a> {
    dir: Option<&'a UploadDir>,
    cap: usize,
    /// Bytes taken so far by this call.
    used: usize,
    violations: Vec<Violation>,
}

impl Reader<'_> {
    fn refuse(&mut self, pointer: &str, message: String) {
        self.violations.push(Violation {
            pointer: pointer.to_string(),
            message,
        });
    }

    /// The bytes of the binary value `v` at `pointer` (a string's own UTF-8 bytes, or
    /// `{base64 | file, filename?, contentType?}`; the last two only for a `part`).
    fn take(&mut self, pointer: &str, v: &Value, part: bool) -> Option<Upload> {
        let arg = match v {
            Value::String(s) => {
                let bytes = Bytes::copy_from_slice(s.as_bytes());
                return self.count(pointer, bytes).map(|bytes| Upload {
                    bytes,
                    filename: None,
                    content_type: None,
                });
            }
            v => match BinaryArg::deserialize(v) {
                Ok(a) => a,
                Err(e) => {
                    self.refuse(pointer, format!("not a binary value: {e}"));
                    return None;
                }
            },
        };
        let before = self.violations.len();
        if !part {
            for (key, given) in [
                ("filename", arg.filename.is_some()),
                ("contentType", arg.content_type.is_some()),
            ] {
                if given {
                    self.refuse(
                        &format!("{pointer}/{key}"),
                        "a whole body has no filename or part type; its media type is the \
                         `contentType` argument"
                            .into(),
                    );
                }
            }
        }
        if let Some(f) = arg.filename
            && let Err(e) = check_filename(f)
        {
            self.refuse(&format!("{pointer}/filename"), e);
        }
        if let Some(t) = arg.content_type
            && let Err(e) = check_media_type(t)
        {
            self.refuse(&format!("{pointer}/contentType"), e);
        }
        let bytes = match (arg.base64, arg.file) {
            (Some(text), None) => self.decode(&format!("{pointer}/base64"), text),
            (None, Some(name)) => self.read(&format!("{pointer}/file"), name),
            _ => {
                self.refuse(pointer, "give either `base64` or `file`, not both".into());
                None
            }
        };
        if self.violations.len() > before {
            return None;
        }
        Some(Upload {
            bytes: bytes?,
            filename: arg.filename.map(str::to_string),
            content_type: arg.content_type.map(str::to_string),
        })
    }

    fn decode(&mut self, pointer: &str, text: &str) -> Option<Bytes> {
        let cleaned: String;
        let text = if text.bytes().any(|b| b.is_ascii_whitespace()) {
            cleaned = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
            &cleaned
        } else {
            text
        };
        // Refused before decoding: the decoded size is known from the length.
        let decoded_len = text.trim_end_matches('=').len() * 3 / 4;
        if self.used + decoded_len > self.cap {
            self.refuse(pointer, self.over(decoded_len));
            return None;
        }
        match BASE64.decode(text) {
            Ok(bytes) => self.count(pointer, Bytes::from(bytes)),
            Err(e) => {
                self.refuse(
                    pointer,
                    format!(
                        "not standard base64 ({e}): use the letters A-Z a-z 0-9 + / (not the \
                         URL-safe - _), padding optional"
                    ),
                );
                None
            }
        }
    }

    fn read(&mut self, pointer: &str, name: &str) -> Option<Bytes> {
        let Some(dir) = self.dir else {
            self.refuse(
                pointer,
                "reading a file by name needs the operator to start `apigate dev` with \
                 --upload-dir DIR; pass the bytes as {\"base64\": \"…\"} instead"
                    .into(),
            );
            return None;
        };
        match dir.read(name, self.cap.saturating_sub(self.used)) {
            Ok(bytes) => self.count(pointer, bytes),
            Err(e) => {
                self.refuse(pointer, e);
                None
            }
        }
    }

    fn count(&mut self, pointer: &str, bytes: Bytes) -> Option<Bytes> {
        if self.used + bytes.len() > self.cap {
            self.refuse(pointer, self.over(bytes.len()));
            return None;
        }
        self.used += bytes.len();
        Some(bytes)
    }

    fn over(&self, len: usize) -> String {
        format!(
            "{len} bytes, and {} before it: over the limit of {} bytes a request may upload \
             (--max-request-bytes)",
            self.used, self.cap
        )
    }
}

/// The properties an object schema declares, through `$ref`s and `allOf`.
fn properties<'a>(spec: &'a Spec, schema: &'a Value) -> Vec<(String, &'a Value)> {
    fn walk<'a>(spec: &'a Spec, schema: &'a Value, out: &mut Vec<(String, &'a Value)>, depth: u8) {
        let schema = spec.follow(schema);
        if let Some(Value::Object(props)) = schema.get("properties") {
            out.extend(props.iter().map(|(k, v)| (k.clone(), v)));
        }
        if depth < 8
            && let Some(Value::Array(parts)) = schema.get("allOf")
        {
            for part in parts {
                walk(spec, part, out, depth + 1);
            }
        }
    }
    let mut out = Vec::new();
    walk(spec, schema, &mut out, 0);
    out
}

#[cfg(test)]
mod tests;
