//! The document's security schemes (OpenAPI `components.securitySchemes`, Swagger 2.0
//! `securityDefinitions`) and an operation's security requirement: which schemes it needs,
//! as alternatives. `upstream` places a configured credential (`--upstream-credential
//! SCHEME=VALUE`) where its scheme says; `api_schema` tells the agent what is needed and what
//! apigate supplies.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Dialect;

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
