//! The credentials one `api_execute` call carries beyond the configured `--upstream-header`s:
//! the security schemes' credentials the operation needs, the user session's own headers (those
//! stored for the call's API only) and the signed identity assertion; and where they came
//! from, for the audit row (never a value). Also which of an operation's parameters are
//! credentials a configured one stands for ([`credential_params`]: the agent neither gives
//! them nor is asked for them), what the operator configures when none is
//! ([`missing_credential`]), and how a call's arguments are checked against both
//! ([`credential_args`]).

use serde_json::Value;

use super::error::ToolError;
use crate::apis::{Api, Apis};
use crate::auth::Principal;
use crate::auth::identity::Identity;
use crate::auth::session_upstream::CallApi;
use crate::spec::{CredentialParam, KeyIn, Operation, ParamIn, Parameter, SchemeKind, Violation};
use crate::types::Code;
use crate::types::CredentialSource;
use crate::upstream::{CallArgs, CallCredentials, PreparedRequest};

/// Which API a call to `api` (one of `apis`) is, as stored credentials name it.
pub(super) fn call_api<'a>(apis: &Apis, api: &'a Api) -> CallApi<'a> {
    CallApi {
        name: &api.name,
        only: apis.list.len() == 1,
    }
}

/// The session's own upstream headers for the API `to` (source `session`), which replace
/// configured `--upstream-header`s of the same name. Headers stored for another API never go
/// out.
pub(super) fn session_credentials(principal: &Principal, to: CallApi<'_>) -> CallCredentials {
    let mut call = CallCredentials::default();
    if let Some(up) = &principal.upstream {
        for (name, value) in up.for_call(to) {
            call.set_header(name.clone(), value.clone(), CredentialSource::Session);
        }
    }
    call
}

/// Where the credentials of a call came from, for its audit row (never a value): `server`
/// when a configured `--upstream-header` went out (one the call did not replace), `oauth` when
/// the client-credentials token did (the call sets no `Authorization` of its own), then the
/// call's own sources.
pub(super) fn credential_sources(api: &Api, call: &CallCredentials) -> Vec<CredentialSource> {
    let server_sent = api
        .upstream
        .config()
        .headers
        .iter()
        .any(|(n, _)| call.header(n).is_none());
    let oauth_sent =
        api.upstream.oauth().is_some() && call.header(&http::header::AUTHORIZATION).is_none();
    server_sent
        .then_some(CredentialSource::Server)
        .into_iter()
        .chain(oauth_sent.then_some(CredentialSource::OAuth))
        .chain(call.sources())
        .collect()
}

/// The credentials one call carries on top of the configured `--upstream-header`s (and the
/// OAuth token `send` adds): the credentials of the security schemes the operation requires
/// (`--upstream-credential`), the session's own headers, then the signed identity assertion,
/// each replacing an earlier header of the same name. Fails closed: a call whose assertion
/// cannot be made is not sent.
pub(super) fn call_credentials(
    identity: Option<&Identity>,
    apis: &Apis,
    api: &Api,
    principal: &Principal,
    op: &Operation,
    request: &PreparedRequest,
    call_id: &str,
) -> Result<CallCredentials, ToolError> {
    let mut credentials = CallCredentials::default();
    let schemes = &api.upstream.config().schemes;
    if !schemes.is_empty()
        && let Some(requirement) = crate::spec::security_alternatives(op.security.as_ref())
    {
        schemes.apply(&requirement, &mut credentials);
    }
    credentials.extend(&session_credentials(principal, call_api(apis, api)));
    if let Some(identity) = identity {
        let facts = crate::auth::identity::CallFacts {
            call_id,
            operation: &op.id,
            method: op.method.as_str(),
            url: request.url(),
        };
        let value = identity.header_value(principal, &facts).map_err(|e| {
            tracing::error!(error = %e, "could not sign the identity assertion; the call is not sent");
            ToolError::new(
                Code::Internal,
                "the server could not sign this call's identity assertion; it was not sent",
            )
        })?;
        credentials.set_header(
            identity.header().clone(),
            value,
            CredentialSource::Assertion,
        );
    }
    Ok(credentials)
}

