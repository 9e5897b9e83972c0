//! The three tools as an agent sees them: names, descriptions written for a model, input JSON
//! Schemas and annotations. Plain JSON, so every adapter (MCP, tests) shows the same thing.

use serde_json::{Value, json};

use super::select::MAX_SELECT_BYTES;
use crate::spec::Method;

pub const DISCOVER: &str = "api_discover";
pub const SCHEMA: &str = "api_schema";
pub const EXECUTE: &str = "api_execute";
pub const NAMES: [&str; 3] = [DISCOVER, SCHEMA, EXECUTE];

/// Default and maximum `limit` of `api_discover`.
pub const DEFAULT_LIMIT: usize = 10;
pub const MAX_LIMIT: usize = 50;

fn methods() -> Vec<&'static str> {
    Method::ALL.iter().map(|m| m.as_str()).collect()
}

/// How `api_schema` and `api_execute` name an operation (`tools::args::NamesOperation`), and
/// the tool's other properties after them.
fn naming_an_operation(more: Value) -> Value {
    let mut properties = json!({
        "operationId": {"type": "string", "description": "The operation's id, as returned by api_discover."},
        "method": {"type": "string", "enum": methods(), "description": "With `path`, instead of operationId."},
        "path": {"type": "string", "description": "The path template (/pets/{petId}) or a concrete path (/pets/42)."}
    });
    if let (Value::Object(p), Value::Object(more)) = (&mut properties, more) {
        p.extend(more);
    }
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

/// A tool's input JSON Schema: what `tools/list` publishes and what `tools::args` checks
/// arguments against first. Unknown arguments are violations.
pub fn input_schema(name: &str) -> Value {
    let methods = methods();
    match name {
        DISCOVER => json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you want to do, in plain words."},
                "method": {"type": "string", "enum": methods, "description": "Only operations with this HTTP method."},
                "tag": {"type": "string", "description": "Only operations with this tag."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT,
                    "description": "How many results (default 10, at most 50)."}
            },
            "required": ["query"],
            "additionalProperties": false
        }),
        SCHEMA => naming_an_operation(json!({
            "include": {"type": "array", "items": {"type": "string", "enum": ["responses", "descriptions"]},
                "description": "The full view: [\"responses\"] for the response schemas, not only the success body's top-level fields; [\"descriptions\"] for every description in full, at any depth. Either gives both."}
        })),
        EXECUTE => naming_an_operation(json!({
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
                "description": "GET only: follow this many pages (at most the server's --max-pages, 10 by default) and return their items as one list; each page is its own request. The result's `next` continues after the last page."}
        })),
        _ => json!({"type": "object"}),
    }
}

/// A tool's output JSON Schema: what `structuredContent` holds, its result or, with
/// `isError: true`, `{error, code, …details}`.
pub fn output_schema(name: &str) -> Value {
    let error = json!({
        "type": "object",
        "properties": {
            "error": {"type": "string", "description": "What happened and what to do."},
            "code": {"type": "string", "enum": [
                "UNAUTHORIZED", "SESSION_EXPIRED", "FORBIDDEN", "RATE_LIMITED", "UNKNOWN_TOOL",
                "UNKNOWN_OPERATION", "INVALID_ARGUMENTS", "BLOCKED_BY_MONITOR", "UPSTREAM_ERROR",
                "UPSTREAM_TIMEOUT", "UNAVAILABLE", "INTERNAL"]}
        },
        "required": ["error", "code"]
    });
    let result = match name {
        DISCOVER => json!({
            "type": "object",
            "properties": {
                "results": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "operationId": {"type": "string"}, "method": {"type": "string"},
                        "path": {"type": "string"}, "summary": {"type": "string"},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "mutating": {"type": "boolean"}, "score": {"type": "number"}
                    },
                    "required": ["operationId", "method", "path", "summary", "tags", "mutating", "score"]
                }},
                "total": {"type": "integer", "description": "How many operations matched."}
            },
            "required": ["results", "total"]
        }),
        SCHEMA => json!({
            "type": "object",
            "properties": {
                "operationId": {"type": "string"}, "method": {"type": "string"},
                "path": {"type": "string"}, "summary": {"type": "string"},
                "description": {"type": "string"}, "serverUrl": {"type": ["string", "null"]},
                "mutating": {"type": "boolean"}, "deprecated": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "parameters": {"type": "array", "items": {"type": "object"}},
                "requestBody": {"type": "object"},
                "responses": {"type": "object"}
            },
            "required": ["operationId", "method", "path", "parameters", "responses"]
        }),
        _ => json!({
            "anyOf": [
                {
                    "type": "object",
                    "description": "The API's answer (4xx included: `ok` is false).",
                    "properties": {
                        "status": {"type": "integer"}, "ok": {"type": "boolean"},
                        "headers": {"type": "object"},
                        "body": {
                            "description": "Parsed JSON, text, or null. A binary answer (a type \
                                that is not text, and bytes that are not text) is described: \
                                {contentType, bytes, sha256, returnedAs, uri?, expiresAt?, file?, \
                                note?}. returnedAs `image`: the bytes are an image content item \
                                of this result; `resource_link`: a resource_link item, `uri` \
                                (apigate://responses/<id>) readable with resources/read by the \
                                same API key until `expiresAt`. `file`: where `apigate dev \
                                --download-dir` wrote it. `note`: why nothing was returned (over \
                                --max-read-bytes, a credential inside, over --max-held-bytes)."
                        },
                        "truncated": {"type": "boolean", "description": "Something of the body is not shown (see `cut` and `note`)."},
                        "durationMs": {"type": "integer"},
                        "operationId": {"type": "string"}, "method": {"type": "string"},
                        "cut": {"type": "object", "description": "Whole items of the body's list were left out to fit the budget: `shown` of `total` items of the array at JSON pointer `pointer` (\"\" for a top-level array); every key outside that array is kept.",
                            "properties": {"pointer": {"type": "string"}, "shown": {"type": "integer"}, "total": {"type": "integer"}},
                            "required": ["pointer", "shown", "total"]},
                        "note": {"type": "string", "description": "One sentence on what is not shown (or what `select` did not match) and how to get it."},
                        "next": {"type": "object", "description": "The exact api_execute arguments for the next page (from the Link header or a cursor in the body): call api_execute with them as they are."},
                        "pages": {"type": "object", "description": "With `pages`: how many were fetched, and `stoppedBecause` when fewer than asked.",
                            "properties": {"fetched": {"type": "integer"}, "stoppedBecause": {"type": "string"}},
                            "required": ["fetched"]}
                    },
                    "required": ["status", "ok", "headers", "body", "truncated", "durationMs"]
                },
                {
                    "type": "object",
                    "description": "With dryRun: the request that would be sent, credentials redacted.",
                    "properties": {
                        "dryRun": {"const": true}, "operationId": {"type": "string"},
                        "request": {"type": "object"}
                    },
                    "required": ["dryRun", "operationId", "request"]
                }
            ]
        }),
    };
    json!({"type": "object", "anyOf": [result, error]})
}

