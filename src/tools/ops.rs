//! What each tool does once the pipeline lets it run: parsing the typed arguments and
//! resolving the operation they name (once, in [`parse`]), checking its permission and
//! validating and building the request (in [`prepare`]), and the three tool bodies ([`run`]).
//! Production, tests and the fuzz target all go through these functions.

use serde_json::{Map, Value, json};

use super::args::{self, DiscoverArgs, ExecuteArgs, Input, InputLimits, SchemaArgs, SchemaDetail};
use super::error::ToolError;
use super::output::{DiscoverHit, DiscoverResult, DryRunResult, Output, SchemaPart, SchemaResult};
use super::resolve::Visibility;
use super::resolve::{Found, api_named, find, may_see, permitted, visible, why_hidden};
use super::select::Select;
use super::upload::UploadLimits;
use crate::apis::{Apis, OpRef};
use crate::auth::Principal;
use crate::auth::identity::Identity;
use crate::index::Query;
use crate::spec::Method;
use crate::spec::{Detail, Operation, ParamIn, Violation};
use crate::types::{Code, Tool};
use crate::upstream::{CallArgs, PreparedRequest, headers, media_essence, scalar};

/// A call's arguments, typed, with the operation they name found (or not) in the APIs.
pub(crate) enum Parsed {
    Discover(DiscoverArgs),
    Schema {
        args: SchemaArgs,
        found: Option<Found>,
    },
    Execute {
        args: Box<ExecuteArgs>,
        found: Option<Found>,
    },
}

impl Parsed {
    /// The operation the arguments name, when an API has it.
    pub fn operation(&self) -> Option<OpRef> {
        match self {
            Parsed::Discover(_) => None,
            Parsed::Schema { found, .. } | Parsed::Execute { found, .. } => {
                found.as_ref().map(Found::at)
            }
        }
    }
}

/// A validated call, ready to run.
pub(crate) enum Prepared {
    Discover(DiscoverArgs),
    Schema(OpRef, SchemaDetail),
    Execute(Box<Planned>),
}

/// An `api_execute` call after validation: the operation, the validated request parts and
/// the request they build (without credentials: they are added when it is sent).
pub struct Planned {
    /// The API (its position among the call's APIs).
    pub api: usize,
    pub op: usize,
    pub call: CallArgs,
    pub request: PreparedRequest,
    pub dry_run: bool,
    /// `select`, compiled.
    pub select: Option<Select>,
    /// How many pages to follow (1 unless `pages` was given, GET only).
    pub pages: usize,
    /// Items of the first page's list left out (`skipItems`).
    pub skip_items: usize,
}

impl Planned {
    /// The operation it calls.
    pub fn at(&self) -> OpRef {
        OpRef {
            api: self.api,
            op: self.op,
        }
    }

    /// The arguments of this call's operation with another `query` (the next page), `skip`
    /// items left out, and `select` and `pages` as given: the pipeline's own call for a page
    /// after the first (no `select`, one page), or serialized, a result's `next`. The path
    /// parameters, headers and `accept` are the validated ones of this call.
    pub(crate) fn next(
        &self,
        apis: &Apis,
        query: Map<String, Value>,
        skip: usize,
        select: Option<Select>,
        pages: usize,
    ) -> ExecuteArgs {
        ExecuteArgs {
            target: args::Target {
                operation_id: Some(apis.shown_id(self.at())),
                ..args::Target::default()
            },
            call: CallArgs {
                path_params: self.call.path_params.clone(),
                query,
                headers: self.call.headers.clone(),
                accept: self.call.accept.clone(),
                ..CallArgs::default()
            },
            dry_run: false,
            select,
            pages: (pages > 1).then_some(pages),
            skip_items: (skip > 0).then_some(skip),
        }
    }
}

impl Prepared {
    /// The operation the call is about, if any.
    pub fn target(&self) -> Option<OpRef> {
        match self {
            Prepared::Discover(_) => None,
            Prepared::Schema(r, _) => Some(*r),
            Prepared::Execute(p) => Some(p.at()),
        }
    }

    /// The operation the call is about, if any.
    pub fn operation<'a>(&self, apis: &'a Apis) -> Option<&'a Operation> {
        apis.operation(self.target()?)
    }
}

