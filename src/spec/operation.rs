//! The normalized `Operation` model and its extraction from OpenAPI 3.0/3.1 and Swagger 2.0
//! documents. Schemas are kept as they appear in the document (with `$ref`s), so nothing the
//! document says is lost; `refs` inlines them for display and bundles them for validation.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::method::Method;
use super::refs::{self, follow};
use super::text;

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
    fn parse(s: &str) -> Option<ParamIn> {
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

/// What extraction produced.
pub(crate) struct Extracted {
    pub operations: Vec<Operation>,
    pub servers: Vec<String>,
    pub warnings: Vec<String>,
}

/// Extracts every operation under `paths`.
pub(crate) fn extract(root: &Value, dialect: Dialect) -> Extracted {
    let mut warnings = Vec::new();
    let servers = match dialect {
        Dialect::Swagger2 => swagger_servers(root),
        _ => servers_of(root.get("servers")),
    };
    let mut operations = Vec::new();
    let empty = Map::new();
    let paths = match root.get("paths") {
        Some(Value::Object(p)) => p,
        Some(_) => {
            warnings.push("/paths: not an object; no operations".into());
            &empty
        }
        None => {
            warnings.push("the document has no `paths`; no operations".into());
            &empty
        }
    };
    let ctx = Ctx {
        root,
        dialect,
        consumes: strings(root.get("consumes")),
        produces: strings(root.get("produces")),
    };
    for (path, item) in paths {
        if !path.starts_with('/') {
            if !path.starts_with("x-") {
                warnings.push(format!(
                    "/paths/{}: path does not start with '/'; skipped",
                    refs::escape(path)
                ));
            }
            continue;
        }
        let (item, _) = follow(root, item);
        let Some(item) = item.as_object() else {
            warnings.push(format!(
                "/paths/{}: not an object; skipped",
                refs::escape(path)
            ));
            continue;
        };
        let path_params = item.get("parameters");
        let path_servers = servers_of(item.get("servers"));
        for method in Method::ALL {
            let Some(op) = item.get(method.path_item_key()) else {
                continue;
            };
            let at = format!("/paths/{}/{}", refs::escape(path), method.path_item_key());
            let Some(op) = op.as_object() else {
                warnings.push(format!("{at}: not an object; skipped"));
                continue;
            };
            operations.push(ctx.operation(
                path,
                method,
                op,
                path_params,
                &path_servers,
                &servers,
                &at,
                &mut warnings,
            ));
        }
    }
    assign_ids(&mut operations, &mut warnings);
    Extracted {
        operations,
        servers,
        warnings,
    }
}

struct Ctx<'a> {
    root: &'a Value,
    dialect: Dialect,
    consumes: Vec<String>,
    produces: Vec<String>,
}

