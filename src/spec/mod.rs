//! Loading OpenAPI documents (file or URL; JSON or YAML; Swagger 2.0, OpenAPI 3.0 and 3.1),
//! `$ref` resolution, the normalized `Operation` model and per-operation argument schemas.
//! No web framework, no database: adapters call `Spec::load`, then `operations`, `find`,
//! `validate` and `describe`.

mod args;
mod describe;
mod extract;
mod ids;
pub mod method;
mod operation;
mod paths;
mod refs;
mod remote;
mod security;
mod source;
mod swagger;
mod text;

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::Value;

pub use args::{Violation, section, violations};
pub use describe::{
    BodyView, Detail, FieldKind, FieldOutline, MAX_DETAIL_SEGMENTS, OperationView, Outline,
    ParameterView,
};
pub use method::{Method, NotAMethod};
pub use operation::{Dialect, MediaType, Operation, ParamIn, Parameter, RequestBody, Response};
pub use paths::match_template;
pub(crate) use refs::{InlineBudget, escape as escape_pointer, push_segment};
pub use remote::{FetchPolicy, parse_origin};
pub use security::{
    CREDENTIAL_NAMES, CredentialParam, KeyIn, SchemeKind, alternatives as security_alternatives,
};
pub use source::DEFAULT_MAX_SPEC_BYTES;
pub(crate) use source::Location;

/// How a caller names an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationName<'a> {
    /// Its `operationId`.
    Id(&'a str),
    /// Its method and its path template or a concrete path.
    Route { method: Method, path: &'a str },
}

/// An operation [`Spec::resolve`] found: its position in `operations`, and the path
/// parameter values a concrete path carried (`/pets/42` → `petId = "42"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub index: usize,
    pub path_values: Vec<(String, String)>,
}

/// Why a document could not be loaded. Every message names the file (and the JSON pointer
/// where one applies).
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{file}: cannot read: {message}")]
    Read { file: String, message: String },
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    #[error("{file}: not an OpenAPI document: {message}")]
    NotOpenApi { file: String, message: String },
    #[error("{file}: at {pointer}: {message}")]
    Ref {
        file: String,
        pointer: String,
        message: String,
    },
    /// A `$ref` names a document apigate may not fetch (`remote.rs`): refused before any
    /// connection, so an open and a closed port read alike.
    #[error("{file}: the $ref to {reference} is not allowed: {why}")]
    NotAllowed {
        file: String,
        reference: String,
        why: String,
    },
}

/// A loaded, normalized document.
pub struct Spec {
    /// Where it came from (path, or URL without user info and query), for messages.
    pub source: String,
    pub title: String,
    /// The first sentence of `info.description` (at most 200 characters).
    pub description: String,
    /// `info.version`.
    pub api_version: String,
    pub dialect: Dialect,
    /// The `openapi` / `swagger` field as written.
    pub version: String,
    /// Document-level server URLs (Swagger 2.0 `host`/`basePath`/`schemes` converted).
    pub servers: Vec<String>,
    pub operations: Vec<Operation>,
    /// The security schemes by name (`components.securitySchemes`, `securityDefinitions`).
    pub security_schemes: std::collections::BTreeMap<String, SchemeKind>,
    /// Tolerated problems, each naming where.
    pub warnings: Vec<String>,
    /// The sha256 of the document's bytes (hex); with external `$ref`s, of the digests of the
    /// document and of every document they name, so that a change to any is a new version.
    pub sha256: String,
    /// The `ETag` the URL the document came from answered with: a reload asks with
    /// `If-None-Match` (`Spec::load_unless`).
    pub etag: Option<String>,
    /// The sha256 of the document's own bytes, and the documents its `$ref`s named: a reload
    /// that reads the same bytes from each parses nothing (`Spec::load_unless`).
    document_sha256: String,
    externals: Vec<refs::External>,
    /// What the operations' `$ref`s reach, and `tags`: the rest of the document (`paths`,
    /// examples, unreferenced components) is dropped once the operations are extracted.
    root: Value,
    by_id: HashMap<String, usize>,
    validators: Vec<OnceLock<args::ArgsValidator>>,
}

crate::debug_fields!(|s: Spec| {
    source,
    title,
    operations: s.operations.len(),
    ..
});

impl Spec {
    /// Loads a document from a file path or an `http(s)://` URL, with every document its
    /// `$ref`s reach, under the default [`FetchPolicy`].
    pub async fn load(source: &str) -> Result<Spec, SpecError> {
        let loaded = Spec::load_unless(source, None, &FetchPolicy::default()).await?;
        loaded.ok_or_else(|| SpecError::Read {
            file: source::public_name(source),
            message: "the server answered 304 Not Modified to a plain GET".into(),
        })
    }

