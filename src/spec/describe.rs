//! `api_schema`'s view of one operation: what an agent needs to build a call, `$ref`s inlined
//! within a size budget. By default ([`Detail::Compact`]) the view is short: each description
//! its first sentence, the success body an outline of its field names ([`Outline`]), every
//! other status one line, the media types beyond the default at most three, and a `more` line
//! saying how to get the rest. [`Detail::Full`] shows every description whole, the response
//! schemas and every media type; [`part`] shows one part whole (a parameter,
//! `requestBody[.field…]`, `responses.STATUS[.field…]`, `accept`, `description`), which is
//! what `api_schema`'s `detail` argument names.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::Spec;
use super::method::Method;
use super::operation::{Operation, Parameter};
use super::refs::InlineBudget;

/// Output beyond this many bytes is retried with shallower inlining.
const TARGET_BYTES: usize = 48 * 1024;
const MAX_DESCRIPTION_CHARS: usize = 2000;
/// The compact view's descriptions: the first sentence, at most this long.
const FIRST_SENTENCE_CHARS: usize = 160;
/// The compact view's line for a status without a body to outline.
const STATUS_CHARS: usize = 80;
/// The compact view's media types beyond the default.
const MAX_ACCEPT: usize = 3;
/// An outline's field names: at the top of a body, and inside an envelope's objects and lists.
const OUTLINE_FIELDS: usize = 20;
const NESTED_OUTLINE_FIELDS: usize = 12;
/// An object of at most this many fields is an envelope (a list's `{data, has_more, url}`, a
/// Kubernetes object's `{apiVersion, kind, metadata, spec, status}`): the outline shows the
/// fields of its objects and lists too.
const ENVELOPE_FIELDS: usize = 8;
/// The most segments a `detail` path may have.
pub const MAX_DETAIL_SEGMENTS: usize = 16;

/// How much `api_schema` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Detail {
    /// First sentences, the success body's field names, the other statuses in a line each.
    #[default]
    Compact,
    /// Every description whole, every success response's schema inlined, every media type.
    Full,
}

/// `api_schema`'s view of one operation, in the order an agent reads it. Schemas stay JSON:
/// they are the document's own, inlined.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationView {
    pub operation_id: String,
    pub method: Method,
    pub path: String,
    /// Present, and true, when the call may change data (any method but GET, HEAD and
    /// OPTIONS).
    #[serde(default, skip_serializing_if = "is_false")]
    pub mutating: bool,
    /// Present, and true, when the operation is deprecated.
    #[serde(default, skip_serializing_if = "is_false")]
    pub deprecated: bool,
    /// The operation's tags (the full view).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    pub summary: Option<String>,
    pub description: Option<String>,
    /// The server the spec names for the operation (the full view; calls go where the
    /// operator points them).
    pub server_url: Option<String>,
    pub parameters: Vec<ParameterView>,
    pub request_body: Option<BodyView>,
    /// Status → one line (its description); a success with a body: `{description?,
    /// contentType?, fields}` (compact: `fields` outlines the body, `{id, title, user{},
    /// labels[], +12 more}`, `[{…}]` for a list, or "as 200") or, in the full view, `{…,
    /// schema}`.
    pub responses: Map<String, Value>,
    /// The response media types `api_execute`'s `accept` may ask for (compact: at most three
    /// that are not JSON).
    pub accept: Option<Vec<String>>,
    /// Compact: something is shortened; the `detail` values that show it whole (`detail:
    /// "full" or "limit" or "responses.200"`).
    pub more: Option<String>,
    pub idempotency_key: Option<String>,
    /// Which credentials the operation accepts, and whether apigate supplies them.
    pub security: Option<Value>,
    pub required_features: Option<Vec<String>>,
    /// The first success body's fields (for the `select` example); not shown as such.
    #[serde(skip)]
    pub outline: Option<Outline>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One parameter of [`OperationView`].
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParameterView {
    pub name: String,
    /// `path`, `query`, `header` or `cookie`.
    #[serde(rename = "in")]
    pub location: &'static str,
    /// Present, and true, when the parameter is required.
    #[serde(default, skip_serializing_if = "is_false")]
    pub required: bool,
    pub schema: Value,
    pub description: Option<String>,
    pub deprecated: Option<bool>,
    /// How a list or an object is written in the query (scalars need neither).
    pub style: Option<String>,
    pub explode: Option<bool>,
}

