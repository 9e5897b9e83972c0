//! The three tools as an agent sees them: names, descriptions written for a model, input JSON
//! Schemas and annotations. Plain JSON, so every adapter (MCP, tests) shows the same thing.

use serde_json::{Value, json};

use super::output::output_schema;
use super::select::MAX_SELECT_BYTES;
use crate::spec::Method;
use crate::types::Tool;

/// The most items `skipItems` may leave out: more than any page of a real API holds.
pub const MAX_SKIP_ITEMS: usize = 100_000;

/// The longest `detail` `api_schema` takes: a parameter's name or a path of field names.
pub(crate) const MAX_DETAIL_BYTES: usize = 256;

/// Default and maximum `limit` of `api_discover`.
pub(crate) const DEFAULT_LIMIT: usize = 10;
pub(crate) const MAX_LIMIT: usize = 50;

/// The `api` argument: which API, when the server serves several.
static API_ARGUMENT: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
    json!({"type": "string", "pattern": "^[a-z0-9_-]{1,64}$",
        "description": "When the server serves several APIs: only this one (the `api` of a result)."})
});

fn methods() -> Vec<&'static str> {
    Method::ALL.iter().map(|m| m.as_str()).collect()
}

/// How `api_schema` and `api_execute` name an operation (`tools::args::NamesOperation`), and
/// the tool's other properties after them.
fn naming_an_operation(more: Value) -> Value {
    let mut properties = json!({
        "operationId": {"type": "string", "description": "The operation's id, as returned by api_discover."},
        "method": {"type": "string", "enum": methods(), "description": "With `path`, instead of operationId."},
        "path": {"type": "string", "description": "The path template (/pets/{petId}) or a concrete path (/pets/42)."},
        "api": API_ARGUMENT.clone()
    });
    if let (Value::Object(p), Value::Object(more)) = (&mut properties, more) {
        p.extend(more);
    }
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

/// A tool's input JSON Schema: what `tools/list` publishes and what `tools::args` checks
/// arguments against first. Unknown arguments are violations.
pub fn input_schema(tool: Tool) -> Value {
    let methods = methods();
    match tool {
        Tool::Discover => json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you want to do, in plain words. Leave it out for an overview of the APIs and their groups of operations."},
                "method": {"type": "string", "enum": methods, "description": "Only operations with this HTTP method."},
                "tag": {"type": "string", "description": "Only operations with this tag."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT,
                    "description": "How many results (default 10, at most 50)."},
                "api": API_ARGUMENT.clone()
            },
            "additionalProperties": false
        }),
        Tool::Schema => naming_an_operation(json!({
            "detail": {"type": "string", "maxLength": MAX_DETAIL_BYTES,
                "description": "By default the view is short (first sentences, the response's field names). \"full\" shows everything; a part shows that part whole: a parameter's name (\"limit\"), \"requestBody\" or a field of it (\"requestBody.metadata\"), \"responses.200\" or a field of its body (\"responses.200.items.status\"), \"accept\", \"description\"."},
            "include": {"type": "array", "items": {"type": "string", "enum": ["responses", "descriptions"]},
                "description": "The older form of detail: \"full\"."}
        })),
        Tool::Execute => naming_an_operation(json!({
            "pathParams": {"type": "object", "description": "Values for the {placeholders} of the path.", "additionalProperties": true},
            "query": {"type": "object", "description": "Query parameters by name.", "additionalProperties": true},
            "headers": {"type": "object", "description": "Header parameters the operation declares.", "additionalProperties": true},
            "body": {"description": "The request body, as JSON. Bytes, for a binary body (application/octet-stream, application/zip, image/png, …) or a multipart file field: {\"base64\": \"…\"} in standard base64 (padding optional); a file field may add \"filename\" and \"contentType\", e.g. {\"title\": \"Q3\", \"file\": {\"base64\": \"JVBERi0…\", \"filename\": \"q3.pdf\", \"contentType\": \"application/pdf\"}}. {\"file\": \"NAME\"} instead of base64 sends a file from the operator's --upload-dir (apigate dev only)."},
            "contentType": {"type": "string", "description": "The body's media type when the operation takes several (api_schema lists them), e.g. application/merge-patch+json."},
            "accept": {"type": "string", "description": "The response media type to ask for, among those api_schema lists under `accept` (e.g. application/vnd.github.diff)."},
            "dryRun": {"type": "boolean", "default": false, "description": "Return the request that would be sent, without sending it."},
            "select": {"type": "string", "maxLength": MAX_SELECT_BYTES,
                "description": "A JMESPath expression applied to a 2xx response body before it is cut to the budget, to keep only what you need: e.g. [].{number: number, title: title} for a list of issues, or data[?amount > `1000`].id for the ids of Stripe charges over 1000 (JMESPath literals go in backticks). With `pages`, it runs over all pages' items as one list."},
            "pages": {"type": "integer", "minimum": 1, "default": 1,
                "description": "GET only: follow this many pages (at most the server's --max-pages, 10 by default) and return their items as one list; each page is its own request. The result's `next` continues after the last page."},
            "skipItems": {"type": "integer", "minimum": 0, "maximum": MAX_SKIP_ITEMS,
                "description": "GET only: leave out this many items at the start of the (first) page's list. A result's `next` sets it to resume inside a page after a cut; you rarely set it yourself."}
        })),
    }
}