impl Ctx<'_> {
    #[allow(clippy::too_many_arguments)]
    fn operation(
        &self,
        path: &str,
        method: Method,
        op: &Map<String, Value>,
        path_params: Option<&Value>,
        path_servers: &[String],
        doc_servers: &[String],
        at: &str,
        warnings: &mut Vec<String>,
    ) -> Operation {
        let str_of = |k: &str| op.get(k).and_then(Value::as_str).map(str::to_string);
        let summary = str_of("summary")
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        let description = str_of("description")
            .map(|d| text::plain(&d))
            .filter(|d| !d.is_empty());
        let tags = match op.get("tags") {
            Some(Value::Array(t)) => t
                .iter()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        let mut parameters: Vec<Parameter> = Vec::new();
        let mut body_params: Vec<&Map<String, Value>> = Vec::new();
        let mut form_params: Vec<&Map<String, Value>> = Vec::new();
        // Path-level first, then operation-level replacing same (name, in).
        for (source, list) in [
            ("path item", path_params),
            ("operation", op.get("parameters")),
        ] {
            let Some(Value::Array(list)) = list else {
                continue;
            };
            for (i, p) in list.iter().enumerate() {
                let (p, _) = follow(self.root, p);
                let Some(p) = p.as_object() else {
                    warnings.push(format!(
                        "{at}: {source} parameter {i} is not an object; skipped"
                    ));
                    continue;
                };
                let location = p.get("in").and_then(Value::as_str).unwrap_or_default();
                match (self.dialect, location) {
                    (Dialect::Swagger2, "body") => {
                        body_params.retain(|_| false);
                        body_params.push(p);
                        continue;
                    }
                    (Dialect::Swagger2, "formData") => {
                        let name = p.get("name");
                        form_params.retain(|f| f.get("name") != name);
                        form_params.push(p);
                        continue;
                    }
                    _ => {}
                }
                match self.parameter(p) {
                    Some(param) => {
                        parameters
                            .retain(|q| !(q.name == param.name && q.location == param.location));
                        parameters.push(param);
                    }
                    None => warnings.push(format!(
                        "{at}: {source} parameter {i} has no usable name/in ({location:?}); skipped"
                    )),
                }
            }
        }
        // Path parameters the template names but nobody declared: add them as strings.
        for name in template_names(path) {
            if !parameters
                .iter()
                .any(|p| p.location == ParamIn::Path && p.name == name)
            {
                warnings.push(format!(
                    "{at}: path parameter {name:?} is not declared; treated as a string"
                ));
                parameters.push(Parameter {
                    name,
                    location: ParamIn::Path,
                    required: true,
                    description: None,
                    schema: json!({"type": "string"}),
                    style: "simple".into(),
                    explode: false,
                    deprecated: false,
                });
            }
        }
        let request_body = match self.dialect {
            Dialect::Swagger2 => self.swagger_body(op, &body_params, &form_params),
            _ => op.get("requestBody").and_then(|b| self.request_body(b)),
        };
        let responses = self.responses(op);
        let security = op
            .get("security")
            .or_else(|| self.root.get("security"))
            .cloned();
        let own_servers = servers_of(op.get("servers"));
        let servers = if !own_servers.is_empty() {
            own_servers
        } else if !path_servers.is_empty() {
            path_servers.to_vec()
        } else {
            doc_servers.to_vec()
        };
        let extensions: Map<String, Value> = op
            .iter()
            .filter(|(k, _)| k.starts_with("x-"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let required_features = strings(op.get("x-required-features"));
        let response_types = self.response_types(op, str_of("description").as_deref());
        Operation {
            id: str_of("operationId")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            method,
            path: path.to_string(),
            summary,
            description,
            tags,
            deprecated: op
                .get("deprecated")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            parameters,
            request_body,
            responses,
            security,
            servers,
            extensions,
            required_features,
            response_types,
        }
    }

    fn response_types(&self, op: &Map<String, Value>, description: Option<&str>) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut add = |t: &str| {
            let t = t.trim().to_ascii_lowercase();
            if !t.is_empty() && !out.contains(&t) {
                out.push(t);
            }
        };
        if self.dialect == Dialect::Swagger2 {
            let produces = match op.get("produces") {
                Some(p) => strings(Some(p)),
                None => self.produces.clone(),
            };
            produces.iter().for_each(|t| add(t));
        } else if let Some(Value::Object(responses)) = op.get("responses") {
            for r in responses.values() {
                let (r, _) = follow(self.root, r);
                if let Some(Value::Object(content)) = r.get("content") {
                    content.keys().for_each(|t| add(t));
                }
            }
        }
        static DOCUMENTED: std::sync::LazyLock<Option<regex::Regex>> = std::sync::LazyLock::new(
            || {
                regex::Regex::new(r"\b(?:application|text|image|audio|video)/[A-Za-z0-9][A-Za-z0-9.+-]*[A-Za-z0-9]").ok()
            },
        );
        if let (Some(text), Some(re)) = (description, DOCUMENTED.as_ref()) {
            re.find_iter(text).for_each(|m| add(m.as_str()));
        }
        out
    }

    fn parameter(&self, p: &Map<String, Value>) -> Option<Parameter> {
        let name = p.get("name")?.as_str()?.to_string();
        let location = ParamIn::parse(p.get("in")?.as_str()?)?;
        let required = location == ParamIn::Path
            || p.get("required").and_then(Value::as_bool).unwrap_or(false);
        let description = p
            .get("description")
            .and_then(Value::as_str)
            .map(text::plain);
        let deprecated = p
            .get("deprecated")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let (schema, style, explode) = if self.dialect == Dialect::Swagger2 {
            let schema = swagger_param_schema(p);
            let (style, explode) = match p.get("collectionFormat").and_then(Value::as_str) {
                Some("multi") => ("form", true),
                Some("ssv") => ("spaceDelimited", false),
                Some("pipes") => ("pipeDelimited", false),
                Some("tsv") => ("tabDelimited", false),
                _ if location == ParamIn::Query => ("form", false),
                _ => ("simple", false),
            };
            (schema, style.to_string(), explode)
        } else {
            let schema = p
                .get("schema")
                .cloned()
                .or_else(|| {
                    // `content` instead of `schema`: take the first media type's schema.
                    p.get("content")?
                        .as_object()?
                        .values()
                        .next()?
                        .get("schema")
                        .cloned()
                })
                .unwrap_or_else(|| json!({}));
            let default_style = match location {
                ParamIn::Query | ParamIn::Cookie => "form",
                ParamIn::Path | ParamIn::Header => "simple",
            };
            let style = p
                .get("style")
                .and_then(Value::as_str)
                .unwrap_or(default_style)
                .to_string();
            let explode = p
                .get("explode")
                .and_then(Value::as_bool)
                .unwrap_or(style == "form");
            (schema, style, explode)
        };
        Some(Parameter {
            name,
            location,
            required,
            description,
            schema,
            style,
            explode,
            deprecated,
        })
    }

    fn request_body(&self, body: &Value) -> Option<RequestBody> {
        let (body, _) = follow(self.root, body);
        let body = body.as_object()?;
        let content = match body.get("content") {
            Some(Value::Object(c)) => c
                .iter()
                .map(|(ct, m)| MediaType {
                    content_type: ct.clone(),
                    schema: m.get("schema").cloned().unwrap_or_else(|| json!({})),
                })
                .collect(),
            _ => Vec::new(),
        };
        Some(RequestBody {
            required: body
                .get("required")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            description: body
                .get("description")
                .and_then(Value::as_str)
                .map(text::plain),
            content,
        })
    }

    fn swagger_body(
        &self,
        op: &Map<String, Value>,
        body: &[&Map<String, Value>],
        form: &[&Map<String, Value>],
    ) -> Option<RequestBody> {
        let consumes = match op.get("consumes") {
            Some(c) => strings(Some(c)),
            None => self.consumes.clone(),
        };
        if let Some(b) = body.first() {
            let schema = b.get("schema").cloned().unwrap_or_else(|| json!({}));
            let types: Vec<String> = if consumes.is_empty() {
                vec!["application/json".into()]
            } else {
                consumes
            };
            return Some(RequestBody {
                required: b.get("required").and_then(Value::as_bool).unwrap_or(false),
                description: b
                    .get("description")
                    .and_then(Value::as_str)
                    .map(text::plain),
                content: types
                    .into_iter()
                    .map(|content_type| MediaType {
                        content_type,
                        schema: schema.clone(),
                    })
                    .collect(),
            });
        }
        if form.is_empty() {
            return None;
        }
        let mut properties = Map::new();
        let mut required = Vec::new();
        let mut has_file = false;
        for p in form {
            let Some(name) = p.get("name").and_then(Value::as_str) else {
                continue;
            };
            has_file |= p.get("type").and_then(Value::as_str) == Some("file");
            let mut schema = swagger_param_schema(p);
            if let (Some(d), Value::Object(m)) = (p.get("description"), &mut schema) {
                m.insert(
                    "description".into(),
                    Value::String(text::plain(d.as_str().unwrap_or_default())),
                );
            }
            properties.insert(name.to_string(), schema);
            if p.get("required").and_then(Value::as_bool).unwrap_or(false) {
                required.push(Value::String(name.to_string()));
            }
        }
        let any_required = !required.is_empty();
        let schema = json!({"type": "object", "properties": properties, "required": required});
        let mut types: Vec<String> = consumes
            .into_iter()
            .filter(|c| {
                c.starts_with("application/x-www-form-urlencoded")
                    || c.starts_with("multipart/form-data")
            })
            .collect();
        if types.is_empty() {
            types.push(
                if has_file {
                    "multipart/form-data"
                } else {
                    "application/x-www-form-urlencoded"
                }
                .into(),
            );
        }
        Some(RequestBody {
            required: any_required,
            description: None,
            content: types
                .into_iter()
                .map(|content_type| MediaType {
                    content_type,
                    schema: schema.clone(),
                })
                .collect(),
        })
    }

    fn responses(&self, op: &Map<String, Value>) -> Vec<Response> {
        let Some(Value::Object(responses)) = op.get("responses") else {
            return Vec::new();
        };
        let produces = match op.get("produces") {
            Some(p) => strings(Some(p)),
            None => self.produces.clone(),
        };
        responses
            .iter()
            .filter(|(status, _)| !status.starts_with("x-"))
            .map(|(status, r)| {
                let (r, _) = follow(self.root, r);
                let description = r
                    .get("description")
                    .and_then(Value::as_str)
                    .map(text::plain);
                let (content_type, schema) = if self.dialect == Dialect::Swagger2 {
                    (
                        r.get("schema").map(|_| {
                            produces
                                .first()
                                .cloned()
                                .unwrap_or_else(|| "application/json".into())
                        }),
                        r.get("schema").cloned(),
                    )
                } else {
                    match r.get("content").and_then(Value::as_object) {
                        Some(c) => {
                            let pick = c
                                .iter()
                                .find(|(ct, _)| ct.contains("json"))
                                .or_else(|| c.iter().next());
                            match pick {
                                Some((ct, m)) => (Some(ct.clone()), m.get("schema").cloned()),
                                None => (None, None),
                            }
                        }
                        None => (None, None),
                    }
                };
                Response {
                    status: status.clone(),
                    description,
                    content_type,
                    schema,
                }
            })
            .collect()
    }
}

/// Schema keywords a Swagger 2.0 non-body parameter carries on itself.
const SWAGGER_SCHEMA_KEYS: [&str; 17] = [
    "type",
    "format",
    "items",
    "enum",
    "default",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "multipleOf",
    "x-nullable",
];

fn swagger_param_schema(p: &Map<String, Value>) -> Value {
    let mut schema = Map::new();
    for k in SWAGGER_SCHEMA_KEYS {
        if let Some(v) = p.get(k) {
            schema.insert(k.to_string(), v.clone());
        }
    }
    // A file is a binary string, as OpenAPI 3 says it: `api_execute` takes its bytes as
    // `{"base64": …}` and sends it as a file part.
    if schema.get("type").and_then(Value::as_str) == Some("file") {
        schema.insert("type".into(), Value::String("string".into()));
        schema.insert("format".into(), Value::String("binary".into()));
        schema.insert("description".into(), Value::String("file contents".into()));
    }
    Value::Object(schema)
}

fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|i| i.as_str().map(str::to_string))
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