/// The request body of [`OperationView`].
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BodyView {
    pub required: bool,
    pub content_type: Option<String>,
    pub schema: Option<Value>,
    pub description: Option<String>,
    /// The other media types the body may be sent as (`api_execute`'s `contentType`).
    pub other_content_types: Option<Vec<String>>,
}

/// The field names of a response body, as the compact view shows them: `{id, title, user{},
/// labels[], +12 more}`, `[{…}]` for a list, an envelope's objects and lists with their own
/// fields (`{data[{id, amount, …}], has_more, url}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outline {
    /// The body is a list of these.
    pub list: bool,
    /// The body is no object: its type (`string`, `array of string`).
    pub scalar: Option<String>,
    /// Identifiers and names first, links last.
    pub fields: Vec<FieldOutline>,
    /// Fields not shown.
    pub more: usize,
}

/// One field of an [`Outline`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldOutline {
    pub name: String,
    pub kind: FieldKind,
    /// In an envelope: the object's (or the list's items') own fields.
    pub fields: Option<Box<Outline>>,
}

/// What a field holds, as an [`Outline`] marks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    Scalar,
    /// `name{}`.
    Object,
    /// `name[]`.
    List,
}

impl std::fmt::Display for Outline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(s) = &self.scalar {
            return if self.list {
                write!(f, "[{s}]")
            } else {
                f.write_str(s)
            };
        }
        if self.list {
            f.write_str("[")?;
        }
        f.write_str("{")?;
        for (i, field) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&field.name)?;
            // Fields shaped like an earlier one (Spotify's search: albums, artists, tracks, …
            // each a page) say so instead of repeating it.
            let same = field.fields.as_ref().and_then(|inner| {
                self.fields[..i]
                    .iter()
                    .find(|e| e.kind == field.kind && e.fields.as_ref() == Some(inner))
            });
            match (field.kind, &field.fields) {
                (FieldKind::Scalar, _) => {}
                (FieldKind::Object, None) => f.write_str("{}")?,
                (FieldKind::List, None) => f.write_str("[]")?,
                (FieldKind::Object, Some(_)) if let Some(e) = same => {
                    write!(f, "{{as {}}}", e.name)?
                }
                (FieldKind::List, Some(_)) if let Some(e) = same => write!(f, "[as {}]", e.name)?,
                (FieldKind::Object, Some(inner)) => write!(f, "{inner}")?,
                (FieldKind::List, Some(inner)) => {
                    let mut items = (**inner).clone();
                    items.list = true;
                    write!(f, "{items}")?
                }
            }
        }
        if self.more > 0 {
            let sep = if self.fields.is_empty() { "" } else { ", " };
            write!(f, "{sep}+{} more", self.more)?;
        }
        f.write_str("}")?;
        if self.list {
            f.write_str("]")?;
        }
        Ok(())
    }
}

pub fn describe(spec: &Spec, op: &Operation, detail: Detail) -> OperationView {
    // (request depth, response depth): deep enough to build a call, responses kept short.
    let budgets = [(8, 2), (5, 1), (3, 1), (2, 0)];
    for (req, resp) in budgets {
        let out = render(spec, op, req, resp, detail);
        if serde_json::to_vec(&out).map_or(0, |b| b.len()) <= TARGET_BYTES {
            return out;
        }
    }
    render(spec, op, 1, 0, detail)
}

/// Nested descriptions longer than this are cut to their first sentence in the compact view.
const NESTED_DESCRIPTION_CHARS: usize = 160;
/// Descriptions of fields two levels down (`metadata.name`) keep at most this much.
const DEEP_DESCRIPTION_CHARS: usize = 80;
/// Fields this many levels down (`metadata.initializers.pending`) show no description in the
/// compact view: their names, types, enums, formats, limits and `required` remain.
const NO_DESCRIPTION_DEPTH: usize = 3;