/// The argument names a tool takes, in its schema's order.
pub(crate) fn argument_names(tool: Tool) -> Vec<String> {
    input_schema(tool)["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// One tool's definition in MCP's `tools/list` shape.
pub(crate) fn definition(tool: Tool, api_title: &str) -> Value {
    let api = if api_title.is_empty() {
        "the API"
    } else {
        api_title
    };
    let (title, description, annotations) = match tool {
        Tool::Discover => (
            "Find API operations",
            format!(
                "Search the operations of {api} by what you want to do, in plain words \
                 (e.g. \"close an issue\", \"refund a payment\"). Returns a ranked list of \
                 operations (operationId, method, path, summary; `mutating` on those that may \
                 change data): the hits close to the best one (3 to 10), or `limit` of them. \
                 Step 1 of 3: pick an \
                 operationId here, call api_schema to learn its parameters, then api_execute \
                 to call it. Filter with `method` (GET, POST, …) or `tag` when you know them. \
                 Only operations you are allowed to call are listed. When you do not know the \
                 API's words yet, call it once without `query`: it returns a short map of the \
                 APIs (name, title, operation count) and their groups of operations (tags, \
                 with counts), whose names `api` and `tag` take."
            ),
            json!({"readOnlyHint": true, "openWorldHint": false}),
        ),
        Tool::Schema => (
            "Describe an API operation",
            format!(
                "Show what is needed to call one operation of {api}: its parameters (name, \
                 in, required, schema), request body schema and content type, and responses \
                 (status; the success body's `fields`, e.g. {{id, title, user{{}}, labels[], +12 \
                 more}}), shortened: first sentences, field names. `detail: \"full\"` shows \
                 everything; `detail` naming a part shows it whole: a parameter (\"limit\"), \
                 \"requestBody\", \"responses.200\" or a field of the body \
                 (\"responses.200.items.status\"). `select` is an example for api_execute. \
                 Identify it by `operationId` (from api_discover) or by `method` + `path`. Step 2 \
                 of 3: then call api_execute with `pathParams`, `query`, `headers` and `body` \
                 shaped as this schema says. A schema shown as {{\"$recursive\": \"Name\"}} \
                 repeats the enclosing Name."
            ),
            json!({"readOnlyHint": true, "openWorldHint": false}),
        ),
        Tool::Execute => (
            "Call an API operation",
            format!(
                "Call one operation of {api} for real and return {{status, ok, headers, body, \
                 truncated, durationMs}}. Identify it by `operationId` or by `method` + `path` \
                 (a concrete path like /pets/42 fills pathParams for you). Arguments are \
                 checked against the operation's schema first (see api_schema) and every \
                 problem is reported at once with its JSON pointer. Put path parameters in \
                 `pathParams`, query parameters in `query`, declared header parameters in \
                 `headers`, and the request body in `body` (JSON; form-encoded APIs are \
                 encoded for you; bytes as {{\"base64\": \"…\"}}, see `body`). \
                 Credentials are added by the server: never pass \
                 Authorization or cookies. Use `dryRun: true` to see the exact request \
                 without sending it. Keep only what you need with `select`, a JMESPath \
                 expression applied to the body before the size budget (e.g. \
                 `[].{{number: number, title: title}}`); with it, only the headers an agent acts \
                 on come back (link, location, retry-after, rate limit remaining and reset, \
                 content-type) and no durationMs. A body over the budget keeps whole \
                 items of its list and says so in `cut` and `note`; when the API shows a next \
                 page, `next` holds the arguments to call it, and `pages: N` (GET) fetches N \
                 pages as one list. `ok` is false when the API answered 4xx (read its \
                 body); 5xx answers, timeouts and connection failures come back as errors. \
                 A binary answer (a download, an image) is described in `body` (type, size, \
                 sha256) and its bytes come as an image, or a resource link the client reads \
                 with resources/read (`body.uri`). \
                 Step 3 of 3. Calls with GET, HEAD or OPTIONS only read; POST, PUT, PATCH, \
                 DELETE and TRACE may change real data (api_discover marks them `mutating`); \
                 each result's `_meta` says which: `apigate/readOnly`."
            ),
            json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false,
                "openWorldHint": true}),
        ),
    };
    let mut hints = json!({"title": title});
    if let (Value::Object(h), Value::Object(more)) = (&mut hints, annotations) {
        h.extend(more);
    }
    json!({
        "name": tool.name(),
        "title": title,
        "description": description,
        "inputSchema": input_schema(tool),
        "outputSchema": output_schema(tool),
        "annotations": hints,
    })
}

/// All three definitions, for a server of the APIs `api_names`: with one, the `api`
/// argument is left out (it is still accepted); with several, it lists their names, so a
/// change of the APIs changes the list (`notifications/tools/list_changed`).
pub fn all(api_title: &str, api_names: &[&str]) -> Vec<Value> {
    Tool::ALL
        .iter()
        .map(|&t| {
            let mut d = definition(t, api_title);
            if let Some(Value::Object(p)) = d.pointer_mut("/inputSchema/properties") {
                if api_names.len() > 1 {
                    p.insert(
                        "api".into(),
                        json!({"type": "string", "enum": api_names,
                            "description": "Only this API (the `api` of a result)."}),
                    );
                } else {
                    p.remove("api");
                }
            }
            d
        })
        .collect()
}