/// Whether a static (`--upstream-header`) or session header `name` goes to `api` on calls
/// `principal` makes (only the session headers stored for that API count).
fn header_configured(api: &Api, principal: &Principal, to: CallApi<'_>, name: &str) -> bool {
    api.upstream.config().is_credential(name)
        || principal.upstream.as_ref().is_some_and(|u| {
            u.for_call(to)
                .any(|(n, _)| n.as_str().eq_ignore_ascii_case(name))
        })
}

/// Whether a credential for the security scheme `scheme` goes to `api` on calls `principal`
/// makes: `--upstream-credential` names it; for a scheme that uses `Authorization` (bearer,
/// basic, oauth2), OAuth or a static or session `Authorization` header is configured; for an
/// `apiKey` header scheme, a static or session header of its name is.
pub(super) fn scheme_supplied(
    api: &Api,
    principal: &Principal,
    to: CallApi<'_>,
    scheme: &str,
) -> bool {
    if api.upstream.config().schemes.get(scheme).is_some() {
        return true;
    }
    let sets = |name: &str| header_configured(api, principal, to, name);
    match api.spec.security_schemes.get(scheme) {
        Some(k) if k.uses_authorization() => {
            api.upstream.oauth().is_some() || sets("authorization")
        }
        Some(SchemeKind::ApiKey { location, name }) => match location {
            KeyIn::Header => sets(name),
            KeyIn::Cookie => sets("cookie"),
            KeyIn::Query => false,
        },
        _ => false,
    }
}

/// One credential parameter of an operation (`spec::credential_param`): a header or query
/// parameter that is the API's credential, not something the agent knows.
pub(super) struct CredentialParamUse<'a> {
    pub param: &'a Parameter,
    pub why: CredentialParam,
    /// A credential configured for this call stands for it: a configured header of its own
    /// name (sent there); else, on an operation with a security requirement, one of its
    /// alternatives is supplied (the API gets the credential its security asks for, and the
    /// parameter is another spelling of it: Slack's `token` beside `Authorization`); else, on
    /// one without, for a header, any credential configured for the API. A query parameter
    /// no scheme places stays the agent's there: no flag could send it. The agent is not
    /// asked for a supplied one and may not set it; no second copy is made.
    pub supplied: bool,
}

/// The credential parameters of `op` on `principal`'s calls to `api`, and whether a
/// configured credential stands for each. Without one, a name alone (`token`) does not make
/// a parameter the server's: the agent may still give it, and only a required one it leaves
/// out is refused, by [`missing_credential`].
pub(super) fn credential_params<'a>(
    apis: &Apis,
    api: &Api,
    principal: &Principal,
    op: &'a Operation,
) -> Vec<CredentialParamUse<'a>> {
    let found: Vec<(&Parameter, CredentialParam)> = op
        .parameters
        .iter()
        .filter_map(|p| Some((p, api.spec.credential_param(op, p)?)))
        .collect();
    if found.is_empty() {
        return Vec::new();
    }
    let to = call_api(apis, api);
    // Whether the credential the operation's security asks for goes out (`None`: it names
    // none), and whether any credential goes to the API.
    let accepted = crate::spec::security_alternatives(op.security.as_ref())
        .filter(|alts| !alts.is_empty())
        .map(|alts| {
            alts.iter()
                .any(|alt| alt.iter().all(|s| scheme_supplied(api, principal, to, s)))
        });
    let any = !api.upstream.config().headers.is_empty()
        || api.upstream.oauth().is_some()
        || principal
            .upstream
            .as_ref()
            .is_some_and(|u| u.for_call(to).next().is_some());
    found
        .into_iter()
        .map(|(param, why)| {
            let header = param.location == ParamIn::Header;
            let own = header && header_configured(api, principal, to, &param.name);
            CredentialParamUse {
                param,
                why,
                supplied: own || accepted.unwrap_or(header && any),
            }
        })
        .collect()
}

