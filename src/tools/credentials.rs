//! The credentials one `api_execute` call carries beyond the configured `--upstream-header`s:
//! the security schemes' credentials the operation needs, the user session's own headers (those
//! stored for the call's API only) and the signed identity assertion; and where they came
//! from, for the audit row (never a value).

use super::{Code, Engine, ToolError};
use crate::apis::{Api, Apis};
use crate::auth::Principal;
use crate::auth::session_upstream::CallApi;
use crate::spec::Operation;
use crate::upstream::{CallCredentials, PreparedRequest};

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
            call.set_header(name.clone(), value.clone(), "session");
        }
    }
    call
}

/// Where the credentials of a call came from, for its audit row (never a value): `server`
/// when a configured `--upstream-header` went out (one the call did not replace), `oauth` when
/// the client-credentials token did (the call sets no `Authorization` of its own), then the
/// call's own sources.
pub(super) fn credential_sources(api: &Api, call: &CallCredentials) -> Vec<String> {
    let server_sent = api
        .upstream
        .config()
        .headers
        .iter()
        .any(|(n, _)| call.header(n).is_none());
    let oauth_sent =
        api.upstream.oauth().is_some() && call.header(&http::header::AUTHORIZATION).is_none();
    server_sent
        .then(|| "server".to_string())
        .into_iter()
        .chain(oauth_sent.then(|| "oauth".to_string()))
        .chain(call.sources())
        .collect()
}

/// The credentials one call carries on top of the configured `--upstream-header`s (and the
/// OAuth token `send` adds): the credentials of the security schemes the operation requires
/// (`--upstream-credential`), the session's own headers, then the signed identity assertion,
/// each replacing an earlier header of the same name. Fails closed: a call whose assertion
/// cannot be made is not sent.
pub(super) fn call_credentials(
    engine: &Engine,
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
    if let Some(identity) = &engine.identity {
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
            crate::auth::identity::SOURCE,
        );
    }
    Ok(credentials)
}