/// An inlined schema as the view shows it. In the compact view descriptions get shorter with
/// depth (the first sentence at the top, at most 80 characters two levels down, none below),
/// and vendor extensions (`x-…`) and titles (display names) are left out; names, types, enums,
/// formats, defaults, examples, limits and `required` are untouched. [`Detail::Full`] shows
/// the schema as inlined. `shortened` is set when the compact view left something out.
fn schema_view(mut schema: Value, detail: Detail, shortened: &mut bool) -> Value {
    if detail == Detail::Compact {
        compact(&mut schema, 0, shortened);
    }
    schema
}

/// `depth` counts `properties` levels: a body's own fields are at depth 1. Array items and
/// `allOf`/`anyOf`/`oneOf` branches stay at their parent's depth.
fn compact(schema: &mut Value, depth: usize, shortened: &mut bool) {
    let Value::Object(map) = schema else {
        if let Value::Array(items) = schema {
            items.iter_mut().for_each(|s| compact(s, depth, shortened));
        }
        return;
    };
    let is_array = map.get("type").and_then(Value::as_str) == Some("array");
    // Vendor extensions, and `uniqueItems` where there are no items (Kubernetes puts it on
    // every string parameter), say nothing about how to build the request; a title is a
    // display name.
    let before = map.len();
    map.retain(|k, _| !k.starts_with("x-") && k != "title" && (k != "uniqueItems" || is_array));
    *shortened |= map.len() < before;
    if let Some(Value::String(text)) = map.get_mut("description") {
        let short = match depth {
            d if d >= NO_DESCRIPTION_DEPTH => None,
            d if d >= 2 => Some(shorten(text, DEEP_DESCRIPTION_CHARS)),
            _ => Some(shorten(text, NESTED_DESCRIPTION_CHARS)),
        };
        match short {
            None => {
                map.remove("description");
                *shortened = true;
            }
            Some(s) => {
                *shortened |= s != text.trim();
                *text = s;
            }
        }
    }
    for (k, child) in map.iter_mut() {
        match k.as_str() {
            "properties" | "patternProperties" => {
                if let Value::Object(fields) = child {
                    fields
                        .values_mut()
                        .for_each(|f| compact(f, depth + 1, shortened));
                }
            }
            "additionalProperties" => compact(child, depth + 1, shortened),
            "items" | "allOf" | "anyOf" | "oneOf" | "not" => compact(child, depth, shortened),
            _ => {}
        }
    }
}

/// The first sentence of `text`, at most `max` characters.
fn shorten(text: &str, max: usize) -> String {
    let end = text
        .char_indices()
        .find(|&(i, c)| {
            c == '.' && text[i + 1..].starts_with(|n: char| n.is_whitespace()) || c == '\n'
        })
        .map_or(text.len(), |(i, c)| i + c.len_utf8());
    let sentence = text[..end].trim();
    if sentence.chars().count() <= max {
        let cut = sentence.len() < text.trim().len();
        return if cut {
            format!("{sentence} …")
        } else {
            sentence.to_string()
        };
    }
    let mut s: String = sentence.chars().take(max).collect();
    s.push('…');
    s
}

/// `string`, `integer (int64)`, `array of object`, `string|null`, `object (Pet)`, …
fn type_label(schema: &Value) -> String {
    if let Some(Value::String(name)) = schema
        .get("$truncated")
        .or_else(|| schema.get("$recursive"))
    {
        return format!("object ({name})");
    }
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|"),
        _ if schema.get("properties").is_some() => "object".into(),
        _ if schema.get("items").is_some() => "array".into(),
        _ => {
            let alternatives = ["anyOf", "oneOf", "allOf"]
                .iter()
                .find_map(|k| schema.get(*k).and_then(Value::as_array));
            match alternatives {
                Some(list) => list.iter().map(type_label).collect::<Vec<_>>().join(" or "),
                None => "any".into(),
            }
        }
    };
    if kind == "array"
        && let Some(items) = schema.get("items")
    {
        return format!("array of {}", type_label(items));
    }
    match schema.get("format").and_then(Value::as_str) {
        Some(f) => format!("{kind} ({f})"),
        None => kind,
    }
}

