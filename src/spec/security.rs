//! The document's security schemes (OpenAPI `components.securitySchemes`, Swagger 2.0
//! `securityDefinitions`), an operation's security requirement (which schemes it needs, as
//! alternatives), and which of its parameters are a credential rather than something the
//! agent gives ([`credential_param`]). `upstream` places a configured credential
//! (`--upstream-credential SCHEME=VALUE`) where its scheme says; `api_schema` tells the agent
//! what is needed and what apigate supplies.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Dialect;
use super::operation::{Operation, ParamIn, Parameter};

/// Where an `apiKey` scheme's key goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyIn {
    Header,
    Query,
    Cookie,
}

impl KeyIn {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyIn::Header => "header",
            KeyIn::Query => "query",
            KeyIn::Cookie => "cookie",
        }
    }
}

/// One security scheme, as far as apigate can supply it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemeKind {
    /// `type: apiKey`: `name` in a header, the query or a cookie.
    ApiKey { location: KeyIn, name: String },
    /// `type: http, scheme: bearer`.
    Bearer,
    /// `type: http, scheme: basic` (Swagger 2.0 `type: basic`).
    Basic,
    /// `type: oauth2` or `openIdConnect`: an access token sent as a bearer token.
    OAuth2,
    /// Anything else (`mutualTLS`, `http` with another scheme, a malformed entry): described,
    /// never supplied. Holds a short description.
    Other(String),
}

impl SchemeKind {
    /// The scheme as `api_schema` shows it.
    pub fn describe(&self) -> Value {
        match self {
            SchemeKind::ApiKey { location, name } => {
                serde_json::json!({"type": "apiKey", "in": location.as_str(), "name": name})
            }
            SchemeKind::Bearer => serde_json::json!({"type": "http", "scheme": "bearer"}),
            SchemeKind::Basic => serde_json::json!({"type": "http", "scheme": "basic"}),
            SchemeKind::OAuth2 => serde_json::json!({"type": "oauth2"}),
            SchemeKind::Other(d) => serde_json::json!({"type": d}),
        }
    }

    /// Whether this scheme's credential travels in the `Authorization` header.
    pub(crate) fn uses_authorization(&self) -> bool {
        matches!(
            self,
            SchemeKind::Bearer | SchemeKind::Basic | SchemeKind::OAuth2
        )
    }
}

/// The document's security schemes by name.
pub fn schemes(root: &Value, dialect: Dialect) -> BTreeMap<String, SchemeKind> {
    let defs = match dialect {
        Dialect::Swagger2 => root.get("securityDefinitions"),
        _ => root.pointer("/components/securitySchemes"),
    };
    let Some(defs) = defs.and_then(Value::as_object) else {
        return BTreeMap::new();
    };
    defs.iter()
        .map(|(name, def)| {
            let def = local_ref(root, def);
            (name.clone(), kind(def))
        })
        .collect()
}

/// `def` itself, or what its local `$ref` points to.
fn local_ref<'a>(root: &'a Value, def: &'a Value) -> &'a Value {
    match def.get("$ref").and_then(Value::as_str) {
        Some(r) if r.starts_with("#/") => root.pointer(&r[1..]).unwrap_or(def),
        _ => def,
    }
}

fn kind(def: &Value) -> SchemeKind {
    let field = |k: &str| def.get(k).and_then(Value::as_str).unwrap_or_default();
    match field("type") {
        "apiKey" => {
            let location = match field("in") {
                "header" => KeyIn::Header,
                "query" => KeyIn::Query,
                "cookie" => KeyIn::Cookie,
                other => return SchemeKind::Other(format!("apiKey in {other:?}")),
            };
            let name = field("name");
            if name.is_empty() {
                return SchemeKind::Other("apiKey without a name".into());
            }
            SchemeKind::ApiKey {
                location,
                name: name.to_string(),
            }
        }
        "http" if field("scheme").eq_ignore_ascii_case("bearer") => SchemeKind::Bearer,
        "http" if field("scheme").eq_ignore_ascii_case("basic") => SchemeKind::Basic,
        "basic" => SchemeKind::Basic,
        "oauth2" | "openIdConnect" => SchemeKind::OAuth2,
        "http" => SchemeKind::Other(format!("http {}", field("scheme"))),
        other => SchemeKind::Other(other.to_string()),
    }
}

