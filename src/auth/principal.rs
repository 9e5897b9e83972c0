//! Who is calling: a verified server key ([`KeyPrincipal`]) and the [`Principal`] a call runs
//! as (the key, the key plus a session, or a signed-in [`Person`] with or without a key), with
//! what it may do: tools, operations (features, permission rules, read-only), and the audit
//! entry and rate-limit buckets it is counted in.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::AuthError;
use super::features::{Features, PermissionRules};
use super::rate::Subject;
use super::session_upstream::SessionUpstream;
use crate::spec::Method;
use crate::store::{AuditEntry, Decision, KeyRow};
use crate::types::Tool;

/// A verified server key (tier 1).
#[derive(Debug, Clone)]
pub struct KeyPrincipal {
    /// `None` for the bootstrap key and the dev key.
    pub key_id: Option<Uuid>,
    pub name: String,
    pub public_id: Option<String>,
    pub roles: Vec<String>,
    /// The key's own features ∪ its roles' features.
    pub features: Features,
    pub read_only: bool,
    pub expires_at: Option<DateTime<Utc>>,
}

impl KeyPrincipal {
    pub(super) fn bootstrap() -> KeyPrincipal {
        KeyPrincipal {
            key_id: None,
            name: "bootstrap".into(),
            public_id: None,
            roles: Vec::new(),
            features: Features::all(),
            read_only: false,
            expires_at: None,
        }
    }

    /// The dev-mode key (no database): every feature.
    pub fn dev() -> KeyPrincipal {
        KeyPrincipal {
            name: "dev".into(),
            ..KeyPrincipal::bootstrap()
        }
    }

    pub fn is_bootstrap(&self) -> bool {
        self.key_id.is_none() && self.name == "bootstrap"
    }

    /// A label for logs and `created_by`: `key:<public id>`, `bootstrap` or `dev`.
    pub fn label(&self) -> String {
        match &self.public_id {
            Some(p) => format!("key:{p}"),
            None => self.name.clone(),
        }
    }

    /// The key acting on its own (dev mode, admin API): its features, no user.
    pub fn principal(&self) -> Principal {
        Principal {
            key_id: self.key_id,
            key_label: self.label(),
            key_name: self.name.clone(),
            session_id: None,
            user_id: None,
            tenant_id: None,
            organization_id: None,
            roles: self.roles.clone(),
            features: self.features.clone(),
            read_only: self.read_only,
            expires_at: self.expires_at,
            upstream: None,
            person: None,
        }
    }
}

/// A person signed in with a bearer token: the exact issuer (as configured) and the exact
/// `sub` of the token, never escaped or cut. Two people are one only when both are equal byte
/// for byte; what identifies them anywhere (a rate-limit bucket, the owner of held responses
/// or of an MCP session, stored credentials) is built from these exact bytes ([`Person::key`]).
/// Escaping is for display only ([`Person::shown`]).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Person {
    pub issuer: String,
    pub subject: String,
}

impl Person {
    /// A fixed-length, one-to-one name of the person: the SHA-256 (hex) of the issuer, a NUL
    /// (which no issuer URL and no accepted `sub` holds) and the `sub`.
    pub fn key(&self) -> String {
        hex::encode(super::secrets::sha256(&format!(
            "{}\0{}",
            self.issuer, self.subject
        )))
    }

    /// The `sub` as a terminal or a log may show it: control characters escaped, cut.
    pub fn shown(&self) -> String {
        crate::printable::cell(&self.subject, 200)
    }
}

impl std::fmt::Debug for Person {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Person")
            .field("issuer", &crate::printable::cell(&self.issuer, 200))
            .field("subject", &self.shown())
            .finish()
    }
}

/// Who is calling and what they may do: a key alone (dev mode), a key plus a session, or a
/// signed-in person (with `--auth both`, with the key presented beside the token).
#[derive(Debug, Clone)]
pub struct Principal {
    pub key_id: Option<Uuid>,
    /// `key:<public id>`, `bootstrap` or `dev`.
    pub key_label: String,
    /// The key's name (`apigate keys create --name`), `bootstrap` or `dev`.
    pub key_name: String,
    pub session_id: Option<Uuid>,
    pub user_id: Option<String>,
    pub tenant_id: Option<String>,
    pub organization_id: Option<String>,
    pub roles: Vec<String>,
    /// Effective features: the key's (own ∪ its roles') ∩ the session's (own ∪ its roles');
    /// the key's alone without a session.
    pub features: Features,
    /// Set when the session or the key is read-only.
    pub read_only: bool,
    pub expires_at: Option<DateTime<Utc>>,
    /// The session's own upstream credentials, opened (`Debug` shows names only).
    pub upstream: Option<Arc<SessionUpstream>>,
    /// The person a bearer token names (`user_id` is their exact `sub`).
    pub person: Option<Person>,
}