fn cut(text: &str) -> String {
    if text.chars().count() <= MAX_DESCRIPTION_CHARS {
        return text.to_string();
    }
    let mut s: String = text.chars().take(MAX_DESCRIPTION_CHARS).collect();
    s.push('…');
    s
}

/// Whether a media type is JSON (what apigate asks for by default).
fn is_json(media: &str) -> bool {
    let essence = media.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json") || essence.ends_with("+json")
}

/// The properties of `schema`, each name once, `$ref`s followed: its own and its `allOf`
/// branches'; without any, its `anyOf`/`oneOf` alternatives' too.
fn properties<'a>(spec: &'a Spec, schema: &'a Value) -> Vec<(&'a str, &'a Value)> {
    fn collect<'a>(
        spec: &'a Spec,
        schema: &'a Value,
        keys: &[&str],
        out: &mut Vec<(&'a str, &'a Value)>,
        depth: usize,
    ) {
        if depth > 4 {
            return;
        }
        let s = spec.follow(schema);
        if let Some(Value::Object(p)) = s.get("properties") {
            for (name, field) in p {
                if !out.iter().any(|(n, _)| n == name) {
                    out.push((name.as_str(), field));
                }
            }
        }
        for key in keys {
            if let Some(Value::Array(branches)) = s.get(*key) {
                for b in branches {
                    collect(spec, b, keys, out, depth + 1);
                }
            }
        }
    }
    let mut out = Vec::new();
    collect(spec, schema, &["allOf"], &mut out, 0);
    if out.is_empty() {
        collect(spec, schema, &["allOf", "anyOf", "oneOf"], &mut out, 0);
    }
    out
}

/// What `schema` holds, `$ref`s followed: a list, an object, or a scalar.
fn kind(spec: &Spec, schema: &Value, depth: usize) -> FieldKind {
    let s = spec.follow(schema);
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if types.contains(&"array") || s.get("items").is_some() {
        return FieldKind::List;
    }
    if types.contains(&"object") || s.get("properties").is_some() || s.get("allOf").is_some() {
        return FieldKind::Object;
    }
    if !types.is_empty() || depth > 4 {
        return FieldKind::Scalar;
    }
    // `anyOf`/`oneOf`: what the alternatives (other than null) hold, an object before a list.
    let alternatives = ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| s.get(*k).and_then(Value::as_array))
        .flatten()
        .map(|b| kind(spec, b, depth + 1));
    alternatives.fold(FieldKind::Scalar, |k, b| match (k, b) {
        (FieldKind::Object, _) | (_, FieldKind::Object) => FieldKind::Object,
        (FieldKind::List, _) | (_, FieldKind::List) => FieldKind::List,
        _ => FieldKind::Scalar,
    })
}

/// Where a field goes in an outline: identifiers and names first, links last, the rest in the
/// document's order.
fn rank(name: &str, schema: &Value) -> u8 {
    const FIRST: [&str; 6] = ["id", "number", "name", "title", "status", "state"];
    let link = matches!(name, "url" | "href" | "uri")
        || name.ends_with("_url")
        || name.ends_with("_uri")
        || matches!(
            schema.get("format").and_then(Value::as_str),
            Some("uri" | "url")
        );
    if FIRST.contains(&name) {
        0
    } else if link {
        2
    } else {
        1
    }
}