/// Server URLs of an OpenAPI 3 `servers` array, with variables replaced by their defaults.
fn servers_of(v: Option<&Value>) -> Vec<String> {
    let Some(Value::Array(servers)) = v else {
        return Vec::new();
    };
    servers
        .iter()
        .filter_map(|s| {
            let mut url = s.get("url")?.as_str()?.to_string();
            if let Some(Value::Object(vars)) = s.get("variables") {
                for (name, var) in vars {
                    let default = var
                        .get("default")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    url = url.replace(&format!("{{{name}}}"), default);
                }
            }
            Some(url)
        })
        .collect()
}

fn swagger_servers(root: &Value) -> Vec<String> {
    let base = root.get("basePath").and_then(Value::as_str).unwrap_or("");
    let base = if base == "/" {
        ""
    } else {
        base.trim_end_matches('/')
    };
    match root.get("host").and_then(Value::as_str) {
        Some(host) => {
            let schemes = strings(root.get("schemes"));
            let scheme = if schemes.iter().any(|s| s == "https") || schemes.is_empty() {
                "https"
            } else {
                schemes[0].as_str()
            };
            vec![format!("{scheme}://{host}{base}")]
        }
        None if !base.is_empty() => vec![base.to_string()],
        None => Vec::new(),
    }
}