/// The argument names a tool takes, in its schema's order.
pub fn argument_names(name: &str) -> Vec<String> {
    input_schema(name)["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// One tool's definition in MCP's `tools/list` shape.
pub fn definition(name: &str, api_title: &str) -> Option<Value> {
    let api = if api_title.is_empty() {
        "the API"
    } else {
        api_title
    };
    let tool = match name {
        DISCOVER => json!({
            "name": DISCOVER,
            "title": "Find API operations",
            "description": format!(
                "Search the operations of {api} by what you want to do, in plain words \
                 (e.g. \"close an issue\", \"refund a payment\"). Returns a ranked list of \
                 operations (operationId, method, path, summary). Step 1 of 3: pick an \
                 operationId here, call api_schema to learn its parameters, then api_execute \
                 to call it. Filter with `method` (GET, POST, …) or `tag` when you know them. \
                 Only operations you are allowed to call are listed."),
            "inputSchema": input_schema(name),
            "outputSchema": output_schema(name),
            "annotations": {"title": "Find API operations", "readOnlyHint": true, "openWorldHint": false}
        }),
        SCHEMA => json!({
            "name": SCHEMA,
            "title": "Describe an API operation",
            "description": format!(
                "Show everything needed to call one operation of {api}: its parameters (name, \
                 in, required, schema), request body schema and content type, responses (status, \
                 description and the success body's top-level fields) and server. Descriptions \
                 get shorter with depth; `include: [\"responses\"]` shows the full response \
                 schemas and every description. Identify it by `operationId` (from \
                 api_discover) or by `method` + `path`. Step 2 of 3: then call api_execute with `pathParams`, `query`, \
                 `headers` and `body` shaped as this schema says. A schema shown as \
                 {{\"$recursive\": \"Name\"}} repeats the enclosing Name."),
            "inputSchema": input_schema(name),
            "outputSchema": output_schema(name),
            "annotations": {"title": "Describe an API operation", "readOnlyHint": true, "openWorldHint": false}
        }),
        EXECUTE => json!({
            "name": EXECUTE,
            "title": "Call an API operation",
            "description": format!(
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
                 `[].{{number: number, title: title}}`). A body over the budget keeps whole \
                 items of its list and says so in `cut` and `note`; when the API shows a next \
                 page, `next` holds the arguments to call it, and `pages: N` (GET) fetches N \
                 pages as one list. `ok` is false when the API answered 4xx (read its \
                 body); 5xx answers, timeouts and connection failures come back as errors. \
                 A binary answer (a download, an image) is described in `body` (type, size, \
                 sha256) and its bytes come as an image, or a resource link the client reads \
                 with resources/read (`body.uri`). \
                 Step 3 of 3. Calls with GET, HEAD or OPTIONS only read; POST, PUT, PATCH, \
                 DELETE and TRACE may change real data (api_discover marks them `mutating`); \
                 each result's `_meta` says which: `apigate/readOnly`."),
            "inputSchema": input_schema(name),
            "outputSchema": output_schema(name),
            "annotations": {"title": "Call an API operation", "readOnlyHint": false,
                "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}
        }),
        _ => return None,
    };
    Some(tool)
}

/// All three definitions.
pub fn all(api_title: &str) -> Vec<Value> {
    NAMES
        .iter()
        .filter_map(|n| definition(n, api_title))
        .collect()
}