impl Principal {
    /// The all-features principal of dev mode.
    pub fn dev() -> Principal {
        KeyPrincipal::dev().principal()
    }

    /// The principal as the actor of an admin action (the reload route): for a bearer token,
    /// its client acting for its user, labelled `oauth:CLIENT` as its tool calls are.
    pub fn acting_key(&self) -> KeyPrincipal {
        KeyPrincipal {
            key_id: self.key_id,
            name: self.key_label.clone(),
            public_id: None,
            roles: self.roles.clone(),
            features: self.features.clone(),
            read_only: self.read_only,
            expires_at: self.expires_at,
        }
    }

    /// Whether the caller may call the tool at all (holds its feature).
    pub fn may_use(&self, tool: Tool) -> Result<(), AuthError> {
        if self.features.allows(tool.feature()) {
            Ok(())
        } else {
            Err(AuthError::Forbidden {
                missing: tool.feature().to_string(),
            })
        }
    }

    /// [`Principal::may_use`] for a tool named as the agent names it; no other name is one.
    pub fn may_use_tool(&self, name: &str) -> Result<(), AuthError> {
        match Tool::parse(name) {
            Ok(tool) => self.may_use(tool),
            Err(_) => Err(AuthError::Forbidden {
                missing: name.to_string(),
            }),
        }
    }