/// The `{names}` in a path template, in order.
pub fn template_names(path: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = path;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let name = &rest[start + 1..start + len];
        if !name.is_empty() && !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
        rest = &rest[start + len + 1..];
    }
    names
}

/// Gives every operation a unique, stable id: the document's `operationId` when present and
/// unique, otherwise one synthesized from method and path.
fn assign_ids(ops: &mut [Operation], warnings: &mut Vec<String>) {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for op in ops.iter() {
        if !op.id.is_empty() {
            *counts.entry(op.id.clone()).or_default() += 1;
        }
    }
    let mut taken: HashSet<String> = ops
        .iter()
        .filter(|o| counts.get(&o.id) == Some(&1))
        .map(|o| o.id.clone())
        .collect();
    let mut missing = 0;
    for op in ops.iter_mut() {
        if !op.id.is_empty() && counts.get(&op.id) == Some(&1) {
            continue;
        }
        let base = if op.id.is_empty() {
            missing += 1;
            synthesize_id(op.method, &op.path)
        } else {
            warnings.push(format!(
                "operationId {:?} is used more than once; made unique",
                op.id
            ));
            op.id.clone()
        };
        let mut id = base.clone();
        let mut n = 1;
        while !taken.insert(id.clone()) {
            n += 1;
            id = format!("{base}_{n}");
        }
        op.id = id;
    }
    if missing > 0 {
        warnings.push(format!(
            "{missing} operations have no operationId; ids were synthesized from method and path"
        ));
    }
}

/// `GET /api/contents/{path}` → `get_api_contents_by_path`.
pub fn synthesize_id(method: Method, path: &str) -> String {
    let mut out = method.path_item_key().to_string();
    for seg in path.split('/').filter(|s| !s.is_empty()) {
        out.push('_');
        let seg = match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name) => format!("by_{name}"),
            None => seg.to_string(),
        };
        let mut last_underscore = true;
        for c in seg.chars() {
            if c.is_ascii_alphanumeric() {
                out.push(c.to_ascii_lowercase());
                last_underscore = false;
            } else if !last_underscore {
                out.push('_');
                last_underscore = true;
            }
        }
        while out.ends_with('_') {
            out.pop();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthesized_ids_are_readable() {
        assert_eq!(
            synthesize_id(Method::Get, "/api/contents/{path}"),
            "get_api_contents_by_path"
        );
        assert_eq!(
            synthesize_id(Method::Delete, "/api/sessions/{session}"),
            "delete_api_sessions_by_session"
        );
        assert_eq!(synthesize_id(Method::Get, "/"), "get");
    }

    #[test]
    fn template_names_are_found() {
        assert_eq!(
            template_names("/compare/{base}...{head}"),
            vec!["base", "head"]
        );
    }
}