/// The outline of a body of schema `schema`: at most `cap` field names; an envelope's
/// (`envelope`: this is the body's top) objects and lists with their own fields.
fn outline(spec: &Spec, schema: &Value, cap: usize, envelope: bool) -> Outline {
    let s = spec.follow(schema);
    let label = || Outline {
        list: false,
        scalar: Some(type_label(&spec.inline(s, InlineBudget { depth: 1 }))),
        fields: Vec::new(),
        more: 0,
    };
    if kind(spec, s, 0) == FieldKind::List {
        let Some(items) = s.get("items").map(|i| spec.follow(i)) else {
            return label();
        };
        // A list of lists is labelled (`array of array of string`), not walked.
        if !items.is_object() || kind(spec, items, 0) == FieldKind::List {
            return label();
        }
        let mut o = outline(spec, items, cap, envelope);
        o.list = true;
        return o;
    }
    let mut props = properties(spec, s);
    if props.is_empty() {
        return label();
    }
    let wrap = envelope && props.len() <= ENVELOPE_FIELDS;
    props.sort_by_key(|(name, field)| rank(name, spec.follow(field)));
    let more = props.len().saturating_sub(cap);
    let fields = props
        .into_iter()
        .take(cap)
        .map(|(name, field)| {
            let kind = kind(spec, field, 0);
            let inner = (wrap && kind != FieldKind::Scalar)
                .then(|| outline(spec, field, NESTED_OUTLINE_FIELDS, false))
                .filter(|o| o.scalar.is_none())
                .map(|mut o| {
                    o.list = false;
                    Box::new(o)
                });
            FieldOutline {
                name: name.to_string(),
                kind,
                fields: inner,
            }
        })
        .collect();
    Outline {
        list: false,
        scalar: None,
        fields,
        more,
    }
}

/// One parameter as the view shows it.
fn parameter_view(
    spec: &Spec,
    p: &Parameter,
    budget: InlineBudget,
    detail: Detail,
    shortened: &mut bool,
) -> ParameterView {
    let schema = schema_view(spec.inline(&p.schema, budget), detail, shortened);
    // `style` and `explode` say how a list or an object is written; a scalar is written as is.
    let scalar = matches!(
        schema.get("type").and_then(Value::as_str),
        Some("string" | "integer" | "number" | "boolean")
    );
    let styled =
        p.location == super::ParamIn::Query && (p.style != "form" || !p.explode) && !scalar;
    ParameterView {
        name: p.name.clone(),
        location: p.location.as_str(),
        required: p.required,
        schema,
        description: p.description.as_deref().map(|d| text(d, detail, shortened)),
        deprecated: p.deprecated.then_some(true),
        style: styled.then(|| p.style.clone()),
        explode: styled.then_some(p.explode),
    }
}

/// A description as the view shows it: its first sentence in the compact view.
fn text(d: &str, detail: Detail, shortened: &mut bool) -> String {
    match detail {
        Detail::Full => cut(d),
        Detail::Compact => {
            let s = shorten(d, FIRST_SENTENCE_CHARS);
            *shortened |= s != d.trim();
            s
        }
    }
}

/// The request body as the view shows it; the compact view leaves out one that takes nothing
/// (Stripe gives every GET an optional empty form body).
fn body_view(
    spec: &Spec,
    op: &Operation,
    budget: InlineBudget,
    detail: Detail,
    shortened: &mut bool,
) -> Option<BodyView> {
    let body = op.request_body.as_ref()?;
    let preferred = body.preferred();
    let empty = preferred.is_none_or(|m| {
        let s = spec.follow(&m.schema);
        s.get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.is_empty())
            && s.get("additionalProperties").is_none_or(|a| a == false)
    });
    if detail == Detail::Compact && empty && !body.required {
        *shortened = true;
        return None;
    }
    let others: Vec<String> = body
        .content
        .iter()
        .map(|m| m.content_type.as_str())
        .filter(|ct| Some(*ct) != preferred.map(|m| m.content_type.as_str()))
        .map(str::to_string)
        .collect();
    Some(BodyView {
        required: body.required,
        content_type: preferred.map(|m| m.content_type.clone()),
        schema: preferred.map(|m| schema_view(spec.inline(&m.schema, budget), detail, shortened)),
        description: body
            .description
            .as_deref()
            .map(|d| text(d, detail, shortened)),
        // api_execute's `contentType` picks one instead of the first.
        other_content_types: (!others.is_empty()).then_some(others),
    })
}

fn is_success(op: &Operation, status: &str) -> bool {
    status.starts_with('2') || status == "default" && op.responses.len() == 1
}

