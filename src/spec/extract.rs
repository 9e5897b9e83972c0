//! Extracting the operations of a document: every method of every path item, its parameters
//! (path-level and operation-level merged), request body, responses, security, servers and
//! extensions, with a warning naming where for each thing that had to be skipped or guessed.

use serde_json::{Map, Value, json};

use super::ids::{assign_ids, template_names};
use super::method::Method;
use super::operation::{Dialect, MediaType, Operation, ParamIn, Parameter, RequestBody, Response};
use super::refs::{self, follow};
use super::swagger::{self, strings};
use super::text;

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
        Dialect::Swagger2 => swagger::servers(root),
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
            Dialect::Swagger2 => swagger::body(op, &self.consumes, &body_params, &form_params),
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
            let schema = swagger::param_schema(p);
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
                    part_types: part_types(m.get("encoding")),
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

/// The `contentType` each field of a media type's `encoding` object names (fields without one
/// are left out). The text stays as written; `upstream::upload` reads it.
fn part_types(encoding: Option<&Value>) -> Vec<(String, String)> {
    let Some(Value::Object(fields)) = encoding else {
        return Vec::new();
    };
    fields
        .iter()
        .filter_map(|(name, e)| {
            let ct = e.get("contentType")?.as_str()?.trim();
            (!ct.is_empty()).then(|| (name.clone(), ct.to_string()))
        })
        .collect()
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