    /// [`Spec::load`] under `policy`, unless `previous` came from the same place and nothing
    /// changed: then `None` (`previous` is current), and nothing was parsed. Nothing changed
    /// when the URL answers `If-None-Match` with 304 Not Modified (nothing downloaded either),
    /// or when the document's bytes and those of every document its `$ref`s named have the
    /// sha256 they had.
    pub async fn load_unless(
        source: &str,
        previous: Option<&Spec>,
        policy: &FetchPolicy,
    ) -> Result<Option<Spec>, SpecError> {
        let location = Location::parse(source)?;
        let previous = previous.filter(|p| p.source == location.display());
        let etag = previous.and_then(|p| p.etag.as_deref());
        let mut fetcher = remote::Fetcher::new(policy);
        let Some(raw) = source::read_raw(&location, etag, &mut fetcher.budget, None).await? else {
            return Ok(None);
        };
        let sha256 = source::digest(&raw.bytes);
        if let Some(p) = previous
            && p.document_sha256 == sha256
            && unchanged(&location, &p.externals, &mut fetcher).await
        {
            tracing::debug!(source = %location.display(), "document unchanged; not parsed again");
            return Ok(None);
        }
        let mut root = source::parse_read(&raw.bytes, &location)?;
        let (etag, internal) = (raw.etag, raw.from.is_some_and(remote::is_internal));
        drop(raw.bytes);
        let externals = refs::bundle_external(&mut root, &location, internal, &mut fetcher).await?;
        let mut spec = Spec::from_value(root, &location.display())?;
        // A document and the documents its `$ref`s name: a change to any is a new version.
        spec.sha256 = if externals.is_empty() {
            sha256.clone()
        } else {
            let digests: Vec<&str> = externals.iter().map(|e| e.sha256.as_str()).collect();
            source::digest(format!("{sha256} {}", digests.join(" ")).as_bytes())
        };
        // A 304 says nothing of the documents `$ref`s name: such a spec is read in full.
        spec.etag = etag.filter(|_| externals.is_empty());
        spec.document_sha256 = sha256;
        spec.externals = externals;
        Ok(Some(spec))
    }

    /// Loads a document from bytes already in memory (no external `$ref`s).
    pub fn from_bytes(bytes: &[u8], name: &str) -> Result<Spec, SpecError> {
        let location = Location::File(name.into());
        let root = source::parse(bytes, &location)?;
        let mut spec = Spec::from_value(root, name)?;
        spec.sha256 = source::digest(bytes);
        spec.document_sha256 = spec.sha256.clone();
        Ok(spec)
    }

    /// Normalizes a parsed document whose external refs are already bundled.
    pub(crate) fn from_value(mut root: Value, file: &str) -> Result<Spec, SpecError> {
        let not_openapi = |message: &str| SpecError::NotOpenApi {
            file: file.to_string(),
            message: message.to_string(),
        };
        if !root.is_object() {
            return Err(not_openapi("the top level is not an object"));
        }
        let mut warnings = Vec::new();
        let (dialect, version) = detect(&root, &mut warnings).map_err(|m| not_openapi(&m))?;
        if dialect == Dialect::Swagger2 {
            let arrays = count_type_arrays(&root);
            if arrays > 0 {
                warnings.push(format!(
                    "{arrays} schemas use a `type` array, which Swagger 2.0 does not allow; read as JSON Schema"
                ));
            }
        }
        warnings.extend(refs::check(&root, file)?);
        let info = root.get("info");
        let field = |k: &str| {
            info.and_then(|i| i.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim()
                .to_string()
        };
        let (title, api_version) = (field("title"), field("version"));
        let description = text::first_sentence(&field("description"), 200);
        if info.is_none() {
            warnings.push("the document has no `info`".into());
        }
        let extracted = extract::extract(&root, dialect);
        warnings.extend(extracted.warnings);
        let by_id = extracted
            .operations
            .iter()
            .enumerate()
            .map(|(i, op)| (op.id.clone(), i))
            .collect();
        let validators = extracted
            .operations
            .iter()
            .map(|_| OnceLock::new())
            .collect();
        let security_schemes = security::schemes(&root, dialect);
        let root = refs::retain_reachable(
            &mut root,
            extracted.operations.iter().flat_map(Operation::schemas),
            &["tags"],
        );
        Ok(Spec {
            source: file.to_string(),
            title,
            description,
            api_version,
            dialect,
            version,
            servers: extracted.servers,
            operations: extracted.operations,
            security_schemes,
            warnings,
            sha256: String::new(),
            etag: None,
            document_sha256: String::new(),
            externals: Vec::new(),
            root,
            by_id,
            validators,
        })
    }

    /// What is left of the document after loading: the nodes the operations' `$ref`s reach
    /// (at their original pointers) and `tags`.
    pub fn root(&self) -> &Value {
        &self.root
    }

    /// The document's `tags` with a description: name → the description's first sentence (at
    /// most 120 characters).
    pub fn tag_descriptions(&self) -> HashMap<String, String> {
        self.root
            .get("tags")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| {
                let name = t.get("name")?.as_str()?;
                let text = text::first_sentence(t.get("description")?.as_str()?, 120);
                (!text.is_empty()).then(|| (name.to_string(), text))
            })
            .collect()
    }