/// An operation's effective security requirement as alternatives, each the scheme names it
/// needs together; `None` when the document says nothing. `Some(vec![])` (`security: []`)
/// and an empty alternative (`{}`) mean no credential is needed.
pub fn alternatives(security: Option<&Value>) -> Option<Vec<Vec<String>>> {
    let list = security?.as_array()?;
    Some(
        list.iter()
            .filter_map(Value::as_object)
            .map(|alt| alt.keys().cloned().collect())
            .collect(),
    )
}

/// Names that make a header or query parameter a credential, compared without regard to case
/// (Slack's `token`, Discourse's `Api-Key`, GitLab's `Private-Token`, Google's
/// `access_token`). Kept short on purpose: `key` (GitHub's cache `key`, an object key),
/// `secret`, `client_secret` (an OAuth exchange's own input) or `*_token` (a page token) name
/// other things too often.
pub const CREDENTIAL_NAMES: [&str; 11] = [
    "token",
    "access_token",
    "auth_token",
    "api_key",
    "apikey",
    "api-key",
    "x-api-key",
    "x-auth-token",
    "x-access-token",
    "private-token",
    "authorization",
];

/// Why a parameter is a credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialParam {
    /// It is where the `apiKey` scheme of this name puts its key (petstore's `api_key`
    /// header).
    Scheme(String),
    /// Its name is one of [`CREDENTIAL_NAMES`] (Slack's `token` header).
    Named,
}

