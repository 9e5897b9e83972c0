//! The normalized `Operation` model, the same for OpenAPI 3.0/3.1 and Swagger 2.0 documents
//! (extracted by `extract`, Swagger 2.0 shapes converted by `swagger`, ids given by `ids`).
//! Schemas are kept as they appear in the document (with `$ref`s), so nothing the document
//! says is lost; `refs` inlines them for display and bundles them for validation.

use serde::Serialize;
use serde_json::{Map, Value};

use super::method::Method;

/// The document dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Dialect {
    #[serde(rename = "swagger-2.0")]
    Swagger2,
    #[serde(rename = "openapi-3.0")]
    OpenApi30,
    #[serde(rename = "openapi-3.1")]
    OpenApi31,
}

/// Where a parameter goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamIn {
    Path,
    Query,
    Header,
    Cookie,
}

impl ParamIn {
    pub(super) fn parse(s: &str) -> Option<ParamIn> {
        match s {
            "path" => Some(ParamIn::Path),
            "query" => Some(ParamIn::Query),
            "header" => Some(ParamIn::Header),
            "cookie" => Some(ParamIn::Cookie),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ParamIn::Path => "path",
            ParamIn::Query => "query",
            ParamIn::Header => "header",
            ParamIn::Cookie => "cookie",
        }
    }
}

/// One path, query, header or cookie parameter.
#[derive(Debug, Clone)]
pub struct Parameter {
    pub name: String,
    pub location: ParamIn,
    pub required: bool,
    pub description: Option<String>,
    /// The parameter's schema as written (may hold `$ref`s).
    pub schema: Value,
    /// `form`, `simple`, `spaceDelimited`, `pipeDelimited`, `deepObject`, … (OpenAPI 3 names;
    /// Swagger 2.0 `collectionFormat` is mapped to these).
    pub style: String,
    pub explode: bool,
    pub deprecated: bool,
}

/// One media type of a request body.
#[derive(Debug, Clone)]
pub struct MediaType {
    pub content_type: String,
    pub schema: Value,
    /// The media types the `encoding` object names for fields of a multipart or form body
    /// (`encoding.{field}.contentType`, as written: may be a list or a range), by field.
    pub part_types: Vec<(String, String)>,
}

/// An operation's request body.
#[derive(Debug, Clone)]
pub struct RequestBody {
    pub required: bool,
    pub description: Option<String>,
    pub content: Vec<MediaType>,
}

impl RequestBody {
    /// The media type apigate sends: JSON first, then form encoding, then the first declared.
    pub fn preferred(&self) -> Option<&MediaType> {
        let rank = |m: &MediaType| {
            let ct = m.content_type.to_ascii_lowercase();
            if ct == "application/json" {
                0
            } else if ct.ends_with("+json") || ct.contains("json") {
                1
            } else if ct == "application/x-www-form-urlencoded" {
                2
            } else if ct.starts_with("multipart/form-data") {
                3
            } else if ct.starts_with("text/") {
                4
            } else {
                5
            }
        };
        self.content.iter().min_by_key(|m| rank(m))
    }
}

/// One response of an operation.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: String,
    pub description: Option<String>,
    pub content_type: Option<String>,
    pub schema: Option<Value>,
}

/// One callable `METHOD /path` of a document, normalized across dialects.
#[derive(Debug, Clone)]
pub struct Operation {
    /// The document's `operationId`, or a synthesized, stable one (`get_api_contents_by_path`).
    pub id: String,
    pub method: Method,
    /// The path template as written in the document.
    pub path: String,
    pub summary: Option<String>,
    /// The description with HTML and Markdown reduced to text.
    pub description: Option<String>,
    pub tags: Vec<String>,
    pub deprecated: bool,
    /// Path-level and operation-level parameters, merged (the operation's win).
    pub parameters: Vec<Parameter>,
    pub request_body: Option<RequestBody>,
    pub responses: Vec<Response>,
    /// Effective security requirements (the operation's, else the document's).
    pub security: Option<Value>,
    /// Effective server URLs (operation, path item, then document), variables substituted.
    pub servers: Vec<String>,
    /// `x-*` extensions of the operation.
    pub extensions: Map<String, Value>,
    /// From `x-required-features`.
    pub required_features: Vec<String>,
    /// The media types a response may come in: every type the responses declare (Swagger:
    /// `produces`), then types the operation's description names (GitHub documents
    /// `application/octet-stream` for release assets only there). What `accept` may ask for.
    pub response_types: Vec<String>,
}

impl Operation {
    /// `true` for methods that may change state (see [`Method::is_safe`]).
    pub fn mutating(&self) -> bool {
        self.method.is_mutating()
    }

    /// The resource the path is about, as `/name`: its first segment that is not `api`, a
    /// version (`v1`, `v2beta`) or a `{parameter}`, lower-cased; empty for `/`. What groups the
    /// operations of a spec without tags.
    pub fn resource(&self) -> String {
        let version = |s: &str| {
            s.strip_prefix(['v', 'V'])
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        };
        self.path
            .split('/')
            .find(|s| !s.is_empty() && *s != "api" && !version(s) && !s.starts_with('{'))
            .map(|s| format!("/{}", s.to_lowercase()))
            .unwrap_or_default()
    }

    /// `METHOD /path`.
    pub fn key(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    /// Every schema (and extension) the operation holds: where its `$ref`s start.
    pub fn schemas(&self) -> impl Iterator<Item = &Value> {
        let params = self.parameters.iter().map(|p| &p.schema);
        let body = self
            .request_body
            .iter()
            .flat_map(|b| b.content.iter().map(|m| &m.schema));
        let responses = self.responses.iter().filter_map(|r| r.schema.as_ref());
        params
            .chain(body)
            .chain(responses)
            .chain(self.extensions.values())
    }
}
