//! `/admin/v1/*`: server keys, sessions, roles, signed-in people's upstream credentials and the
//! audit log over HTTP, described by
//! `openapi/apigate-admin.yaml` (a test checks that [`mounted`] and the document agree). A thin
//! adapter over `auth::Auth`'s admin operations, run as the calling key (`Auth::admin_as`: a
//! read-only key only reads, nothing is granted beyond the key's features, every change is
//! audited): every request needs an `x-api-key` holding `apigate.admin`; errors are JSON
//! `{error, code}`.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, MatchedPath, Path, Query, Request, State};
use axum::handler::Handler;
use axum::http::Method;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::error::ApiError;
use crate::auth::{
    ADMIN_FEATURE, Admin, AdminError, AuditQuery, Auth, AuthError, KeyPrincipal, NewKey,
    NewSession, OAuthUserQuery, OAuthUserRef, OAuthUserUpstream, SessionQuery, SessionRef,
};
use crate::types::Code;

type AdminRoute = (Method, &'static str, MethodRouter<Auth>);

fn route<H, T>(method: Method, path: &'static str, handler: H) -> AdminRoute
where
    H: Handler<T, Auth>,
    T: 'static,
{
    let filter = MethodFilter::try_from(method.clone()).expect("admin routes use standard methods");
    (method, path, on(filter, handler))
}

/// Every admin route with its handler.
fn routes() -> [AdminRoute; 13] {
    [
        route(Method::POST, "/admin/v1/keys", create_key),
        route(Method::GET, "/admin/v1/keys", list_keys),
        route(Method::DELETE, "/admin/v1/keys/{id}", revoke_key),
        route(Method::POST, "/admin/v1/sessions", create_session),
        route(Method::GET, "/admin/v1/sessions", list_sessions),
        route(
            Method::POST,
            "/admin/v1/sessions/revoke",
            revoke_session_by_token,
        ),
        route(Method::DELETE, "/admin/v1/sessions/{id}", revoke_session),
        route(Method::GET, "/admin/v1/roles", list_roles),
        route(Method::PUT, "/admin/v1/roles/{name}", set_role),
        route(Method::GET, "/admin/v1/audit", audit),
        route(Method::GET, "/admin/v1/oauth-users", list_oauth_users),
        route(
            Method::PUT,
            "/admin/v1/oauth-users/upstream",
            set_oauth_user_upstream,
        ),
        route(
            Method::DELETE,
            "/admin/v1/oauth-users/upstream",
            clear_oauth_user_upstream,
        ),
    ]
}

/// Every admin route the server mounts, as (method, path template): what
/// `openapi/apigate-admin.yaml` must document.
pub fn mounted() -> Vec<(Method, &'static str)> {
    routes().into_iter().map(|(m, p, _)| (m, p)).collect()
}

/// The admin routes, with absolute paths (`/admin/v1/…`): merge into the main router.
pub fn router(auth: Auth) -> Router {
    let mut router = Router::new();
    for (_, path, handler) in routes() {
        router = router.route(path, handler);
    }
    router
        .layer(middleware::from_fn_with_state(auth.clone(), require_admin))
        .with_state(auth)
}

impl From<AdminError> for ApiError {
    fn from(e: AdminError) -> ApiError {
        let code = match &e {
            AdminError::Invalid(_) => Code::InvalidArguments,
            AdminError::NotFound(_) => Code::NotFound,
            AdminError::ReadOnly { .. }
            | AdminError::BeyondOwn { .. }
            | AdminError::RoleBeyondOwn { .. } => Code::Forbidden,
            AdminError::Conflict(_) => Code::Conflict,
            AdminError::Unavailable(_) => Code::Unavailable,
            AdminError::Internal => Code::Internal,
        };
        let message = match &e {
            AdminError::Unavailable(_) => "the database is unavailable; try again later".into(),
            other => other.to_string(),
        };
        let mut error = ApiError::new(code, message);
        match e {
            AdminError::ReadOnly { .. } => {
                error.details.insert("readOnly".into(), true.into());
            }
            AdminError::BeyondOwn { missing } | AdminError::RoleBeyondOwn { missing, .. } => {
                error.details.insert("missing".into(), missing.into());
            }
            _ => {}
        }
        error
    }
}

impl From<JsonRejection> for ApiError {
    fn from(e: JsonRejection) -> ApiError {
        ApiError::new(Code::InvalidArguments, e.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(e: QueryRejection) -> ApiError {
        ApiError::new(Code::InvalidArguments, e.body_text())
    }
}

async fn require_admin(
    State(auth): State<Auth>,
    headers: HeaderMap,
    mut req: Request,
    next: Next,
) -> Response {
    // Read as the tier-1 guard reads it: trimmed, one place.
    let presented = super::guard::presented_key(&headers).unwrap_or("");
    let source = super::error::peer_ip(req.extensions());
    // Every refusal is audited (bounded per key, and for unauthenticated callers together).
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string());
    let refuse = async |key: Option<&KeyPrincipal>, e: AuthError| {
        let error = ApiError::from(e);
        auth.record_admin_refusal(key, presented, &method, route.as_deref(), error.code)
            .await;
        error.into_response()
    };
    let key = match auth.authenticate_key_from(presented, source).await {
        Ok(k) => k,
        Err(e) => return refuse(None, e).await,
    };
    if !key.features.allows(ADMIN_FEATURE) {
        let e = AuthError::Forbidden {
            missing: ADMIN_FEATURE.into(),
        };
        return refuse(Some(&key), e).await;
    }
    if let Err(e) = auth.check_rate(&key.principal()).await {
        return refuse(Some(&key), e).await;
    }
    req.extensions_mut().insert(key);
    let mut resp = next.run(req).await;
    // Keys and tokens appear in these responses: never cache them anywhere.
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The admin operations as the key `require_admin` let in: `Auth::admin_as` that key.
struct AsCaller(Admin);

impl FromRequestParts<Auth> for AsCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, auth: &Auth) -> Result<AsCaller, ApiError> {
        match parts.extensions.get::<KeyPrincipal>() {
            Some(key) => Ok(AsCaller(auth.admin_as(key))),
            // Only a route mounted without `require_admin` could get here.
            None => Err(ApiError::new(
                Code::Internal,
                "the admin route has no verified key",
            )),
        }
    }
}

/// A JSON body, refused as the admin API's error shape when it does not parse.
struct Body<T>(T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Body<T>, ApiError> {
        let Json(v) = Json::<T>::from_request(req, state).await?;
        Ok(Body(v))
    }
}

/// A query string, refused as the admin API's error shape when it does not parse.
struct Params<T>(T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Params<T>, ApiError> {
        let Query(v) = Query::<T>::from_request_parts(parts, state).await?;
        Ok(Params(v))
    }
}

type Reply = Result<Response, ApiError>;

fn ok(v: impl Serialize) -> Reply {
    Ok(Json(v).into_response())
}

async fn create_key(AsCaller(admin): AsCaller, Body(req): Body<NewKey>) -> Reply {
    let created = admin.create_key(req).await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

async fn list_keys(AsCaller(admin): AsCaller) -> Reply {
    ok(json!({ "keys": admin.list_keys().await? }))
}

async fn revoke_key(AsCaller(admin): AsCaller, Path(id): Path<String>) -> Reply {
    ok(admin.revoke_key(&id).await?)
}

async fn create_session(AsCaller(admin): AsCaller, Body(req): Body<NewSession>) -> Reply {
    let created = admin.create_session(req).await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

async fn revoke_session(AsCaller(admin): AsCaller, Path(id): Path<String>) -> Reply {
    revoke_one(
        &admin,
        &id,
        false,
        "do not put session tokens in URLs: use the session id here, or POST the token to \
         /admin/v1/sessions/revoke",
    )
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RevokeByToken {
    token: String,
}

async fn revoke_session_by_token(
    AsCaller(admin): AsCaller,
    Body(req): Body<RevokeByToken>,
) -> Reply {
    revoke_one(
        &admin,
        &req.token,
        true,
        "`token` must be a session token (sess_…); revoke by id with DELETE \
         /admin/v1/sessions/{id}",
    )
    .await
}

/// Revokes the session `text` names, which must be a token when `token` is set and an id
/// otherwise (`wrong_kind` says why not).
async fn revoke_one(admin: &Admin, text: &str, token: bool, wrong_kind: &str) -> Reply {
    let which = SessionRef::parse(text)?;
    if matches!(which, SessionRef::Token(_)) != token {
        return Err(ApiError::new(Code::InvalidArguments, wrong_kind));
    }
    ok(admin.revoke_session(&which).await?)
}

async fn list_sessions(AsCaller(admin): AsCaller, Params(q): Params<SessionQuery>) -> Reply {
    ok(admin.list_sessions(&q).await?)
}

async fn audit(AsCaller(admin): AsCaller, Params(q): Params<AuditQuery>) -> Reply {
    ok(admin.audit(&q).await?)
}

async fn list_roles(AsCaller(admin): AsCaller) -> Reply {
    ok(json!({ "roles": admin.list_roles().await? }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetRole {
    features: Vec<String>,
}

async fn set_role(
    AsCaller(admin): AsCaller,
    Path(name): Path<String>,
    Body(req): Body<SetRole>,
) -> Reply {
    ok(admin.set_role(&name, &req.features).await?)
}

async fn list_oauth_users(AsCaller(admin): AsCaller, Params(q): Params<OAuthUserQuery>) -> Reply {
    ok(admin.list_oauth_users(&q).await?)
}

async fn set_oauth_user_upstream(
    AsCaller(admin): AsCaller,
    Body(req): Body<OAuthUserUpstream>,
) -> Reply {
    ok(admin.set_oauth_user_upstream(req).await?)
}

/// The person in the query (`?issuer=…&subject=…`): neither is a secret.
async fn clear_oauth_user_upstream(
    AsCaller(admin): AsCaller,
    Params(who): Params<OAuthUserRef>,
) -> Reply {
    ok(admin.clear_oauth_user_upstream(&who).await?)
}
