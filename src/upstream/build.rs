//! Building the request for one operation from validated arguments: the server URL (spec
//! server, Swagger `host`/`basePath`, or `--upstream`), path interpolation that cannot change
//! the route, query serialization, the headers an agent may set; the body is `body.rs`'s.
//! Credentials are not part of a [`PreparedRequest`]: they are added when it is sent.

use http::{HeaderName, HeaderValue, Method};
use serde::Serialize;
use serde_json::{Map, Value, json};
use url::Url;

use super::UpstreamError;
use super::body::{Body, body};
use super::config::UpstreamConfig;
use super::encode;
use super::headers;
use super::redact::redact_url;
use super::upload::Uploads;
use crate::spec::{Operation, ParamIn, Spec};

/// The `api_execute` request parts, `{pathParams, query, headers, body, contentType, accept}`:
/// deserialized with the tool's arguments (`tools::args::ExecuteArgs` flattens it), validated
/// there in place against the operation's schema, then built into a request as they are.
/// Serialized (a result's `next`), they leave out what is empty.
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CallArgs {
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub path_params: Map<String, Value>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub query: Map<String, Value>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub headers: Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// The body's media type, one the operation declares (default: its preferred one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// The response media type to ask for, one of the operation's `response_types`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accept: Option<String>,
    /// Bytes for a binary body or multipart file parts (`tools::upload` decodes them); the
    /// body's JSON holds a placeholder where they go.
    #[serde(skip)]
    pub uploads: Uploads,
    /// The credential parameters (`spec::CredentialParam`) a credential configured for this
    /// call stands for (`tools::credentials` decides): never required of the agent, never
    /// taken from it.
    #[serde(skip)]
    pub supplied: Vec<(ParamIn, String)>,
}

impl CallArgs {
    /// Whether a configured credential stands for the parameter `name` in `location` (header
    /// names compared without regard to case).
    pub fn is_supplied(&self, location: ParamIn, name: &str) -> bool {
        self.supplied.iter().any(|(l, n)| {
            *l == location
                && match location {
                    ParamIn::Header => n.eq_ignore_ascii_case(name),
                    _ => n == name,
                }
        })
    }
}

/// The media type without parameters, lower-case: `application/json; charset=utf-8` →
/// `application/json`.
pub(crate) fn media_essence(media_type: &str) -> String {
    media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// A request ready to send, without credentials. Its `Serialize` form is the dry-run view:
/// configured credential headers appear by name with the value `[redacted]`.
#[derive(Clone)]
pub struct PreparedRequest {
    pub(crate) method: Method,
    pub(crate) url: Url,
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
    /// Names of the configured headers `send` adds.
    pub(crate) credential_names: Vec<String>,
    pub(crate) body: Option<Body>,
}

impl PreparedRequest {
    pub fn method(&self) -> &str {
        self.method.as_str()
    }

    /// The full URL (never with user info).
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The dry-run view: `{method, url, headers, body, contentType}`, credentials redacted.
    pub fn view(&self) -> Value {
        let mut headers = Map::new();
        for (n, v) in &self.headers {
            let shown = if v.is_sensitive() {
                "[redacted]".to_string()
            } else {
                String::from_utf8_lossy(v.as_bytes()).into_owned()
            };
            headers.insert(n.as_str().to_string(), Value::String(shown));
        }
        for n in &self.credential_names {
            headers.insert(n.clone(), Value::String("[redacted]".into()));
        }
        let mut view = json!({
            "method": self.method.as_str(),
            "url": redact_url(&self.url),
            "headers": headers,
        });
        if let Some(b) = &self.body {
            view["contentType"] = Value::String(b.content_type.clone());
            view["body"] = b.shown.clone();
        }
        view
    }
}

impl Serialize for PreparedRequest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.view().serialize(s)
    }
}

impl std::fmt::Debug for PreparedRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PreparedRequest {}", self.view())
    }
}

fn invalid(message: impl Into<String>) -> UpstreamError {
    UpstreamError::InvalidArguments(message.into())
}

