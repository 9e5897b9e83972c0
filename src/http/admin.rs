//! `/admin/v1/*`: server keys, sessions, roles and the audit log over HTTP, described by
//! `openapi/apigate-admin.yaml` (a test checks that [`mounted`] and the document agree). A thin
//! adapter over `auth::Auth`'s admin operations, run as the calling key (`Auth::admin_as`: a
//! read-only key only reads, nothing is granted beyond the key's features, every change is
//! audited): every request needs an `x-api-key` holding `apigate.admin`; errors are JSON
//! `{error, code}`.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{MatchedPath, Path, Query, Request, State};
use axum::handler::Handler;
use axum::http::Method;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use axum::{Extension, Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::auth::{
    ADMIN_FEATURE, AdminError, AuditQuery, Auth, AuthError, KeyPrincipal, NewKey, NewSession,
    SessionQuery, SessionRef,
};

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
fn routes() -> [AdminRoute; 10] {
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

/// The response for an authentication failure anywhere in the HTTP layer (e.g. the tier-1
/// middleware in front of `/mcp`): 401 / 403 / 429 (with `Retry-After`) / 503 and a JSON body
/// `{error, code, …details}`.
pub fn auth_error_response(e: AuthError) -> Response {
    ApiError::from(e).into_response()
}

/// An error body `{error, code, …details}` with its status.
struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    details: serde_json::Map<String, serde_json::Value>,
    retry_after_secs: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            details: serde_json::Map::new(),
            retry_after_secs: None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = serde_json::Map::new();
        body.insert("error".into(), self.message.into());
        body.insert("code".into(), self.code.into());
        body.extend(self.details);
        let mut resp = (self.status, Json(serde_json::Value::Object(body))).into_response();
        if let Some(secs) = self.retry_after_secs {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> ApiError {
        let (status, code) = match &e {
            AuthError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "UNAUTHORIZED"),
            AuthError::SessionExpired => (StatusCode::UNAUTHORIZED, "SESSION_EXPIRED"),
            AuthError::Forbidden { .. } | AuthError::ReadOnly { .. } => {
                (StatusCode::FORBIDDEN, "FORBIDDEN")
            }
            AuthError::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "RATE_LIMITED"),
            AuthError::Unavailable(_) | AuthError::Credentials(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE")
            }
        };
        let message = match &e {
            // Says the database cannot be reached; its error stays in the log.
            AuthError::Unavailable(_) => format!("{e}; try again later"),
            other => other.to_string(),
        };
        let mut error = ApiError::new(status, code, message);
        match e {
            AuthError::Forbidden { missing } => {
                error.details.insert("missing".into(), missing.into());
            }
            AuthError::ReadOnly { .. } => {
                error.details.insert("readOnly".into(), true.into());
            }
            AuthError::RateLimited { retry_after_ms } => {
                error
                    .details
                    .insert("retryAfterMs".into(), retry_after_ms.into());
                error.retry_after_secs = Some(retry_after_ms.div_ceil(1000));
            }
            _ => {}
        }
        error
    }
}

impl From<AdminError> for ApiError {
    fn from(e: AdminError) -> ApiError {
        let (status, code) = match &e {
            AdminError::Invalid(_) => (StatusCode::BAD_REQUEST, "INVALID_ARGUMENTS"),
            AdminError::NotFound(_) => (StatusCode::NOT_FOUND, "NOT_FOUND"),
            AdminError::ReadOnly { .. }
            | AdminError::BeyondOwn { .. }
            | AdminError::RoleBeyondOwn { .. } => (StatusCode::FORBIDDEN, "FORBIDDEN"),
            AdminError::Conflict(_) => (StatusCode::CONFLICT, "CONFLICT"),
            AdminError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE"),
            AdminError::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL"),
        };
        let message = match &e {
            AdminError::Unavailable(_) => "the database is unavailable; try again later".into(),
            other => other.to_string(),
        };
        let mut error = ApiError::new(status, code, message);
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
        ApiError::new(StatusCode::BAD_REQUEST, "INVALID_ARGUMENTS", e.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(e: QueryRejection) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "INVALID_ARGUMENTS", e.body_text())
    }
}