fn render(
    spec: &Spec,
    op: &Operation,
    req_depth: usize,
    resp_depth: usize,
    detail: Detail,
) -> OperationView {
    let req = InlineBudget { depth: req_depth };
    let compact = detail == Detail::Compact;
    let mut shortened = false;
    let parameters: Vec<ParameterView> = op
        .parameters
        .iter()
        .map(|p| parameter_view(spec, p, req, detail, &mut shortened))
        .collect();
    // The parameter to name as an example of `detail`: one whose description was shortened.
    let cut_parameter = parameters.iter().zip(&op.parameters).find_map(|(v, p)| {
        let (shown, whole) = (v.description.as_deref()?, p.description.as_deref()?);
        (shown != whole.trim()).then(|| p.name.clone())
    });
    let request_body = body_view(spec, op, req, detail, &mut shortened);
    let mut responses = Map::new();
    let mut outlines: Vec<(String, Outline)> = Vec::new();
    for r in &op.responses {
        let body = r.schema.as_ref().filter(|_| is_success(op, &r.status));
        if compact && body.is_none() {
            let line = r.description.as_deref().map_or(String::new(), |d| {
                let s = shorten(d, STATUS_CHARS);
                shortened |= s != d.trim();
                s
            });
            responses.insert(r.status.clone(), Value::String(line));
            continue;
        }
        let mut v = Map::new();
        if let Some(d) = &r.description {
            let d = if compact {
                let s = shorten(d, STATUS_CHARS);
                shortened |= s != d.trim();
                s
            } else {
                cut(d)
            };
            v.insert("description".into(), Value::String(d));
        }
        if let Some(schema) = body {
            if let Some(ct) = r
                .content_type
                .as_ref()
                .filter(|ct| !compact || !is_json(ct))
            {
                v.insert("contentType".into(), Value::String(ct.clone()));
            }
            let o = outline(spec, schema, OUTLINE_FIELDS, true);
            if compact {
                shortened = true;
                // 200 and 201 often return the same thing: say so instead of repeating it.
                let fields = match outlines.iter().find(|(_, x)| *x == o) {
                    Some((status, _)) => format!("as {status}"),
                    None => o.to_string(),
                };
                v.insert("fields".into(), Value::String(fields));
            } else {
                let schema = spec.inline(schema, InlineBudget { depth: resp_depth });
                v.insert("schema".into(), schema);
            }
            outlines.push((r.status.clone(), o));
        }
        responses.insert(r.status.clone(), Value::Object(v));
    }
    // The default answer is JSON (apigate asks for it): the compact view lists the other
    // kinds (a diff, YAML), not JSON's variants.
    let accept = (op.response_types.len() > 1).then(|| {
        if !compact {
            return op.response_types.clone();
        }
        let others: Vec<String> = op
            .response_types
            .iter()
            .filter(|t| !is_json(t))
            .cloned()
            .collect();
        shortened |= others.len() + 1 < op.response_types.len() || others.len() > MAX_ACCEPT;
        others.into_iter().take(MAX_ACCEPT).collect()
    });
    let description = op
        .description
        .as_deref()
        .map(|d| text(d, detail, &mut shortened));
    let idempotency_key = op.parameters.iter().find(|p| {
        p.location == super::ParamIn::Header && p.name.eq_ignore_ascii_case("idempotency-key")
    });
    let more = (compact && shortened).then(|| {
        let mut parts: Vec<String> = cut_parameter.into_iter().collect();
        if let Some((status, _)) = outlines.first() {
            parts.push(format!("responses.{status}"));
        } else if request_body.is_some() {
            parts.push("requestBody".into());
        }
        let values: Vec<String> = std::iter::once("full".to_string())
            .chain(parts)
            .map(|p| format!("\"{p}\""))
            .collect();
        format!("detail: {}", values.join(" or "))
    });
    OperationView {
        operation_id: op.id.clone(),
        method: op.method,
        path: op.path.clone(),
        mutating: op.mutating(),
        deprecated: op.deprecated,
        tags: if compact { Vec::new() } else { op.tags.clone() },
        summary: op.summary.clone(),
        description,
        server_url: if compact {
            None
        } else {
            op.servers.first().cloned()
        },
        parameters,
        request_body,
        responses,
        accept: accept.filter(|a| !a.is_empty()),
        more,
        idempotency_key: idempotency_key.map(|p| {
            format!(
                "send a unique {} header: if the call fails without an answer, repeating it \
                 with the same value cannot apply it twice",
                p.name
            )
        }),
        security: op.security.clone(),
        required_features: (!op.required_features.is_empty()).then(|| op.required_features.clone()),
        outline: outlines.into_iter().next().map(|(_, o)| o),
    }
}