/// Builds the request for `op` from `args`.
pub(crate) fn prepare(
    cfg: &UpstreamConfig,
    spec: &Spec,
    op: &Operation,
    args: &CallArgs,
) -> Result<PreparedRequest, UpstreamError> {
    let method = Method::from(op.method);
    let (origin, base_path) = server(cfg, spec, op)?;
    let path = interpolate(op, &args.path_params)?;
    let query = query(spec, op, args)?;
    let full_path = match format!("{base_path}{path}") {
        p if p.is_empty() => "/".to_string(),
        p => p,
    };
    let mut text = format!("{origin}{full_path}");
    if !query.is_empty() {
        text.push('?');
        text.push_str(&query);
    }
    let url =
        Url::parse(&text).map_err(|e| invalid(format!("the request URL is not valid: {e}")))?;
    // Last line of defence: the URL parser must not have normalized anything away (dot
    // segments), and the request must stay on the server's origin.
    let expected_origin = Url::parse(&origin).map(|u| u.origin()).ok();
    if url.path() != full_path || Some(url.origin()) != expected_origin {
        return Err(invalid(
            "the path parameters would change the route of the request; pass plain values",
        ));
    }
    let mut headers = headers(cfg, op, args)?;
    let body = body(
        spec,
        op,
        args.body.as_ref(),
        args.content_type.as_deref(),
        &args.uploads,
    )?;
    if let Some(b) = &body {
        let ct = HeaderValue::from_str(&b.content_type)
            .map_err(|_| UpstreamError::Other(format!("bad content type {:?}", b.content_type)))?;
        headers.retain(|(n, _)| n != http::header::CONTENT_TYPE);
        headers.push((http::header::CONTENT_TYPE, ct));
    }
    if let Some(accept) = &args.accept {
        if !op
            .response_types
            .iter()
            .any(|t| media_essence(t) == media_essence(accept))
        {
            return Err(invalid(format!(
                "accept: {} does not answer in {accept:?}",
                op.key()
            )));
        }
        let value = HeaderValue::from_str(accept)
            .map_err(|_| invalid(format!("accept: {accept:?} is not a valid header value")))?;
        headers.retain(|(n, _)| n != http::header::ACCEPT);
        headers.push((http::header::ACCEPT, value));
    }
    if !headers.iter().any(|(n, _)| n == http::header::ACCEPT) {
        headers.push((
            http::header::ACCEPT,
            HeaderValue::from_static("application/json, */*;q=0.8"),
        ));
    }
    Ok(PreparedRequest {
        method,
        url,
        headers,
        credential_names: cfg.headers.iter().map(|(n, _)| n.to_string()).collect(),
        body,
    })
}

/// Every origin the operations of `spec` send to under `cfg` (operations whose server is not
/// usable are left out): what a reload compares, so that a document that moves its servers
/// cannot take configured or stored credentials to another host.
pub fn server_origins(cfg: &UpstreamConfig, spec: &Spec) -> std::collections::BTreeSet<String> {
    spec.operations
        .iter()
        .filter_map(|op| server(cfg, spec, op).ok())
        .map(|(origin, _)| origin)
        .collect()
}

/// The URL `op`'s calls go under (origin and base path, no user info, no trailing `/`):
/// `--upstream` with the spec server's path where it applies, else the spec's server. `None`
/// when the spec names no usable server and there is no `--upstream`.
pub fn server_url(cfg: &UpstreamConfig, spec: &Spec, op: &Operation) -> Option<String> {
    server(cfg, spec, op)
        .ok()
        .map(|(origin, path)| format!("{origin}{path}"))
}

/// Every URL the operations' calls go under (see [`server_url`]), each once, in order.
pub fn server_urls(cfg: &UpstreamConfig, spec: &Spec) -> std::collections::BTreeSet<String> {
    spec.operations
        .iter()
        .filter_map(|op| server_url(cfg, spec, op))
        .collect()
}