/// Types the arguments of `tool` (every violation of its input schema at once) and finds the
/// operation they name among what `principal` may see (`resolve::find`). No permission is
/// checked here. The pipeline's own arguments for a next page are typed already: they are
/// checked against the limits and looked up as an agent's would be.
pub(super) fn parse(
    limits: &InputLimits,
    visibility: &Visibility,
    apis: &Apis,
    principal: &Principal,
    tool: Tool,
    input: Input,
) -> Result<Parsed, ToolError> {
    let args = match input {
        Input::Agent(args) => args,
        Input::NextPage(args) => return parse_execute(limits, visibility, apis, principal, *args),
    };
    match tool {
        Tool::Discover => {
            let args = args::discover(args)?;
            limits.check_discover(&args)?;
            if let Some(name) = &args.api {
                api_named(visibility, apis, principal, name)?;
            }
            Ok(Parsed::Discover(args))
        }
        Tool::Schema => {
            let args = args::schema(args)?;
            limits.check_schema(&args)?;
            let found = find(visibility, apis, principal, &args.target)?;
            Ok(Parsed::Schema { args, found })
        }
        Tool::Execute => {
            let args = args::execute(args)?;
            parse_execute(limits, visibility, apis, principal, args)
        }
    }
}

/// `api_execute`'s typed arguments within the limits, with the operation they name.
fn parse_execute(
    limits: &InputLimits,
    visibility: &Visibility,
    apis: &Apis,
    principal: &Principal,
    args: ExecuteArgs,
) -> Result<Parsed, ToolError> {
    limits.check_execute(&args)?;
    let found = find(visibility, apis, principal, &args.target)?;
    Ok(Parsed::Execute {
        args: Box::new(args),
        found,
    })
}

/// Checks the operation's permission for `principal`, then (for `api_execute`) validates the
/// arguments against the operation's schema, builds the request and checks any method override
/// it carries (`method_override.rs`).
pub(super) fn prepare(
    visibility: &Visibility,
    uploads: UploadLimits<'_>,
    apis: &Apis,
    principal: &Principal,
    parsed: Parsed,
) -> Result<Prepared, ToolError> {
    match parsed {
        Parsed::Discover(d) => Ok(Prepared::Discover(d)),
        Parsed::Schema { args, found } => {
            // An operation discovery hides is unknown to its schema too: `FORBIDDEN` with the
            // missing feature would tell the caller it exists.
            let found = found.filter(|f| may_see(apis, principal, f.at()));
            let found = permitted(visibility, apis, principal, &args.target, found)?;
            Ok(Prepared::Schema(found.at(), args.detail()))
        }
        Parsed::Execute { args, found } => {
            let found = permitted(visibility, apis, principal, &args.target, found)?;
            let planned = plan(uploads, apis, principal, *args, found)?;
            let api = &apis.list[planned.api];
            let op = &api.spec.operations[planned.op];
            super::method_override::check(api, principal, op, &planned.request)?;
            Ok(Prepared::Execute(Box::new(planned)))
        }
    }
}

/// What is wrong with the media types asked for: `contentType` must be one the request body
/// declares, `accept` one the responses declare or the operation documents.
fn media_choices(
    op: &Operation,
    content_type: Option<&str>,
    accept: Option<&str>,
) -> Vec<Violation> {
    let mut out = Vec::new();
    if let Some(ct) = content_type {
        let offered: Vec<&str> = op
            .request_body
            .iter()
            .flat_map(|b| b.content.iter().map(|m| m.content_type.as_str()))
            .collect();
        if !offered
            .iter()
            .any(|o| crate::upstream::upload::media_admits(o, ct))
        {
            out.push(Violation {
                pointer: "/contentType".into(),
                message: if offered.is_empty() {
                    format!("{} takes no request body", op.key())
                } else {
                    format!("{ct:?} is not one of {}", offered.join(", "))
                },
            });
        }
    }
    if let Some(a) = accept
        && !op
            .response_types
            .iter()
            .any(|t| media_essence(t) == media_essence(a))
    {
        out.push(Violation {
            pointer: "/accept".into(),
            message: if op.response_types.is_empty() {
                format!("{} documents no response media type", op.key())
            } else {
                format!("{a:?} is not one of {}", op.response_types.join(", "))
            },
        });
    }
    out
}