/// One part of `op`, whole (`api_schema`'s `detail` naming it): a parameter (by name, or
/// `parameters.NAME`), `requestBody` or a field of it (`requestBody.metadata.labels`),
/// `responses`, `responses.STATUS` or a field of its body (`responses.200.items.status`:
/// fields of a list's items are named as the list's), `accept`, or `description`. `Err`
/// says what `path` may name instead.
pub fn part(spec: &Spec, op: &Operation, path: &str) -> Result<Value, String> {
    let full_param = |p: &Parameter| {
        serde_json::to_value(parameter_view(
            spec,
            p,
            InlineBudget { depth: 8 },
            Detail::Full,
            &mut false,
        ))
        .unwrap_or_default()
    };
    if let Some(p) = op.parameters.iter().find(|p| p.name == path) {
        return Ok(full_param(p));
    }
    let segments: Vec<&str> = path.split('.').collect();
    if segments.len() > MAX_DETAIL_SEGMENTS {
        return Err(format!(
            "`detail` may name at most {MAX_DETAIL_SEGMENTS} segments"
        ));
    }
    let choices = || {
        let names: Vec<&str> = op.parameters.iter().map(|p| p.name.as_str()).collect();
        let statuses: Vec<&str> = op.responses.iter().map(|r| r.status.as_str()).collect();
        format!(
            "`detail` is \"full\", a parameter ({}), \"requestBody\"[.field…], \
             \"responses.STATUS\"[.field…] ({}), \"accept\" or \"description\"",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            },
            statuses.join(", ")
        )
    };
    match segments.as_slice() {
        ["parameters", name] => op
            .parameters
            .iter()
            .find(|p| p.name == *name)
            .map(full_param)
            .ok_or_else(choices),
        ["description"] => Ok(json!(op.description.as_deref().map(cut))),
        ["accept"] => Ok(json!(op.response_types)),
        ["requestBody"] => {
            // As deep as fits, like the whole view.
            let mut shown = Value::Null;
            for depth in [8, 5, 3, 2, 1] {
                let view = body_view(spec, op, InlineBudget { depth }, Detail::Full, &mut false);
                shown = serde_json::to_value(view).unwrap_or_default();
                if serde_json::to_vec(&shown).map_or(0, |b| b.len()) <= TARGET_BYTES {
                    break;
                }
            }
            Ok(shown)
        }
        ["requestBody", fields @ ..] => {
            let media = op
                .request_body
                .as_ref()
                .and_then(|b| b.preferred())
                .ok_or_else(|| format!("{} takes no request body", op.id))?;
            let node = field(spec, &media.schema, fields, "requestBody")?;
            Ok(inline_within(spec, node, 8))
        }
        ["responses"] => Ok(Value::Object(describe(spec, op, Detail::Full).responses)),
        ["responses", status, fields @ ..] => {
            let Some(r) = op.responses.iter().find(|r| r.status == *status) else {
                return Err(choices());
            };
            if fields.is_empty() {
                let mut v = Map::new();
                if let Some(d) = &r.description {
                    v.insert("description".into(), Value::String(cut(d)));
                }
                if let Some(ct) = &r.content_type {
                    v.insert("contentType".into(), Value::String(ct.clone()));
                }
                if let Some(schema) = &r.schema {
                    v.insert("schema".into(), inline_within(spec, schema, 3));
                }
                return Ok(Value::Object(v));
            }
            let schema = r
                .schema
                .as_ref()
                .ok_or_else(|| format!("responses.{status} has no body"))?;
            let node = field(spec, schema, fields, &format!("responses.{status}"))?;
            Ok(inline_within(spec, node, 3))
        }
        _ => Err(choices()),
    }
}