    /// The operation with this id.
    pub fn get(&self, id: &str) -> Option<&Operation> {
        self.by_id.get(id).map(|&i| &self.operations[i])
    }

    /// The position of an operation in `operations`.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    /// Finds the operation `name` names, once: by id, or by method and a path that is either
    /// a template as written in the document or a concrete path (`/pets/42`), where the most
    /// literal template wins. The handle carries the values a concrete path held.
    pub fn resolve(&self, name: &OperationName<'_>) -> Option<Resolved> {
        match *name {
            OperationName::Id(id) => self.index_of(id).map(|index| Resolved {
                index,
                path_values: Vec::new(),
            }),
            OperationName::Route { method, path } => {
                let candidates = self
                    .operations
                    .iter()
                    .enumerate()
                    .filter(|(_, op)| op.method == method);
                if let Some((index, _)) = candidates.clone().find(|(_, op)| op.path == path) {
                    return Some(Resolved {
                        index,
                        path_values: Vec::new(),
                    });
                }
                candidates
                    .filter_map(|(index, op)| {
                        paths::match_template(&op.path, path)
                            .map(|(score, values)| (score, index, values))
                    })
                    .max_by_key(|(score, _, _)| *score)
                    .map(|(_, index, path_values)| Resolved { index, path_values })
            }
        }
    }

    /// The operation for `METHOD path` (template or concrete) and the values a concrete path
    /// carried: [`Spec::resolve`] by route.
    pub fn find(&self, method: Method, path: &str) -> Option<(&Operation, Vec<(String, String)>)> {
        let r = self.resolve(&OperationName::Route { method, path })?;
        Some((&self.operations[r.index], r.path_values))
    }

    /// The JSON Schema of `api_execute`'s `{pathParams, query, headers, body}` for `op`, with
    /// the document's `$ref`s (see [`Spec::describe`] for an inlined view).
    pub fn args_schema(&self, op: &Operation) -> Value {
        args::schema(op, &self.security_schemes)
    }

    /// Whether the parameter `p` of `op` is a credential (see [`security::credential_param`]).
    pub fn credential_param(&self, op: &Operation, p: &Parameter) -> Option<CredentialParam> {
        security::credential_param(&self.security_schemes, op, p)
    }

    /// Coerces string scalars where the schema wants numbers/booleans, then validates `args`
    /// (`{pathParams, query, headers, body}`) and returns every violation.
    pub fn validate(&self, op: &Operation, args: &mut Value) -> Vec<Violation> {
        args::coerce(&self.root, op, args);
        let Some(i) = self.index_of(&op.id) else {
            return vec![Violation {
                pointer: String::new(),
                message: format!("operation {} is not part of {}", op.id, self.source),
            }];
        };
        self.validators[i]
            .get_or_init(|| args::ArgsValidator::build(&self.root, &self.security_schemes, op))
            .validate(args)
    }

    /// Where the document came from, as an unauthenticated caller may see it (`/health`): a
    /// URL without user info or query, or a file's name without its directory.
    pub(crate) fn public_source(&self) -> String {
        source::public_name(&self.source)
    }

    /// `api_schema`'s view of one operation: parameters, request body, responses, security and
    /// server, `$ref`s inlined up to a budget, cycles marked `{"$recursive": name}`.
    pub fn describe(&self, op: &Operation, detail: Detail) -> OperationView {
        describe::describe(self, op, detail)
    }

