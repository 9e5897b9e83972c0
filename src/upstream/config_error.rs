//! [`ConfigError`]: why the operator's upstream configuration (headers, base URL, scheme
//! credentials, OAuth client) was refused. A leaf: `config`, `schemes` and `oauth` all use it.

/// Why a configuration value was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("upstream header {0:?}: expected \"Name: value\"")]
    HeaderSyntax(String),
    #[error("upstream header name {0:?} is not a valid HTTP header name")]
    HeaderName(String),
    #[error("the value of upstream header {0} is not a valid HTTP header value")]
    HeaderValue(String),
    #[error("upstream header {0} cannot be configured: the HTTP client sets it")]
    HeaderForbidden(String),
    #[error("APIGATE_UPSTREAM_HEADERS: {0}")]
    Env(String),
    #[error("--upstream {url:?}: {message}")]
    BaseUrl { url: String, message: String },
    #[error(
        "--upstream {url:?} has user info and an Authorization header is configured too: keep \
         one of them (the user info is sent as `Authorization: Basic …`)"
    )]
    UserInfoAndAuthorization { url: String },
    #[error("--upstream {url:?}: the user name and password must be UTF-8 once percent-decoded")]
    UserInfoEncoding { url: String },
    #[error("--upstream-credential {0}")]
    SchemeCredential(String),
    #[error("{0}")]
    OAuth(String),
    #[error("OAuth client credentials set the Authorization header, and {0} sets it too: keep one")]
    OAuthAndAuthorization(&'static str),
}