/// The schema of the field `names` leads to from `schema` (through lists: a field of a list
/// is one of its items'), or what fields there are where the path left the schema.
fn field<'a>(
    spec: &'a Spec,
    schema: &'a Value,
    names: &[&str],
    at: &str,
) -> Result<&'a Value, String> {
    let mut node = schema;
    let mut walked = at.to_string();
    for name in names {
        node = spec.follow(node);
        for _ in 0..4 {
            match node.get("items") {
                Some(items) if items.is_object() => node = spec.follow(items),
                _ => break,
            }
        }
        let props = properties(spec, node);
        let Some((_, next)) = props.iter().find(|(n, _)| n == name) else {
            let names: Vec<&str> = props.iter().map(|(n, _)| *n).take(60).collect();
            return Err(if names.is_empty() {
                format!("{walked} has no fields to name")
            } else {
                format!(
                    "{walked} has no field {name:?}; its fields: {}",
                    names.join(", ")
                )
            });
        };
        node = next;
        walked.push('.');
        walked.push_str(name);
    }
    Ok(node)
}

/// `schema` with its `$ref`s inlined `depth` deep, shallower until it fits [`TARGET_BYTES`].
fn inline_within(spec: &Spec, schema: &Value, depth: usize) -> Value {
    for d in (1..=depth).rev() {
        let v = spec.inline(schema, InlineBudget { depth: d });
        if serde_json::to_vec(&v).map_or(0, |b| b.len()) <= TARGET_BYTES {
            return v;
        }
    }
    spec.inline(schema, InlineBudget { depth: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(name: &str, kind: FieldKind, fields: Option<Outline>) -> FieldOutline {
        FieldOutline {
            name: name.into(),
            kind,
            fields: fields.map(Box::new),
        }
    }

    fn object(fields: Vec<FieldOutline>, more: usize) -> Outline {
        Outline {
            list: false,
            scalar: None,
            fields,
            more,
        }
    }

    #[test]
    fn an_outline_reads_like_the_body() {
        let page = || {
            object(
                vec![
                    field("total", FieldKind::Scalar, None),
                    field("items", FieldKind::List, None),
                ],
                0,
            )
        };
        let charge = object(
            vec![
                field("id", FieldKind::Scalar, None),
                field("billing_details", FieldKind::Object, None),
            ],
            43,
        );
        let body = object(
            vec![
                field("data", FieldKind::List, Some(charge)),
                field("albums", FieldKind::Object, Some(page())),
                field("tracks", FieldKind::Object, Some(page())),
                field("url", FieldKind::Scalar, None),
            ],
            0,
        );
        assert_eq!(
            body.to_string(),
            "{data[{id, billing_details{}, +43 more}], albums{total, items[]}, tracks{as albums}, url}"
        );
        let mut list = page();
        list.list = true;
        assert_eq!(list.to_string(), "[{total, items[]}]");
        let scalar = Outline {
            list: true,
            scalar: Some("string".into()),
            fields: Vec::new(),
            more: 0,
        };
        assert_eq!(scalar.to_string(), "[string]");
    }

    #[test]
    fn a_first_sentence_says_when_there_is_more() {
        assert_eq!(shorten("One. Two.", 160), "One. …");
        assert_eq!(shorten("Only one.", 160), "Only one.");
        assert_eq!(shorten("Line\nnext", 160), "Line …");
        assert_eq!(
            shorten(&"x".repeat(200), 10),
            format!("{}…", "x".repeat(10))
        );
        assert!(is_json("application/vnd.github.raw+json"));
        assert!(is_json("application/json; charset=utf-8"));
        assert!(!is_json("application/yaml"));
        assert!(!is_json("application/vnd.github.diff"));
    }
}