/// The origin (`scheme://host:port`, no user info) and base path (no trailing `/`) for `op`.
///
/// The spec's first server applies (operation, path item, then document level; Swagger 2.0
/// `schemes`/`host`/`basePath` already converted by the loader). A relative server URL
/// resolves against the URL the spec was loaded from. `--upstream` replaces scheme, host and
/// port; its own path, if it has one other than `/`, replaces the server's path, otherwise
/// the server's path is kept (`--upstream http://localhost:8080` with server
/// `https://api.example.com/v2` sends to `http://localhost:8080/v2/...`).
fn server(
    cfg: &UpstreamConfig,
    spec: &Spec,
    op: &Operation,
) -> Result<(String, String), UpstreamError> {
    let declared = op
        .servers
        .first()
        .or_else(|| spec.servers.first())
        .map(String::as_str)
        .unwrap_or("/");
    // `{variable}`s without a default are left in the URL by the loader: not a usable host.
    let absolute = Url::parse(declared)
        .ok()
        .filter(|u| u.has_host() && !declared.contains(['{', '}']));
    if let Some(u) = &absolute
        && !matches!(u.scheme(), "http" | "https")
    {
        return Err(UpstreamError::NoServer(format!(
            "the spec's server {declared:?} is not an http(s) URL; pass --upstream URL"
        )));
    }
    // An absolute server URL that does not parse or holds an unfilled `{variable}`:
    // usable only for its path, under `--upstream`.
    let unparsable = absolute.is_none() && declared.contains("://");
    if unparsable && cfg.base_url.is_none() {
        return Err(UpstreamError::NoServer(format!(
            "the spec's server {declared:?} is not a valid URL; pass --upstream URL"
        )));
    }
    let declared = match declared.split_once("://") {
        Some((_, rest)) if unparsable => rest.find('/').map_or("/", |i| &rest[i..]),
        _ => declared,
    };
    let server_path = |u: &Url| u.path().trim_end_matches('/').to_string();
    if let Some(upstream) = &cfg.base_url {
        let own = upstream.path().trim_end_matches('/');
        let path = if !own.is_empty() {
            own.to_string()
        } else if let Some(u) = &absolute {
            server_path(u)
        } else {
            // A relative server (`/api/v1`, `api/v1`): its path under the upstream.
            let placeholder = Url::parse("http://placeholder.invalid/")
                .map_err(|e| UpstreamError::Other(e.to_string()))?;
            let joined = placeholder
                .join(declared)
                .map_err(|e| UpstreamError::NoServer(format!("server {declared:?}: {e}")))?;
            server_path(&joined)
        };
        return Ok((origin_text(upstream), path));
    }
    let resolved = match absolute {
        Some(u) => u,
        None => {
            let base = Url::parse(&spec.source)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https"));
            let Some(base) = base else {
                return Err(UpstreamError::NoServer(format!(
                    "the spec's server {declared:?} is relative and the spec was not loaded \
                     from a URL; pass --upstream URL (for example --upstream https://api.example.com)"
                )));
            };
            base.join(declared)
                .map_err(|e| UpstreamError::NoServer(format!("server {declared:?}: {e}")))?
        }
    };
    Ok((origin_text(&resolved), server_path(&resolved)))
}

/// `scheme://host:port` of `url`, never its user info: credentials come only from the
/// configured headers (`--upstream` user info is one of them), never from a URL, so neither the
/// user info of the URL the spec was loaded from nor any in a spec's server reaches the API.
fn origin_text(url: &Url) -> String {
    let mut bare = url.clone();
    let _ = bare.set_username("");
    let _ = bare.set_password(None);
    bare[..url::Position::BeforePath].to_string()
}