async fn require_admin(
    State(auth): State<Auth>,
    headers: HeaderMap,
    mut req: Request,
    next: Next,
) -> Response {
    let presented = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let source = super::guard::peer_ip(req.extensions());
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
    if let Err(e) = auth.check_rate(&key.principal()) {
        return refuse(Some(&key), e).await;
    }
    req.extensions_mut().insert(key);
    let mut resp = next.run(req).await;
    // Keys and tokens appear in these responses: never cache them anywhere.
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

async fn create_key(
    State(auth): State<Auth>,
    Extension(caller): Extension<KeyPrincipal>,
    body: Result<Json<NewKey>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body?;
    let created = auth.admin_as(&caller).create_key(req).await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

async fn list_keys(
    State(auth): State<Auth>,
    Extension(caller): Extension<KeyPrincipal>,
) -> Result<Response, ApiError> {
    let keys = auth.admin_as(&caller).list_keys().await?;
    Ok(Json(json!({ "keys": keys })).into_response())
}

async fn revoke_key(
    State(auth): State<Auth>,
    Extension(caller): Extension<KeyPrincipal>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let r = auth.admin_as(&caller).revoke_key(&id).await?;
    Ok(Json(r).into_response())
}

async fn create_session(
    State(auth): State<Auth>,
    Extension(caller): Extension<KeyPrincipal>,
    body: Result<Json<NewSession>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body?;
    let created = auth.admin_as(&caller).create_session(req).await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

async fn revoke_session(
    State(auth): State<Auth>,
    Extension(caller): Extension<KeyPrincipal>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let which = match SessionRef::parse(&id)? {
        SessionRef::Id(id) => SessionRef::Id(id),
        SessionRef::Token(_) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "INVALID_ARGUMENTS",
                "do not put session tokens in URLs: use the session id here, or POST the token \
                 to /admin/v1/sessions/revoke",
            ));
        }
    };
    let r = auth.admin_as(&caller).revoke_session(&which).await?;
    Ok(Json(r).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RevokeByToken {
    token: String,
}

async fn revoke_session_by_token(
    State(auth): State<Auth>,
    Extension(caller): Extension<KeyPrincipal>,
    body: Result<Json<RevokeByToken>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body?;
    let which = match SessionRef::parse(&req.token)? {
        t @ SessionRef::Token(_) => t,
        SessionRef::Id(_) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "INVALID_ARGUMENTS",
                "`token` must be a session token (sess_…); revoke by id with DELETE /admin/v1/sessions/{id}",
            ));
        }
    };
    let r = auth.admin_as(&caller).revoke_session(&which).await?;
    Ok(Json(r).into_response())
}

async fn list_sessions(
    State(auth): State<Auth>,
    Extension(caller): Extension<KeyPrincipal>,
    query: Result<Query<SessionQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query?;
    Ok(Json(auth.admin_as(&caller).list_sessions(&q).await?).into_response())
}

async fn audit(
    State(auth): State<Auth>,
    Extension(caller): Extension<KeyPrincipal>,
    query: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query?;
    Ok(Json(auth.admin_as(&caller).audit(&q).await?).into_response())
}

async fn list_roles(
    State(auth): State<Auth>,
    Extension(caller): Extension<KeyPrincipal>,
) -> Result<Response, ApiError> {
    let roles = auth.admin_as(&caller).list_roles().await?;
    Ok(Json(json!({ "roles": roles })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetRole {
    features: Vec<String>,
}

async fn set_role(
    State(auth): State<Auth>,
    Extension(caller): Extension<KeyPrincipal>,
    Path(name): Path<String>,
    body: Result<Json<SetRole>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(req) = body?;
    let role = auth
        .admin_as(&caller)
        .set_role(&name, &req.features)
        .await?;
    Ok(Json(role).into_response())
}