/// Validates `api_execute`'s request parts against the operation, in place, and builds the
/// request from them.
fn plan(
    uploads: UploadLimits<'_>,
    apis: &Apis,
    principal: &Principal,
    args: ExecuteArgs,
    found: Found,
) -> Result<Planned, ToolError> {
    let at = found.at();
    let api = &apis.list[found.api];
    let op = &api.spec.operations[found.resolved.index];
    let ExecuteArgs {
        target,
        mut call,
        dry_run,
        select,
        pages,
        skip_items,
    } = args;
    // Before anything is sent: a bad page count costs no request (a bad `select` was
    // refused with the arguments).
    for (name, n) in [("pages", pages), ("skipItems", skip_items)] {
        if let Some(n) = n
            && op.method != Method::Get
        {
            return Err(ToolError::invalid(
                format!(
                    "`{name}` works on the pages of a list, with GET only; {} is {}",
                    op.id, op.method
                ),
                vec![Violation {
                    pointer: format!("/{name}"),
                    message: format!("GET only, and {} is {} ({name}: {n})", op.id, op.method),
                }],
            ));
        }
    }
    let media = media_choices(op, call.content_type.as_deref(), call.accept.as_deref());
    if !media.is_empty() {
        return Err(ToolError::invalid(
            "the operation does not offer that media type (see `violations` for the choices; \
             api_schema lists them)",
            media,
        ));
    }
    // A concrete path fills pathParams; a value given both ways must agree.
    let mut conflicts = Vec::new();
    for (name, value) in found.resolved.path_values {
        match call.path_params.get(&name) {
            None => {
                call.path_params.insert(name, Value::String(value));
            }
            // The same text the request would carry: 42 and "42" agree.
            Some(given) if scalar(given) == value => {}
            Some(given) => conflicts.push(Violation {
                pointer: format!("/pathParams/{name}"),
                message: format!(
                    "pathParams.{name} is {given} but the path {} says {value:?}",
                    target.path.as_deref().unwrap_or_default()
                ),
            }),
        }
    }
    if !conflicts.is_empty() {
        return Err(ToolError::invalid(
            "the concrete path and pathParams disagree; give the value one way, or the same \
             value both ways",
            conflicts,
        ));
    }
    let forbidden: Vec<Violation> = call
        .headers
        .keys()
        .filter(|h| !headers::agent_may_set(h))
        .map(|h| Violation {
            pointer: format!("/headers/{h}"),
            message: "not allowed: credentials and connection headers are added by the server"
                .into(),
        })
        .collect();
    if !forbidden.is_empty() {
        return Err(ToolError::invalid(
            format!(
                "{} cannot be set by the agent: credentials and connection headers are added \
                 by the server",
                forbidden
                    .iter()
                    .map(|v| v.pointer.trim_start_matches("/headers/").to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            forbidden,
        ));
    }
    // Header names are case-insensitive: use the declared spelling.
    call.headers = std::mem::take(&mut call.headers)
        .into_iter()
        .map(|(k, v)| {
            let declared = op
                .parameters
                .iter()
                .find(|p| p.location == ParamIn::Header && p.name.eq_ignore_ascii_case(&k))
                .map(|p| p.name.clone());
            (declared.unwrap_or(k), v)
        })
        .collect();
    credential_args(apis, api, principal, op, &mut call)?;
    // Bytes (`{"base64": …}`, `{"file": …}`) leave the body here; it keeps a placeholder.
    let binary = super::upload::extract(
        uploads,
        &api.spec,
        op,
        call.content_type.as_deref(),
        &mut call.body,
    )?;
    if call.content_type.is_none() {
        call.content_type = binary.content_type.clone();
    }
    let violations = binary.keep(validate(&api.spec, op, &mut call));
    if !violations.is_empty() {
        let n = violations.len();
        let id = apis.shown_id(at);
        let mut error = ToolError::invalid(
            format!(
                "{n} argument problem{} for {id} ({} {}); fix them all (see `violations`) and \
                 call again — api_schema shows the expected shapes",
                if n == 1 { "" } else { "s" },
                op.method,
                op.path
            ),
            violations,
        )
        .with("operationId", Value::String(id));
        if apis.qualified() {
            error = error.with("api", Value::String(api.name.clone()));
        }
        return Err(error);
    }
    call.uploads = binary.uploads;
    let request = api
        .upstream
        .prepare(&api.spec, op, &call)
        .map_err(upstream_error)?;
    Ok(Planned {
        api: found.api,
        op: found.resolved.index,
        call,
        request,
        dry_run,
        select,
        pages: pages.unwrap_or(1).max(1),
        skip_items: skip_items.unwrap_or(0),
    })
}

/// The operation's credential parameters (`credentials::credential_params`) in `call`: the
/// agent's value for one a configured credential stands for is refused (it would replace
/// the configured credential, or go beside it), a required one neither given nor supplied is
/// an error that says what the operator configures, and the builder learns which are
/// supplied (`CallArgs::supplied`).
fn credential_args(
    apis: &Apis,
    api: &crate::apis::Api,
    principal: &Principal,
    op: &Operation,
    call: &mut CallArgs,
) -> Result<(), ToolError> {
    let used = super::credentials::credential_params(apis, api, principal, op);
    let given = |call: &CallArgs, p: &crate::spec::Parameter| match p.location {
        ParamIn::Header => call.headers.keys().any(|k| k.eq_ignore_ascii_case(&p.name)),
        ParamIn::Query => call.query.contains_key(&p.name),
        _ => false,
    };
    let refused: Vec<Violation> = used
        .iter()
        .filter(|c| c.supplied && given(call, c.param))
        .map(|c| Violation {
            pointer: format!(
                "/{}/{}",
                crate::spec::section(c.param.location),
                crate::spec::escape_pointer(&c.param.name)
            ),
            message: "a credential: the server sends the operator's configured credential \
                      instead; leave it out"
                .into(),
        })
        .collect();
    if !refused.is_empty() {
        return Err(ToolError::invalid(
            format!(
                "{} cannot be set by the agent: {} gets its credential from the server's \
                 configured credentials, which nothing the agent sends replaces; leave {} out",
                refused
                    .iter()
                    .map(|v| v.pointer.trim_start_matches('/').replacen('/', ".", 1))
                    .collect::<Vec<_>>()
                    .join(", "),
                op.id,
                if refused.len() == 1 { "it" } else { "them" },
            ),
            refused,
        ));
    }
    for c in &used {
        if c.param.required
            && !c.supplied
            && !given(call, c.param)
            && let Some(e) = super::credentials::missing_credential(api, op, c)
        {
            return Err(e);
        }
    }
    call.supplied = used
        .iter()
        .filter(|c| c.supplied)
        .map(|c| (c.param.location, c.param.name.clone()))
        .collect();
    Ok(())
}

/// Validates the request parts against the operation's schema, in place: the schema (and the
/// lenient coercion of string-typed scalars before it) sees `{pathParams, query, headers,
/// body}`, so the parts are moved into that object for the check and back out of it, never
/// copied.
pub(super) fn validate(
    spec: &crate::spec::Spec,
    op: &Operation,
    call: &mut CallArgs,
) -> Vec<Violation> {
    let mut parts = Map::new();
    for (k, v) in [
        ("pathParams", &mut call.path_params),
        ("query", &mut call.query),
        ("headers", &mut call.headers),
    ] {
        if !v.is_empty() {
            parts.insert(k.into(), Value::Object(std::mem::take(v)));
        }
    }
    if let Some(b) = call.body.take() {
        parts.insert("body".into(), b);
    }
    let mut parts = Value::Object(parts);
    let violations = spec.validate(op, &mut parts);
    if let Value::Object(mut parts) = parts {
        let mut take = |k: &str| match parts.remove(k) {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        call.path_params = take("pathParams");
        call.query = take("query");
        call.headers = take("headers");
        call.body = parts.remove("body");
    }
    violations
}

/// The query's embedding when the index is hybrid: here with a static model (microseconds),
/// else from the cache of recent queries or on a blocking thread (an encoder's forward pass
/// takes milliseconds of CPU).
async fn query_vector(apis: &Apis, text: &str) -> Option<std::sync::Arc<[f32]>> {
    if apis.index.ranker() != crate::index::Ranker::Hybrid {
        return None;
    }
    if apis.index.embeds_cheaply() {
        return apis.index.query_vector(text);
    }
    if let Some(v) = apis.index.cached_query_vector(text) {
        return Some(v);
    }
    let index = apis.index.clone();
    let text = text.to_string();
    tokio::task::spawn_blocking(move || index.query_vector(&text))
        .await
        .ok()
        .flatten()
}

/// A short one-line summary for discovery results.
fn short_summary(op: &Operation) -> String {
    let text = op
        .summary
        .as_deref()
        .or(op.description.as_deref())
        .unwrap_or_default();
    let first = text.split_inclusive(". ").next().unwrap_or(text).trim();
    if first.chars().count() > 160 {
        let mut s: String = first.chars().take(160).collect();
        s.push('…');
        s
    } else {
        first.to_string()
    }
}

/// Without `limit`, `api_discover` shows the hits that score at least this share of the best
/// one: when the best hits are clear, the rest are left out. On the four query sets of
/// `tests/data` (440 queries, per spec and pooled) this keeps 94 % (words only) and 96 %
/// (hybrid) of the operations the top 10 finds, showing 6 hits in 10 (BENCHMARKS.md, issue 42;
/// `index::the_default_hits_keep_what_the_top_ten_finds`).
const CLEAR_SHARE: f32 = 0.6;
/// ... and at least this many (all there are, when fewer).
const MIN_HITS: usize = 3;

/// How many hits `api_discover` shows when the caller gave no `limit`, of those a search found
/// (`scores`: best first, at most the default `limit`): the ones scoring at least
/// [`CLEAR_SHARE`] of the best, at least [`MIN_HITS`]. When the best hits are clear, the rest
/// are left out; `limit` shows them. Hits without scores (filters and no words) are all shown.
pub fn shown_by_default(scores: &[f32]) -> usize {
    let Some(&best) = scores.first().filter(|s| **s > 0.0) else {
        return scores.len();
    };
    let close = scores
        .iter()
        .take_while(|s| **s >= CLEAR_SHARE * best)
        .count();
    close.max(MIN_HITS).min(scores.len())
}

/// The tools whose result is complete at once.
pub(super) async fn done(
    visibility: &Visibility,
    identity: Option<&Identity>,
    apis: &Apis,
    principal: &Principal,
    prepared: Prepared,
) -> Result<Output, ToolError> {
    match prepared {
        Prepared::Discover(d) => {
            let only = d.api.as_deref().and_then(|n| apis.position(n));
            let allowed = visible(visibility, apis, principal, only);
            if d.query.trim().is_empty() && d.tag.is_none() && d.method.is_none() {
                let overview = super::overview::overview(apis, &allowed, only);
                let total = overview.iter().map(|a| a.operations).sum();
                // Nothing to show: say whether permissions hid what there is.
                let hidden = if total == 0 {
                    let unseen: Vec<OpRef> = apis
                        .list
                        .iter()
                        .enumerate()
                        .filter(|&(api, _)| only.is_none_or(|o| o == api))
                        .flat_map(|(api, a)| {
                            (0..a.spec.operations.len()).map(move |op| OpRef { api, op })
                        })
                        .filter(|r| !allowed(r.api, r.op))
                        .collect();
                    why_hidden(apis, principal, unseen.len(), &unseen, false)
                } else {
                    None
                };
                return Ok(Output::Discover(DiscoverResult {
                    results: Vec::new(),
                    total,
                    overview: Some(overview),
                    hidden: hidden.as_ref().map(|h| h.count),
                    note: hidden.map(|h| h.note),
                }));
            }
            let vector = query_vector(apis, &d.query).await;
            let (hits, total) = apis.index.search_total(&Query {
                text: d.query.trim(),
                method: d.method,
                tag: d.tag.as_deref(),
                limit: d.limit(),
                allowed: Some(&allowed),
                vector: vector.as_deref(),
            });
            let shown = if d.limit.is_some() {
                hits.len()
            } else {
                let scores: Vec<f32> = hits.iter().map(|h| h.score).collect();
                shown_by_default(&scores)
            };
            let mut previous: Option<&[String]> = None;
            let mut results = Vec::with_capacity(shown);
            for h in &hits[..shown] {
                let r = OpRef {
                    api: h.spec,
                    op: h.op,
                };
                let Some(op) = apis.operation(r) else {
                    continue;
                };
                let repeated = previous == Some(op.tags.as_slice());
                previous = Some(op.tags.as_slice());
                results.push(DiscoverHit {
                    operation_id: apis.shown_id(r),
                    method: op.method,
                    path: op.path.clone(),
                    summary: short_summary(op),
                    tags: if repeated {
                        Vec::new()
                    } else {
                        op.tags.clone()
                    },
                    mutating: op.mutating(),
                });
            }
            // Nothing found: say whether permissions hid operations that match.
            let hidden = if results.is_empty() {
                let in_scope = |api: usize, _: usize| only.is_none_or(|o| o == api);
                let (all_hits, all_total) = apis.index.search_total(&Query {
                    text: d.query.trim(),
                    method: d.method,
                    tag: d.tag.as_deref(),
                    limit: d.limit(),
                    allowed: Some(&in_scope),
                    vector: vector.as_deref(),
                });
                let unseen: Vec<OpRef> = all_hits
                    .iter()
                    .map(|h| OpRef {
                        api: h.spec,
                        op: h.op,
                    })
                    .filter(|r| !allowed(r.api, r.op))
                    .collect();
                why_hidden(
                    apis,
                    principal,
                    all_total.saturating_sub(total),
                    &unseen,
                    true,
                )
            } else {
                None
            };
            Ok(Output::Discover(DiscoverResult {
                results,
                total,
                overview: None,
                hidden: hidden.as_ref().map(|h| h.count),
                note: hidden.map(|h| h.note),
            }))
        }
        Prepared::Schema(r, SchemaDetail::Part(path)) => {
            let api = &apis.list[r.api];
            let op = &api.spec.operations[r.op];
            let part = api.spec.describe_part(op, &path).map_err(|message| {
                ToolError::invalid(
                    format!("{message}; or leave `detail` out for the whole operation, shortened"),
                    vec![Violation {
                        pointer: "/detail".into(),
                        message,
                    }],
                )
            })?;
            Ok(Output::SchemaPart(Box::new(SchemaPart {
                operation_id: apis.shown_id(r),
                method: op.method,
                path: op.path.clone(),
                detail: path,
                part,
            })))
        }
        Prepared::Schema(r, SchemaDetail::View(detail)) => {
            let api = &apis.list[r.api];
            let op = &api.spec.operations[r.op];
            let mut operation = api.spec.describe(op, detail);
            // Where calls really go: `--upstream` replaces the spec's server.
            if operation.server_url.is_some() {
                operation.server_url =
                    crate::upstream::server_url(api.upstream.config(), &api.spec, op)
                        .or(operation.server_url);
            }
            if apis.qualified() {
                operation.operation_id = apis.shown_id(r);
            }
            let to = super::credentials::call_api(apis, api);
            if let Some(security) = security_view(api, to, principal, op, detail) {
                operation.security = Some(security);
            }
            // A credential parameter a configured credential stands for is not the agent's to
            // give: it leaves `parameters`, and `security` says the server supplies it.
            let used = super::credentials::credential_params(apis, api, principal, op);
            if let Some(shown) = super::credentials::supplied_view(&used) {
                operation.parameters.retain(|v| {
                    !used.iter().any(|c| {
                        c.supplied
                            && c.param.location.as_str() == v.location
                            && c.param.name == v.name
                    })
                });
                let security = operation.security.get_or_insert_with(|| {
                    json!({"supplied": true, "note": "apigate adds these credentials to the call; \
                        do not send them yourself"})
                });
                if let Value::Object(fields) = security {
                    fields.insert("suppliedParameters".into(), shown);
                }
            }
            let select = operation.outline.as_ref().and_then(super::select::lesson);
            Ok(Output::Schema(Box::new(SchemaResult {
                operation,
                api: apis.qualified().then(|| api.name.clone()),
                select,
            })))
        }
        Prepared::Execute(planned) => {
            let mut view = planned.request.view();
            if let Some(identity) = identity {
                identity.mark_dry_run(&mut view);
            }
            let Value::Object(request) = view else {
                unreachable!("a request's view is an object")
            };
            Ok(Output::DryRun(DryRunResult {
                dry_run: true,
                operation_id: apis.shown_id(planned.at()),
                api: apis
                    .qualified()
                    .then(|| apis.list[planned.api].name.clone()),
                request,
            }))
        }
    }
}

/// `api_schema`'s `security`: the alternatives the operation accepts (any one will do), each
/// scheme with where its credential goes and whether apigate supplies it. The agent never
/// sends credentials itself (it may not set `Authorization`, `Cookie` or a configured header).
fn security_view(
    api: &crate::apis::Api,
    to: crate::auth::session_upstream::CallApi<'_>,
    principal: &Principal,
    op: &Operation,
    detail: Detail,
) -> Option<Value> {
    let alternatives = crate::spec::security_alternatives(op.security.as_ref())?;
    // Only the headers stored for this API count: the others never go to it.
    let supplied = |scheme: &str| super::credentials::scheme_supplied(api, principal, to, scheme);
    if alternatives.is_empty() || alternatives.iter().any(Vec::is_empty) {
        return Some(json!({"needed": false}));
    }
    let mut any = false;
    let shown: Vec<Value> = alternatives
        .iter()
        .map(|alt| {
            let mut all = true;
            let schemes: Vec<Value> = alt
                .iter()
                .map(|name| {
                    let mut v = match api.spec.security_schemes.get(name) {
                        Some(k) => k.describe(),
                        None => json!({"type": "undefined in the spec"}),
                    };
                    let ok = supplied(name);
                    all &= ok;
                    v["scheme"] = Value::String(name.clone());
                    v["supplied"] = Value::Bool(ok);
                    v
                })
                .collect();
            any |= all;
            Value::Array(schemes)
        })
        .collect();
    // Credentials apigate supplies are all an agent needs to know of them (the compact view).
    if any && detail == Detail::Compact {
        return Some(json!({"needed": true, "supplied": true}));
    }
    Some(json!({
        "needed": true,
        "alternatives": shown,
        "supplied": any,
        "note": if any {
            "apigate adds these credentials to the call; do not send them yourself"
        } else {
            "apigate has no credential for any alternative: the API will likely refuse the call \
             (401 or 403); the operator can add one (--upstream-credential SCHEME=VALUE)"
        },
    }))
}

/// A request that got no answer: says where it went (the origin, never credentials), whether
/// it may have been applied (POST and PATCH are not idempotent), and how to fix the target.
pub(super) fn send_failure(
    api: &crate::apis::Api,
    op: &Operation,
    request: &PreparedRequest,
    e: crate::upstream::UpstreamError,
) -> ToolError {
    use crate::upstream::UpstreamError as E;
    let lost_answer = matches!(e, E::Timeout { .. } | E::Connect(_) | E::Other(_));
    let origin = request.url().origin().ascii_serialization();
    let mut error = upstream_error(e).with("target", Value::String(origin.clone()));
    if lost_answer && !op.method.is_idempotent() {
        let key = op.parameters.iter().find(|p| {
            p.location == ParamIn::Header && p.name.eq_ignore_ascii_case("idempotency-key")
        });
        error.message.push_str(&format!(
            ". {} is not idempotent: the API may have received and applied it. Do not repeat it \
             blindly; check first (for example with a GET of the resource){}",
            op.method,
            match key {
                Some(p) => format!(", or repeat it with the same {} header", p.name),
                None => String::new(),
            }
        ));
        error = error.with("mayHaveBeenApplied", Value::Bool(true));
    }
    if lost_answer && api.upstream.config().base_url.is_none() {
        error.message.push_str(&format!(
            ". Calls go to the spec's server {origin}; if the API runs elsewhere, the operator \
             starts apigate with --upstream URL"
        ));
    }
    error
}

fn upstream_error(e: crate::upstream::UpstreamError) -> ToolError {
    use crate::upstream::UpstreamError as E;
    match e {
        E::InvalidArguments(message) => ToolError::invalid(
            message.clone(),
            vec![Violation {
                pointer: String::new(),
                message,
            }],
        ),
        E::Timeout { .. } => ToolError::new(Code::UpstreamTimeout, e.to_string()),
        other => ToolError::new(Code::UpstreamError, other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::shown_by_default;

    #[test]
    fn the_default_shows_the_hits_close_to_the_best() {
        // Clear: the rest score under 60 % of the best; three are shown all the same.
        assert_eq!(shown_by_default(&[90.0, 50.0, 40.0, 30.0, 20.0]), 3);
        // Close ones stay, down to 60 % of the best.
        let close = [100.0, 90.0, 80.0, 70.0, 61.0, 59.0, 50.0];
        assert_eq!(shown_by_default(&close), 5);
        // Fewer than three: all of them; no scores (filters only): all of them.
        assert_eq!(shown_by_default(&[5.0, 1.0]), 2);
        assert_eq!(shown_by_default(&[0.0; 10]), 10);
        assert_eq!(shown_by_default(&[]), 0);
    }
}