/// The operation's path with its parameters encoded. Values cannot add segments, a query or a
/// fragment (everything but unreserved characters is percent-encoded), and a value that is or
/// contains a `.` / `..` segment is refused outright, since upstreams that decode `%2F` before
/// routing would otherwise see `../`.
fn interpolate(op: &Operation, values: &Map<String, Value>) -> Result<String, UpstreamError> {
    for name in values.keys() {
        if !op
            .parameters
            .iter()
            .any(|p| p.location == ParamIn::Path && &p.name == name)
        {
            return Err(invalid(format!(
                "pathParams.{name}: {} has no path parameter {name:?}",
                op.key()
            )));
        }
    }
    let mut out = String::new();
    let mut rest = op.path.as_str();
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        out.push_str(&encode::enc_literal(&rest[..start]));
        let name = &rest[start + 1..start + len];
        let param = op
            .parameters
            .iter()
            .find(|p| p.location == ParamIn::Path && p.name == name);
        let value = values
            .get(name)
            .filter(|v| !v.is_null())
            .ok_or_else(|| invalid(format!("missing path parameter pathParams.{name}")))?;
        check_dot_segments(name, value)?;
        let (style, explode) = param
            .map(|p| (p.style.as_str(), p.explode))
            .unwrap_or(("simple", false));
        let rendered = encode::path_value(style, explode, name, value);
        if rendered.is_empty() {
            return Err(invalid(format!(
                "pathParams.{name} is empty; an empty path segment would change the route"
            )));
        }
        out.push_str(&rendered);
        rest = &rest[start + len + 1..];
    }
    out.push_str(&encode::enc_literal(rest));
    if out
        .split('/')
        .any(|seg| matches!(seg, "." | "..") || seg.eq_ignore_ascii_case("%2e%2e"))
    {
        return Err(invalid(
            "a path parameter is a dot segment, which would change the route",
        ));
    }
    Ok(out)
}

fn check_dot_segments(name: &str, value: &Value) -> Result<(), UpstreamError> {
    let texts: Vec<String> = match value {
        Value::Array(items) => items.iter().map(encode::scalar).collect(),
        Value::Object(m) => m
            .iter()
            .flat_map(|(k, v)| [k.clone(), encode::scalar(v)])
            .collect(),
        v => vec![encode::scalar(v)],
    };
    for t in texts {
        if t.split(['/', '\\'])
            .any(|piece| matches!(piece, "." | ".."))
        {
            return Err(invalid(format!(
                "pathParams.{name}: {t:?} contains a '.' or '..' segment; path parameters are \
                 single values and cannot move to another route"
            )));
        }
    }
    Ok(())
}

/// The property names an object schema declares (through `$ref`s and `allOf`).
fn declared_properties<'a>(spec: &'a Spec, schema: &'a Value, out: &mut Vec<&'a str>, depth: u8) {
    let schema = spec.follow(schema);
    if let Some(Value::Object(props)) = schema.get("properties") {
        out.extend(props.keys().map(String::as_str));
    }
    if depth < 8
        && let Some(Value::Array(parts)) = schema.get("allOf")
    {
        for part in parts {
            declared_properties(spec, part, out, depth + 1);
        }
    }
}

/// The encoded query string, in the operation's parameter order. An object sent as
/// `style: form, explode: true` becomes one query parameter per key: only keys its schema
/// declares pass, so no name the operation does not know (`api_key`, `_method`) reaches the URL.
/// A parameter a configured credential stands for is neither required nor taken.
fn query(spec: &Spec, op: &Operation, args: &CallArgs) -> Result<String, UpstreamError> {
    let values = &args.query;
    if let Some(name) = values.keys().find(|k| args.is_supplied(ParamIn::Query, k)) {
        return Err(supplied(op, "query", name));
    }
    let declared = |name: &str| {
        op.parameters
            .iter()
            .find(|p| p.location == ParamIn::Query && p.name == name)
    };
    if let Some(name) = values.keys().find(|k| declared(k).is_none()) {
        return Err(invalid(format!(
            "query.{name}: {} has no query parameter {name:?}",
            op.key()
        )));
    }
    let mut pairs = Vec::new();
    for p in op
        .parameters
        .iter()
        .filter(|p| p.location == ParamIn::Query)
    {
        if let Some(v) = values.get(&p.name) {
            if let Value::Object(fields) = v
                && p.explode
                && p.style == "form"
            {
                let mut allowed = Vec::new();
                declared_properties(spec, &p.schema, &mut allowed, 0);
                if let Some(key) = fields.keys().find(|k| !allowed.contains(&k.as_str())) {
                    return Err(invalid(format!(
                        "query.{}.{key}: {} sends the fields of {} as query parameters of their \
                         own, and its schema declares no field {key:?} (declared: {})",
                        p.name,
                        op.key(),
                        p.name,
                        if allowed.is_empty() {
                            "none".to_string()
                        } else {
                            allowed.join(", ")
                        }
                    )));
                }
            }
            pairs.extend(encode::query_pairs(&p.style, p.explode, &p.name, v));
        } else if p.required && !args.is_supplied(ParamIn::Query, &p.name) {
            return Err(invalid(format!(
                "missing required query parameter query.{}",
                p.name
            )));
        }
    }
    Ok(pairs.join("&"))
}