    /// Whether the caller may execute `method path_template`: read-only callers only safe
    /// methods; every feature in `required` (the operation's `x-required-features`) and every
    /// feature the configured rules require.
    pub fn may_execute(
        &self,
        method: Method,
        path_template: &str,
        required: &[String],
        rules: &PermissionRules,
    ) -> Result<(), AuthError> {
        if self.read_only && !method.is_safe() {
            return Err(AuthError::ReadOnly { method });
        }
        let needed = required
            .iter()
            .map(String::as_str)
            .chain(rules.required_for(method.as_str(), path_template));
        match self.features.first_missing(needed) {
            Some(missing) => Err(AuthError::Forbidden {
                missing: missing.to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Every feature [`Principal::may_execute`] would find missing for `method path_template`
    /// (it names the first only), in its order, each once; `None` when the caller is refused
    /// for being read-only, which no feature changes.
    pub fn missing_to_execute<'a>(
        &self,
        method: Method,
        path_template: &'a str,
        required: &'a [String],
        rules: &'a PermissionRules,
    ) -> Option<Vec<&'a str>> {
        if self.read_only && !method.is_safe() {
            return None;
        }
        let mut missing: Vec<&str> = Vec::new();
        for f in required
            .iter()
            .map(String::as_str)
            .chain(rules.required_for(method.as_str(), path_template))
        {
            if !self.features.allows(f) && !missing.contains(&f) {
                missing.push(f);
            }
        }
        Some(missing)
    }

    /// Whether discovery and schema should show the operation: the caller could execute it
    /// (holds `apigate.execute` and passes [`Principal::may_execute`]).
    pub fn may_see(
        &self,
        method: Method,
        path_template: &str,
        required: &[String],
        rules: &PermissionRules,
    ) -> bool {
        self.features.allows(Tool::Execute.feature())
            && self
                .may_execute(method, path_template, required, rules)
                .is_ok()
    }

    /// An audit entry for a call by this principal; fill in the rest and pass it to
    /// [`super::Auth::record_audit`].
    pub fn audit_entry(&self, tool: &str, decision: Decision) -> AuditEntry {
        AuditEntry {
            key_id: self.key_id,
            session_id: self.session_id,
            user_id: self.user_id.clone(),
            tenant_id: self.tenant_id.clone(),
            organization_id: self.organization_id.clone(),
            credential_sources: Vec::new(),
            tool: tool.to_string(),
            actor: Some(self.key_label.clone()),
            target: None,
            operation: None,
            method: None,
            path: None,
            decision,
            upstream_status: None,
            duration_ms: 0,
            error_code: None,
            at: Utc::now(),
            call_id: Uuid::new_v4(),
        }
    }

    /// The buckets a call of this principal spends from, the most specific first: a person's
    /// own (per exact issuer and `sub`, across clients), else the session's; then the key's
    /// when a key is presented (a person's token alone has none: the OAuth client is shared
    /// by every person of it, so it is no bucket). All are taken at once or none
    /// ([`super::rate::Limiter::take`]), so a call refused by its own budget spends nothing
    /// of a bucket it shares with others.
    pub(super) fn rate_subjects(&self) -> Vec<Subject> {
        let own = match (&self.person, self.session_id) {
            (Some(person), _) => Some(Subject::Person(person.key())),
            (None, Some(s)) => Some(Subject::Session(s.to_string())),
            (None, None) => None,
        };
        let key = match (self.key_id, &self.person) {
            (Some(id), _) => Some(Subject::Key(id.to_string())),
            (None, Some(_)) => None,
            (None, None) => Some(Subject::Key(self.key_label.clone())),
        };
        own.into_iter().chain(key).collect()
    }

    /// Who owns the binary responses this principal's calls hold, and so who alone may list
    /// and read them: the most specific principal of the call. `person:<key>` for a
    /// signed-in person, `session:<id>` for a user session, else `None` (the connection's key
    /// owns them, as the transport knows it).
    pub fn held_owner(&self) -> Option<String> {
        match (&self.person, self.session_id) {
            (Some(person), _) => Some(format!("person:{}", person.key())),
            (None, Some(s)) => Some(format!("session:{s}")),
            (None, None) => None,
        }
    }
}

pub(super) fn effective_features(row: &KeyRow) -> Features {
    Features::new(row.features.iter().chain(row.role_features.iter()))
}

pub(super) fn key_principal(row: KeyRow) -> KeyPrincipal {
    let features = effective_features(&row);
    KeyPrincipal {
        key_id: Some(row.id),
        name: row.name.unwrap_or_default(),
        public_id: row.public_id,
        roles: row.roles,
        features,
        read_only: row.read_only,
        expires_at: row.expires_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(features: &[&str], read_only: bool) -> Principal {
        Principal {
            features: Features::new(features),
            read_only,
            ..Principal::dev()
        }
    }

    #[test]
    fn tools_need_their_feature() {
        let p = principal(&["apigate.discover"], false);
        assert!(p.may_use_tool("api_discover").is_ok());
        let e = p.may_use_tool("api_execute").unwrap_err();
        assert!(matches!(e, AuthError::Forbidden { .. }));
        assert!(e.to_string().contains("apigate.execute"));
        assert!(
            principal(&["apigate.*"], false)
                .may_use_tool("api_schema")
                .is_ok()
        );
    }

    #[test]
    fn operations_need_spec_and_rule_features() {
        let rules = PermissionRules::from_toml(
            "[[rule]]\nmethod = \"DELETE\"\npath = \"/repos/**\"\nfeatures = [\"github.admin\"]\n",
        )
        .unwrap();
        let p = principal(&["apigate.execute", "billing.*"], false);
        let billing = vec!["billing.read".to_string()];
        assert!(
            p.may_execute(Method::Get, "/invoices", &billing, &rules)
                .is_ok()
        );
        assert!(
            p.may_execute(Method::Get, "/repos/{o}/{r}", &[], &rules)
                .is_ok()
        );
        match p.may_execute(Method::Delete, "/repos/{o}/{r}", &[], &rules) {
            Err(AuthError::Forbidden { missing }) => assert_eq!(missing, "github.admin"),
            other => panic!("{other:?}"),
        }
        let crm = vec!["crm.read".to_string()];
        assert!(p.may_execute(Method::Get, "/c", &crm, &rules).is_err());
        assert!(p.may_see(Method::Get, "/invoices", &billing, &rules));
        assert!(!p.may_see(Method::Get, "/c", &crm, &rules));
        assert!(!principal(&["billing.*"], false).may_see(
            Method::Get,
            "/invoices",
            &billing,
            &rules
        ));
    }

    #[test]
    fn every_missing_feature_is_named_the_first_as_may_execute_names_it() {
        let rules = PermissionRules::from_toml(
            "[[rule]]\npath = \"/repos/**\"\nfeatures = [\"github.admin\", \"billing.read\"]\n",
        )
        .unwrap();
        let p = principal(&["apigate.execute", "billing.*"], false);
        let required = vec!["crm.read".to_string(), "github.admin".to_string()];
        let missing = p
            .missing_to_execute(Method::Delete, "/repos/{o}", &required, &rules)
            .unwrap();
        assert_eq!(missing, ["crm.read", "github.admin"]);
        match p.may_execute(Method::Delete, "/repos/{o}", &required, &rules) {
            Err(AuthError::Forbidden { missing }) => assert_eq!(missing, "crm.read"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            p.missing_to_execute(Method::Get, "/x", &[], &rules),
            Some(vec![])
        );
        // Read-only: no feature would let it through.
        let reader = principal(&["*"], true);
        assert_eq!(
            reader.missing_to_execute(Method::Delete, "/x", &[], &rules),
            None
        );
    }

    #[test]
    fn read_only_allows_only_safe_methods() {
        let p = principal(&["*"], true);
        let none = PermissionRules::default();
        for m in [Method::Get, Method::Head, Method::Options] {
            assert!(p.may_execute(m, "/x", &[], &none).is_ok(), "{m}");
        }
        for m in [Method::Post, Method::Trace] {
            let e = p.may_execute(m, "/x", &[], &none).unwrap_err();
            assert!(matches!(e, AuthError::ReadOnly { method } if method == m));
        }
        assert!(!p.may_see(Method::Delete, "/x", &[], &none));
    }
}