/// How many of an operation's security alternatives a missing credential's error names.
const MAX_ALTERNATIVES_SHOWN: usize = 3;

/// The error for a required credential parameter `c` of `op` that no configured credential
/// stands for and the agent left out: what the operator configures (the operation's security
/// schemes, else a header of that name). `None` when no flag of apigate's can supply it (a
/// query parameter no scheme places): the request builder's own error stands then.
pub(super) fn missing_credential(
    api: &Api,
    op: &Operation,
    c: &CredentialParamUse<'_>,
) -> Option<ToolError> {
    let p = c.param;
    let mut ways: Vec<String> = Vec::new();
    let alternatives = crate::spec::security_alternatives(op.security.as_ref()).unwrap_or_default();
    for alt in alternatives.iter().take(MAX_ALTERNATIVES_SHOWN) {
        let kinds: Option<Vec<(&String, &SchemeKind)>> = alt
            .iter()
            .map(|s| api.spec.security_schemes.get(s).map(|k| (s, k)))
            .collect();
        let Some(kinds) = kinds else { continue };
        if kinds.iter().any(|(_, k)| matches!(k, SchemeKind::Other(_))) {
            continue;
        }
        ways.push(
            kinds
                .iter()
                .map(|(s, _)| format!("--upstream-credential {s}=…"))
                .collect::<Vec<_>>()
                .join(" with "),
        );
        if let [(_, k)] = kinds.as_slice() {
            match k {
                SchemeKind::Bearer | SchemeKind::OAuth2 => {
                    ways.push("--upstream-header \"Authorization: Bearer …\"".into())
                }
                SchemeKind::Basic => {
                    ways.push("--upstream-header \"Authorization: Basic …\"".into())
                }
                SchemeKind::ApiKey {
                    location: KeyIn::Header,
                    name,
                } => ways.push(format!("--upstream-header \"{name}: …\"")),
                _ => {}
            }
        }
    }
    if ways.is_empty() && p.location == ParamIn::Header {
        ways.push(format!("--upstream-header \"{}: …\"", p.name));
    }
    ways.dedup();
    if ways.is_empty() {
        return None;
    }
    let how = match &c.why {
        CredentialParam::Scheme(s) => format!("the key of its security scheme {s}"),
        CredentialParam::Named => "a credential, by its name".to_string(),
    };
    let message = format!(
        "{} ({}) requires {}.{} ({how}); credentials come from the operator's configuration, \
         and none that this operation accepts is configured for this API. Tell the operator \
         to start apigate with {} (in apigate.toml: the API's upstream-credentials or \
         upstream-headers); apigate then sends it and the call needs no {} from you",
        op.id,
        op.key(),
        crate::spec::section(p.location),
        p.name,
        ways.join(" or "),
        p.name,
    );
    Some(ToolError::new(Code::UpstreamError, message).with(
        "missingCredential",
        serde_json::json!({"in": p.location.as_str(), "name": p.name, "configure": ways}),
    ))
}

/// `api_schema`'s note on the credential parameters a configured credential stands for: they
/// are not among the `parameters` it lists, and the agent does not send them.
pub(super) fn supplied_view(used: &[CredentialParamUse<'_>]) -> Option<Value> {
    let shown: Vec<Value> = used
        .iter()
        .filter(|c| c.supplied)
        .map(|c| serde_json::json!({"in": c.param.location.as_str(), "name": c.param.name}))
        .collect();
    (!shown.is_empty()).then_some(Value::Array(shown))
}

/// The operation's credential parameters (`credentials::credential_params`) in `call`: the
/// agent's value for one a configured credential stands for is refused (it would replace
/// the configured credential, or go beside it), a required one neither given nor supplied is
/// an error that says what the operator configures, and the builder learns which are
/// supplied (`CallArgs::supplied`).
pub(super) fn credential_args(
    apis: &Apis,
    api: &crate::apis::Api,
    principal: &Principal,
    op: &Operation,
    call: &mut CallArgs,
) -> Result<(), ToolError> {
    let used = credential_params(apis, api, principal, op);
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
            && let Some(e) = missing_credential(api, op, c)
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