/// The agent's value for a parameter a configured credential stands for: refused.
fn supplied(op: &Operation, section: &str, name: &str) -> UpstreamError {
    invalid(format!(
        "{section}.{name}: {} gets this credential from the server's configured credentials; \
         it cannot be set by the agent, leave it out",
        op.key()
    ))
}

/// The headers the agent set, checked: declared by the operation, not a credential, not
/// identity or connection headers.
fn headers(
    cfg: &UpstreamConfig,
    op: &Operation,
    args: &CallArgs,
) -> Result<Vec<(HeaderName, HeaderValue)>, UpstreamError> {
    let values = &args.headers;
    let declared: Vec<_> = op
        .parameters
        .iter()
        .filter(|p| p.location == ParamIn::Header)
        .collect();
    let mut out = Vec::new();
    for (name, value) in values {
        let lower = name.to_ascii_lowercase();
        if !headers::agent_may_set(&lower) {
            return Err(invalid(format!(
                "headers.{name}: apigate never forwards a {name} header from the agent; \
                 upstream credentials come from the server's configuration (--upstream-header)"
            )));
        }
        if cfg.is_credential(&lower) {
            return Err(invalid(format!(
                "headers.{name}: this header is set by the server's configuration and cannot \
                 be overridden"
            )));
        }
        if args.is_supplied(ParamIn::Header, name) {
            return Err(supplied(op, "headers", name));
        }
        let Some(param) = declared.iter().find(|p| p.name.eq_ignore_ascii_case(name)) else {
            let names: Vec<&str> = declared.iter().map(|p| p.name.as_str()).collect();
            return Err(invalid(format!(
                "headers.{name}: {} does not declare this header (declared: {})",
                op.key(),
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )));
        };
        if value.is_null() {
            continue;
        }
        let text = match value {
            Value::Array(items) => items
                .iter()
                .map(encode::scalar)
                .collect::<Vec<_>>()
                .join(","),
            Value::Object(m) => m
                .iter()
                .map(|(k, v)| {
                    let v = encode::scalar(v);
                    if param.explode {
                        format!("{k}={v}")
                    } else {
                        format!("{k},{v}")
                    }
                })
                .collect::<Vec<_>>()
                .join(","),
            v => encode::scalar(v),
        };
        let header = HeaderName::from_bytes(lower.as_bytes())
            .map_err(|_| invalid(format!("headers.{name}: not a valid header name")))?;
        let value = HeaderValue::from_str(&text).map_err(|_| {
            invalid(format!(
                "headers.{name}: the value has characters a header cannot carry (line breaks, \
                 control characters)"
            ))
        })?;
        out.push((header, value));
    }
    for p in &declared {
        let given = values.keys().any(|k| k.eq_ignore_ascii_case(&p.name));
        if p.required
            && !given
            && !cfg.is_credential(&p.name)
            && !args.is_supplied(ParamIn::Header, &p.name)
        {
            let lower = p.name.to_ascii_lowercase();
            return Err(if headers::is_identity(&lower) {
                UpstreamError::MissingCredential(format!(
                    "{} requires the {} header, which only the server's configuration may set: \
                     start apigate with --upstream-header \"{}: …\"",
                    op.key(),
                    p.name,
                    p.name
                ))
            } else {
                invalid(format!(
                    "missing required header headers.{} (pass it in `headers`; if it is a \
                     credential, the operator configures it with --upstream-header)",
                    p.name
                ))
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_with_server(url: &str) -> Spec {
        let doc = json!({
            "openapi": "3.0.0", "info": {"title": "t", "version": "1"},
            "servers": [{"url": url}],
            "paths": {"/x": {"get": {"operationId": "x", "responses": {"200": {"description": "ok"}}}}}
        });
        Spec::from_bytes(doc.to_string().as_bytes(), "t.json").unwrap()
    }

    fn resolve(server_url: &str, upstream: Option<&str>) -> Result<String, UpstreamError> {
        let spec = spec_with_server(server_url);
        let cfg = UpstreamConfig::from_flags(upstream, &[], None).unwrap();
        let op = spec.get("x").unwrap();
        prepare(&cfg, &spec, op, &CallArgs::default()).map(|r| r.url.to_string())
    }

    #[test]
    fn servers_and_upstream_combine() {
        let ok = |s: &str, u: Option<&str>| resolve(s, u).unwrap();
        assert_eq!(
            ok("https://api.example.com/v2/", None),
            "https://api.example.com/v2/x"
        );
        assert_eq!(
            ok("https://api.example.com", None),
            "https://api.example.com/x"
        );
        assert_eq!(
            ok("https://api.example.com/v2", Some("http://127.0.0.1:9")),
            "http://127.0.0.1:9/v2/x"
        );
        assert_eq!(
            ok("https://api.example.com/v2", Some("http://127.0.0.1:9/")),
            "http://127.0.0.1:9/v2/x"
        );
        assert_eq!(
            ok("https://api.example.com/v2", Some("http://h/mock/")),
            "http://h/mock/x"
        );
        assert_eq!(ok("/api/v1", Some("http://h")), "http://h/api/v1/x");
        assert_eq!(ok("api/v1", Some("http://h")), "http://h/api/v1/x");
        assert_eq!(
            ok("https://{region}.example.com/v3", Some("http://h")),
            "http://h/v3/x"
        );
        for (server, upstream) in [
            ("/api/v1", None),
            ("https://{region}.example.com/v3", None),
            ("ftp://files.example.com", None),
        ] {
            let e = resolve(server, upstream).unwrap_err();
            assert!(matches!(e, UpstreamError::NoServer(_)), "{server}: {e:?}");
            assert!(e.to_string().contains("--upstream"), "{e}");
        }
    }

    #[test]
    fn the_agent_may_not_set_identity_or_connection_headers() {
        for h in [
            "Authorization",
            "cookie",
            "Host",
            "Content-Length",
            "Transfer-Encoding",
            "expect",
            " TE ",
        ] {
            assert!(!headers::agent_may_set(h), "{h}");
        }
        for h in ["X-Request-Id", "Accept", "If-None-Match", "Idempotency-Key"] {
            assert!(headers::agent_may_set(h), "{h}");
        }
    }

    #[test]
    fn dry_run_view_hides_user_info() {
        let spec = spec_with_server("https://api.example.com");
        let cfg = UpstreamConfig::from_flags(
            Some("https://user:hunter2hunter2@api.example.com"),
            &["X-Api-Key: k_0123456789".to_string()],
            None,
        )
        .unwrap();
        let op = spec.get("x").unwrap();
        let req = prepare(&cfg, &spec, op, &CallArgs::default()).unwrap();
        let view = req.view();
        assert_eq!(view["url"], "https://api.example.com/x");
        assert_eq!(view["headers"]["x-api-key"], "[redacted]");
        assert!(!format!("{req:?}").contains("hunter2"));
    }
}