/// Whether `p`, a parameter of `op`, is a credential: a header or query parameter that an
/// `apiKey` scheme of the document places its key in, or whose name is one of
/// [`CREDENTIAL_NAMES`], on an operation that does not say it needs no credential
/// (`security: []`, or an empty alternative `{}`). Path parameters never are (Stripe's
/// `/v1/issuing/authorizations/{authorization}` names a resource). Whether the agent is asked
/// for it is the caller's to decide, from what the operator configured.
pub fn credential_param(
    schemes: &BTreeMap<String, SchemeKind>,
    op: &Operation,
    p: &Parameter,
) -> Option<CredentialParam> {
    let place = match p.location {
        ParamIn::Header => KeyIn::Header,
        ParamIn::Query => KeyIn::Query,
        ParamIn::Path | ParamIn::Cookie => return None,
    };
    if alternatives(op.security.as_ref())
        .is_some_and(|alts| alts.is_empty() || alts.iter().any(Vec::is_empty))
    {
        return None;
    }
    let same_name = |name: &str| match place {
        // Header names are case-insensitive; query names are not.
        KeyIn::Header => name.eq_ignore_ascii_case(&p.name),
        _ => name == p.name,
    };
    let scheme = schemes.iter().find(|(_, k)| {
        matches!(k, SchemeKind::ApiKey { location, name } if *location == place && same_name(name))
    });
    if let Some((name, _)) = scheme {
        return Some(CredentialParam::Scheme(name.clone()));
    }
    CREDENTIAL_NAMES
        .iter()
        .any(|n| n.eq_ignore_ascii_case(&p.name))
        .then_some(CredentialParam::Named)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemes_of_both_dialects() {
        let v3 = json!({"components": {"securitySchemes": {
            "key": {"type": "apiKey", "in": "query", "name": "api_key"},
            "bearer": {"type": "http", "scheme": "Bearer"},
            "oidc": {"type": "openIdConnect", "openIdConnectUrl": "https://x"},
            "digest": {"type": "http", "scheme": "digest"},
            "shared": {"$ref": "#/x-shared"},
        }}, "x-shared": {"type": "apiKey", "in": "cookie", "name": "sid"}});
        let s = schemes(&v3, Dialect::OpenApi30);
        assert_eq!(
            s["key"],
            SchemeKind::ApiKey {
                location: KeyIn::Query,
                name: "api_key".into()
            }
        );
        assert_eq!(s["bearer"], SchemeKind::Bearer);
        assert_eq!(s["oidc"], SchemeKind::OAuth2);
        assert_eq!(s["digest"], SchemeKind::Other("http digest".into()));
        assert_eq!(
            s["shared"],
            SchemeKind::ApiKey {
                location: KeyIn::Cookie,
                name: "sid".into()
            }
        );
        let v2 = json!({"securityDefinitions": {"b": {"type": "basic"}}});
        assert_eq!(schemes(&v2, Dialect::Swagger2)["b"], SchemeKind::Basic);
    }

    /// Real parameters: Slack's `token` (header and query), petstore's `api_key` header,
    /// Discourse's `Api-Key`, GitHub's cache `key`, Stripe's `{authorization}` path, Airflow's
    /// `token` on an operation with `security: []`, a page token.
    #[test]
    fn which_parameters_are_credentials() {
        let v3 = json!({"components": {"securitySchemes": {
            "api_key": {"type": "apiKey", "in": "header", "name": "api_key"},
            "slackAuth": {"type": "oauth2"},
        }}});
        let schemes = schemes(&v3, Dialect::OpenApi30);
        let param = |name: &str, location: ParamIn| Parameter {
            name: name.into(),
            location,
            required: true,
            description: None,
            schema: json!({"type": "string"}),
            style: "form".into(),
            explode: true,
            deprecated: false,
        };
        let op = |security: Option<Value>| Operation {
            id: "x".into(),
            method: crate::spec::Method::Get,
            path: "/x".into(),
            summary: None,
            description: None,
            tags: Vec::new(),
            deprecated: false,
            parameters: Vec::new(),
            request_body: None,
            responses: Vec::new(),
            security,
            servers: Vec::new(),
            extensions: Default::default(),
            required_features: Vec::new(),
            response_types: Vec::new(),
        };
        let needs = op(Some(json!([{"slackAuth": ["chat:write"]}])));
        let unsaid = op(None);
        let open = op(Some(json!([])));
        let optional = op(Some(json!([{}, {"api_key": []}])));
        let scheme = || Some(CredentialParam::Scheme("api_key".into()));
        let rows = [
            (
                &needs,
                param("token", ParamIn::Header),
                Some(CredentialParam::Named),
            ),
            (
                &needs,
                param("token", ParamIn::Query),
                Some(CredentialParam::Named),
            ),
            (
                &unsaid,
                param("Api-Key", ParamIn::Header),
                Some(CredentialParam::Named),
            ),
            (
                &unsaid,
                param("PRIVATE-TOKEN", ParamIn::Header),
                Some(CredentialParam::Named),
            ),
            (&needs, param("api_key", ParamIn::Header), scheme()),
            (&needs, param("API_KEY", ParamIn::Header), scheme()),
            // A query parameter is not the header scheme's place (it is still a named one).
            (
                &needs,
                param("api_key", ParamIn::Query),
                Some(CredentialParam::Named),
            ),
            (&needs, param("key", ParamIn::Query), None),
            (&needs, param("page_token", ParamIn::Query), None),
            (&needs, param("client_secret", ParamIn::Query), None),
            (&needs, param("authorization", ParamIn::Path), None),
            (&needs, param("token", ParamIn::Path), None),
            (&open, param("token", ParamIn::Query), None),
            (&optional, param("token", ParamIn::Header), None),
        ];
        for (op, p, want) in rows {
            assert_eq!(
                credential_param(&schemes, op, &p),
                want,
                "{} in {:?}, security {:?}",
                p.name,
                p.location,
                op.security
            );
        }
    }

    #[test]
    fn requirements_read_as_alternatives() {
        let r = json!([{"a": [], "b": ["read"]}, {}]);
        assert_eq!(
            alternatives(Some(&r)),
            Some(vec![vec!["a".to_string(), "b".to_string()], vec![]])
        );
        assert_eq!(alternatives(None), None);
        assert_eq!(alternatives(Some(&json!([]))), Some(vec![]));
    }
}
