//! What each tool does once the pipeline lets it run: parsing the typed arguments and
//! resolving the operation they name (once, in [`parse`]), checking its permission and
//! validating and building the request (in [`prepare`]), and the results complete at once
//! ([`done`]: discovery and a schema, whose bodies are `discover.rs` and `schema.rs`, and a
//! dry run).
//! Production, tests and the fuzz target all go through these functions.

use serde_json::{Map, Value};

use super::args::{self, DiscoverArgs, ExecuteArgs, Input, InputLimits, SchemaArgs, SchemaDetail};
use super::error::ToolError;
use super::output::{DryRunResult, Output};
use super::resolve::Visibility;
use super::resolve::{Found, api_named, find, may_see, permitted};
use super::select::Select;
use super::upload::UploadLimits;
use crate::apis::{Apis, OpRef};
use crate::auth::Principal;
use crate::auth::identity::Identity;
use crate::spec::Method;
use crate::spec::{Operation, ParamIn, Violation};
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
    paging_on_get(op, pages, skip_items)?;
    let media = media_choices(op, call.content_type.as_deref(), call.accept.as_deref());
    if !media.is_empty() {
        return Err(ToolError::invalid(
            "the operation does not offer that media type (see `violations` for the choices; \
             api_schema lists them)",
            media,
        ));
    }
    fill_path_params(
        &mut call,
        found.resolved.path_values,
        target.path.as_deref(),
    )?;
    agent_headers(op, &mut call)?;
    super::credentials::credential_args(apis, api, principal, op, &mut call)?;
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

/// `pages` and `skipItems` page through a list: GET only.
fn paging_on_get(
    op: &Operation,
    pages: Option<usize>,
    skip_items: Option<usize>,
) -> Result<(), ToolError> {
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
    Ok(())
}

/// A concrete path (`path`) fills pathParams with its `values`; a value given both ways must
/// agree.
fn fill_path_params(
    call: &mut CallArgs,
    values: Vec<(String, String)>,
    path: Option<&str>,
) -> Result<(), ToolError> {
    let mut conflicts = Vec::new();
    for (name, value) in values {
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
                    path.unwrap_or_default()
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
    Ok(())
}

/// The headers the agent set: none the server adds (credentials, connection headers), each
/// named as the operation declares it (header names are case-insensitive).
fn agent_headers(op: &Operation, call: &mut CallArgs) -> Result<(), ToolError> {
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

/// The tools whose result is complete at once: discovery, a schema, a dry run.
pub(super) async fn done(
    visibility: &Visibility,
    identity: Option<&Identity>,
    apis: &Apis,
    principal: &Principal,
    prepared: Prepared,
) -> Result<Output, ToolError> {
    match prepared {
        Prepared::Discover(d) => super::discover::discover(visibility, apis, principal, d).await,
        Prepared::Schema(r, detail) => super::schema::schema(apis, principal, r, detail),
        Prepared::Execute(planned) => Ok(dry_run(identity, apis, &planned)),
    }
}

/// `api_execute` with `dryRun`: the request it would send, credentials shown as `[redacted]`.
fn dry_run(identity: Option<&Identity>, apis: &Apis, planned: &Planned) -> Output {
    let mut view = planned.request.view();
    if let Some(identity) = identity {
        identity.mark_dry_run(&mut view);
    }
    let Value::Object(request) = view else {
        unreachable!("a request's view is an object")
    };
    Output::DryRun(DryRunResult {
        dry_run: true,
        operation_id: apis.shown_id(planned.at()),
        api: apis
            .qualified()
            .then(|| apis.list[planned.api].name.clone()),
        request,
    })
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