    /// One part of `api_schema`'s view, whole: a parameter, `requestBody[.field…]`,
    /// `responses[.STATUS[.field…]]`, `accept` or `description` (`describe::part`); `Err`
    /// says what `path` may name.
    pub fn describe_part(&self, op: &Operation, path: &str) -> Result<Value, String> {
        describe::part(self, op, path)
    }

    /// Inlines `$ref`s of any fragment of this document.
    pub(crate) fn inline(&self, value: &Value, budget: InlineBudget) -> Value {
        refs::inline(&self.root, value, budget)
    }

    /// Follows a chain of `$ref`s to the first concrete node.
    pub fn follow<'a>(&'a self, value: &'a Value) -> &'a Value {
        refs::follow(&self.root, value).0
    }
}

fn detect(root: &Value, warnings: &mut Vec<String>) -> Result<(Dialect, String), String> {
    let as_text = |v: &Value| match v {
        Value::String(s) => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    if let Some(v) = root.get("openapi").and_then(as_text) {
        if !root["openapi"].is_string() {
            warnings.push(format!(
                "`openapi` should be a string, found the number {v}"
            ));
        }
        return if v.starts_with("3.0") {
            Ok((Dialect::OpenApi30, v))
        } else if v.starts_with("3.1") {
            Ok((Dialect::OpenApi31, v))
        } else if v.starts_with('3') {
            warnings.push(format!("OpenAPI {v} is read as 3.1"));
            Ok((Dialect::OpenApi31, v))
        } else {
            Err(format!(
                "unsupported `openapi` version {v:?} (supported: 2.0, 3.0, 3.1)"
            ))
        };
    }
    if let Some(v) = root.get("swagger").and_then(as_text) {
        return if v.starts_with('2') {
            Ok((Dialect::Swagger2, v))
        } else {
            Err(format!(
                "unsupported `swagger` version {v:?} (supported: 2.0)"
            ))
        };
    }
    Err("no `openapi` or `swagger` field at the top level".into())
}

fn count_type_arrays(v: &Value) -> usize {
    match v {
        Value::Object(map) => {
            usize::from(matches!(map.get("type"), Some(Value::Array(_))))
                + map.values().map(count_type_arrays).sum::<usize>()
        }
        Value::Array(items) => items.iter().map(count_type_arrays).sum(),
        _ => 0,
    }
}

/// Whether every document a spec's `$ref`s named (`externals`) still has the bytes it had,
/// read again from the same place under the same checks. Any error reads as changed: the full
/// load that follows reports it.
async fn unchanged(
    main: &Location,
    externals: &[refs::External],
    fetcher: &mut remote::Fetcher<'_>,
) -> bool {
    for e in externals {
        let fetch = fetcher.referenced(main, &e.base, e.base_internal, &e.location);
        match tokio::time::timeout(source::FETCH_TIMEOUT, fetch).await {
            Ok(Ok(raw)) if source::digest(&raw.bytes) == e.sha256 => {}
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loaded spec keeps only what its operations' `$ref`s reach. On every document in
    /// `tests/data/specs`, every operation's schemas resolve against what is kept exactly as
    /// against the whole document, inlined for `api_schema` and bundled for validation.
    #[test]
    fn the_kept_document_answers_every_operation_like_the_whole_one() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/specs");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).expect("tests/data/specs") {
            let path = entry.expect("entry").path();
            let name = path.display().to_string();
            if !(name.ends_with(".json") || name.ends_with(".yaml")) {
                continue;
            }
            let bytes = std::fs::read(&path).expect("read");
            let whole = source::parse(&bytes, &Location::File(path.clone())).expect("parse");
            let spec = Spec::from_value(whole.clone(), &name).expect("load");
            // Unless a `$ref` reaches into them (Azure's graphrbac points `x-ms-pageable` there).
            let into_paths = String::from_utf8_lossy(&bytes).contains("\"#/paths/");
            assert!(into_paths || spec.root.get("paths").is_none(), "{name}");
            for op in &spec.operations {
                let budget = InlineBudget { depth: 3 };
                for schema in op.schemas() {
                    assert_eq!(
                        spec.inline(schema, budget),
                        refs::inline(&whole, schema, budget),
                        "{name} {}",
                        op.id
                    );
                }
                let args = args::schema(op, &spec.security_schemes);
                assert_eq!(
                    refs::bundle_schema(spec.root(), &args),
                    refs::bundle_schema(&whole, &args),
                    "{name} {}",
                    op.id
                );
                checked += 1;
            }
        }
        assert!(checked > 2_000, "{checked} operations");
    }
}
