//! Who may use the monitor's page and API: whoever holds this run's secret. `apigate monitor`
//! makes a new random secret at start and prints the page link with it
//! (`http://127.0.0.1:37123/?token=…`); opening the link sets an `HttpOnly; SameSite=Strict`
//! cookie and sends the browser on to `/`, so the page's own requests carry the secret and no
//! script, other site or other local process learns it. Scripts send it as
//! `Authorization: Bearer <secret>`. Without it the page and every `/api/*` route answer 401.
//! Comparisons are constant-time. The protocol endpoint (`/agent-monitor`) and `/health` stay
//! open: apigate and other plugins post events without it, and an event cannot decide a call.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rand::Rng;
use serde_json::json;

use crate::secrets_equal;

/// The query parameter of the printed link.
pub(super) const LINK_PARAM: &str = "token";

/// This run's secret and the cookie that carries it.
#[derive(Clone)]
pub(super) struct RunSecret {
    secret: String,
    /// `apigate_monitor_<port>`: browsers share cookies across a host's ports, so two
    /// monitors on one machine must not overwrite each other's.
    cookie_name: String,
}

crate::debug_fields!(RunSecret { cookie_name, .. });

impl RunSecret {
    /// A fresh random secret (256 bits) for a monitor listening on `port`.
    pub(super) fn generate(port: u16) -> RunSecret {
        let bytes: [u8; 32] = rand::rng().random();
        RunSecret {
            secret: hex::encode(bytes),
            cookie_name: format!("apigate_monitor_{port}"),
        }
    }

    pub(super) fn secret(&self) -> &str {
        &self.secret
    }

    /// Whether the request carries the secret: the page's cookie, or a bearer token.
    pub(super) fn allows(&self, headers: &HeaderMap) -> bool {
        let bearer = headers
            .get_all(header::AUTHORIZATION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let cookies = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .filter(|(name, _)| *name == self.cookie_name)
            .map(|(_, value)| value.trim());
        // Every candidate is compared (no early exit on a match's position).
        bearer.chain(cookies).fold(false, |ok, candidate| {
            secrets_equal(candidate, &self.secret) | ok
        })
    }

    /// Whether `candidate` (the link's `token`) is the secret.
    pub(super) fn is_secret(&self, candidate: &str) -> bool {
        secrets_equal(candidate, &self.secret)
    }

    /// The `Set-Cookie` value that hands the secret to the page.
    pub(super) fn cookie(&self) -> String {
        format!(
            "{}={}; HttpOnly; SameSite=Strict; Path=/",
            self.cookie_name, self.secret
        )
    }
}

/// What the page and API say without the secret.
const HOW: &str = "open the link `apigate monitor` printed when it started \
    (http://HOST:PORT/?token=…; it changes every run), or send the secret as \
    `Authorization: Bearer <secret>`";

/// 401 for an `/api/*` request without the secret (JSON, like every API error).
pub(super) fn api_unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"))],
        axum::Json(json!({
            "error": format!("this monitor's API needs its per-run secret: {HOW}")
        })),
    )
        .into_response()
}

/// 401 for the page without the secret, or with a link that is not this run's.
pub(super) fn page_unauthorized(wrong_link: bool) -> Response {
    let why = if wrong_link {
        "This link's secret is not this monitor's: the monitor was restarted, or the link was mistyped."
    } else {
        "This page needs the monitor's per-run secret."
    };
    let body = format!(
        "<!doctype html><meta charset=\"utf-8\"><title>apigate monitor</title>\
         <p>{why}</p><p>Open the link <code>apigate monitor</code> printed when it started: \
         <code>http://HOST:PORT/?token=…</code> (a new one every run).</p>"
    );
    (
        StatusCode::UNAUTHORIZED,
        [(header::CACHE_CONTROL, "no-store")],
        axum::response::Html(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn only_this_runs_secret_opens() {
        let access = RunSecret::generate(37123);
        let other = RunSecret::generate(37123);
        assert_eq!(access.secret().len(), 64);
        assert_ne!(access.secret(), other.secret());
        let secret = access.secret().to_owned();
        assert!(!access.allows(&HeaderMap::new()));
        assert!(access.allows(&headers(&[("authorization", &format!("Bearer {secret}"))])));
        assert!(!access.allows(&headers(&[("authorization", "Bearer nope")])));
        assert!(!access.allows(&headers(&[("authorization", &format!("Basic {secret}"))])));
        assert!(access.allows(&headers(&[(
            "cookie",
            &format!("a=b; apigate_monitor_37123={secret}; c=d")
        )])));
        // Another port's cookie, or the secret under another name, does not open.
        assert!(!access.allows(&headers(&[(
            "cookie",
            &format!("apigate_monitor_1={secret}")
        )])));
        assert!(!access.allows(&headers(&[("cookie", "apigate_monitor_37123=nope")])));
        // One right cookie among wrong ones does.
        assert!(access.allows(&headers(&[
            ("cookie", "apigate_monitor_37123=nope"),
            ("cookie", &format!("apigate_monitor_37123={secret}")),
        ])));
        assert!(access.is_secret(&secret) && !access.is_secret(""));
        let cookie = access.cookie();
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
        assert!(!format!("{access:?}").contains(&secret));
    }
}
