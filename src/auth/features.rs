//! Feature sets with wildcards (`*`, `billing.*`) and the configured permission rules
//! (method + path glob → required features). Pure logic; no I/O.

use std::collections::BTreeSet;
use std::fmt;

use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;

/// The features a principal holds. A held feature may be a wildcard: `*` grants everything,
/// `billing.*` grants `billing` and every feature below it (`billing.read`, `billing.a.b`).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Features(BTreeSet<String>);

/// Feature names, borrowed.
pub(crate) trait Names<'a>: IntoIterator<Item = &'a str> {}
impl<'a, T: IntoIterator<Item = &'a str>> Names<'a> for T {}

impl Features {
    /// The union of the given feature lists (empty and blank strings are dropped).
    pub fn new<I, S>(features: I) -> Features
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Features(
            features
                .into_iter()
                .map(|f| f.as_ref().trim().to_string())
                .filter(|f| !f.is_empty())
                .collect(),
        )
    }

    /// Everything (`*`): the dev-mode and bootstrap principal.
    pub fn all() -> Features {
        Features::new(["*"])
    }

    /// Whether a concrete feature (no wildcard) is granted.
    pub fn allows(&self, feature: &str) -> bool {
        self.0.iter().any(|held| grants(held, feature))
    }

    /// The first of `required` that is not granted.
    pub(crate) fn first_missing<'a>(&self, required: impl Names<'a>) -> Option<&'a str> {
        required.into_iter().find(|f| !self.allows(f))
    }

    /// Whether everything `wanted` grants is granted here: `wanted` may itself be a wildcard
    /// (`billing.*` is covered by `billing.*` or `*`, not by `billing.read`). What an admin may
    /// hand out is bounded by this.
    pub fn covers(&self, wanted: &str) -> bool {
        self.0.iter().any(|held| covers(held, wanted))
    }

    /// The first of `wanted` (features or wildcards) not covered here.
    pub(crate) fn first_uncovered<'a>(&self, wanted: impl Names<'a>) -> Option<&'a str> {
        wanted.into_iter().find(|f| !self.covers(f))
    }

    /// What both sets grant: a feature is allowed by the result exactly when both allow it.
    /// Held names form a tree (`*` ⊇ `a.*` ⊇ `a.b.*` ⊇ `a.b`), so two names either nest or are
    /// disjoint, and the intersection keeps the narrower of each nested pair.
    pub(crate) fn intersection(&self, other: &Features) -> Features {
        let mut out = BTreeSet::new();
        for a in &self.0 {
            for b in &other.0 {
                if covers(a, b) {
                    out.insert(b.clone());
                } else if covers(b, a) {
                    out.insert(a.clone());
                }
            }
        }
        Features(out)
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    pub fn to_vec(&self) -> Vec<String> {
        self.0.iter().cloned().collect()
    }
}

impl fmt::Debug for Features {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.iter()).finish()
    }
}

fn grants(held: &str, wanted: &str) -> bool {
    if held == "*" || held == wanted {
        return true;
    }
    match held.strip_suffix(".*") {
        Some(prefix) => {
            wanted == prefix
                || (wanted.len() > prefix.len()
                    && wanted.starts_with(prefix)
                    && wanted.as_bytes()[prefix.len()] == b'.')
        }
        None => false,
    }
}

/// Whether the held name grants everything the wanted name does (either may be a wildcard).
fn covers(held: &str, wanted: &str) -> bool {
    if held == "*" || held == wanted {
        return true;
    }
    if wanted == "*" {
        return false;
    }
    // `billing.*` is covered by what grants `billing` and every name below it.
    match wanted.strip_suffix(".*") {
        Some(prefix) => held.ends_with(".*") && grants(held, prefix),
        None => grants(held, wanted),
    }
}

/// Checks a feature name given to the admin surface: dotted words, optionally ending in `.*`,
/// or `*` alone.
pub(crate) fn validate_feature(f: &str) -> Result<(), String> {
    if f == "*" {
        return Ok(());
    }
    let body = f.strip_suffix(".*").unwrap_or(f);
    let ok = !body.is_empty()
        && body.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b':')
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid feature {f:?}: use dotted names such as `billing.read`, `billing.*` or `*`"
        ))
    }
}

/// One configured rule as written in TOML:
/// `[[rule]] method = "DELETE"  path = "/repos/**"  features = ["github.admin"]`.
///
/// `method` is optional (any method) and may be `*`. `path` is a glob over the operation's path
/// template: `*` stays within one segment, `**` crosses segments, and `{` `}` are literal so that
/// `/pets/{petId}` matches that template.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    #[serde(default)]
    pub method: Option<String>,
    pub path: String,
    pub features: Vec<String>,
}

#[derive(Debug, Clone)]
struct Rule {
    method: Option<String>,
    path: GlobMatcher,
    features: Vec<String>,
}

/// The compiled permission rules. Every matching rule adds its features to the requirement.
#[derive(Debug, Clone, Default)]
pub struct PermissionRules {
    rules: Vec<Rule>,
}

/// A rule that could not be compiled.
#[derive(Debug, thiserror::Error)]
#[error("permission rule {index} ({path}): {reason}")]
pub struct RuleError {
    pub index: usize,
    pub path: String,
    pub reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    #[serde(default)]
    rule: Vec<RuleSpec>,
}

impl PermissionRules {
    /// These rules, then `more`'s: a requirement is what either set requires.
    pub fn and(&self, more: &PermissionRules) -> PermissionRules {
        PermissionRules {
            rules: self.rules.iter().chain(&more.rules).cloned().collect(),
        }
    }

    pub fn compile(specs: Vec<RuleSpec>) -> Result<PermissionRules, RuleError> {
        let mut rules = Vec::with_capacity(specs.len());
        for (index, spec) in specs.into_iter().enumerate() {
            let err = |reason: String| RuleError {
                index,
                path: spec.path.clone(),
                reason,
            };
            if !spec.path.starts_with('/') {
                return Err(err("the path must start with `/`".into()));
            }
            // Braces are literal (they appear in path templates), not glob alternations.
            let pattern = spec.path.replace('{', "[{]").replace('}', "[}]");
            let glob = GlobBuilder::new(&pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| err(e.to_string()))?;
            for f in &spec.features {
                validate_feature(f).map_err(&err)?;
                if f.contains('*') {
                    return Err(err(format!(
                        "required feature {f:?} may not be a wildcard: name the feature a caller must hold"
                    )));
                }
            }
            let method = match spec.method.as_deref().map(str::trim) {
                None | Some("*") | Some("") => None,
                Some(m) => Some(m.to_ascii_uppercase()),
            };
            rules.push(Rule {
                method,
                path: glob.compile_matcher(),
                features: spec.features.clone(),
            });
        }
        Ok(PermissionRules { rules })
    }

    /// Parses a TOML document of `[[rule]]` tables.
    pub fn from_toml(text: &str) -> Result<PermissionRules, RuleError> {
        let file: RulesFile = toml::from_str(text).map_err(|e| RuleError {
            index: 0,
            path: String::new(),
            reason: e.to_string(),
        })?;
        PermissionRules::compile(file.rule)
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The features the rules require for `method path_template` (the method in any case).
    /// Discovery asks this of every operation a search matched: it allocates nothing.
    pub(crate) fn required_for<'a>(
        &'a self,
        method: &'a str,
        path_template: &'a str,
    ) -> impl Iterator<Item = &'a str> + 'a {
        self.rules
            .iter()
            .filter(move |r| {
                r.method
                    .as_deref()
                    .is_none_or(|m| m.eq_ignore_ascii_case(method))
                    && r.path.is_match(path_template)
            })
            .flat_map(|r| r.features.iter().map(String::as_str))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        let f = Features::new(["billing.*", "apigate.discover"]);
        assert!(f.allows("billing"));
        assert!(f.allows("billing.read"));
        assert!(f.allows("billing.invoices.write"));
        assert!(!f.allows("billingx"));
        assert!(!f.allows("billingx.read"));
        assert!(f.allows("apigate.discover"));
        assert!(!f.allows("apigate.execute"));
        assert!(Features::all().allows("anything.at.all"));
        assert!(!Features::default().allows("a"));
        assert_eq!(f.first_missing(["billing.x", "crm.read"]), Some("crm.read"));
    }

    #[test]
    fn covering_wildcards() {
        let f = Features::new(["billing.*", "apigate.discover"]);
        for yes in [
            "billing",
            "billing.read",
            "billing.*",
            "billing.a.*",
            "apigate.discover",
        ] {
            assert!(f.covers(yes), "{yes}");
        }
        for no in [
            "*",
            "billingx",
            "billingx.*",
            "apigate.*",
            "apigate.execute",
            "a.*",
        ] {
            assert!(!f.covers(no), "{no}");
        }
        assert!(!Features::new(["billing"]).covers("billing.*"));
        assert!(Features::all().covers("*"));
        assert_eq!(
            f.first_uncovered(["billing.x", "crm.*", "*"]),
            Some("crm.*")
        );
    }

    #[test]
    fn intersections_allow_what_both_allow() {
        let key = Features::new(["apigate.discover"]);
        let session = Features::all();
        let both = key.intersection(&session);
        assert!(both.allows("apigate.discover"));
        assert!(!both.allows("apigate.execute"));
        assert_eq!(both, session.intersection(&key));

        let key = Features::new(["apigate.*", "billing.*"]);
        let session = Features::new(["apigate.execute", "billing.read", "crm.*"]);
        let both = key.intersection(&session);
        assert_eq!(both.to_vec(), ["apigate.execute", "billing.read"]);
        assert!(
            Features::default()
                .intersection(&Features::all())
                .to_vec()
                .is_empty()
        );
        // Exhaustively over a small universe: allowed by the result ⇔ allowed by both.
        let names = [
            "*", "a", "a.*", "a.b", "a.b.*", "a.b.c", "a.c", "b", "b.*", "ab",
        ];
        let sets: Vec<Features> = (0..names.len())
            .flat_map(|i| (i..names.len()).map(move |j| Features::new([names[i], names[j]])))
            .collect();
        let concrete = ["a", "a.b", "a.b.c", "a.c", "b", "b.x", "ab", "z"];
        for x in &sets {
            for y in &sets {
                let both = x.intersection(y);
                for c in concrete {
                    assert_eq!(
                        both.allows(c),
                        x.allows(c) && y.allows(c),
                        "{x:?} ∩ {y:?} = {both:?} on {c}"
                    );
                }
            }
        }
    }

    #[test]
    fn feature_names_are_validated() {
        for ok in ["*", "a", "billing.*", "a.b-c.d_e", "x:y"] {
            assert!(validate_feature(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "a..b", "a.", "*.a", "a b", "a.**"] {
            assert!(validate_feature(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rules_match_method_and_template() {
        let rules = PermissionRules::from_toml(
            r#"
            [[rule]]
            method = "delete"
            path = "/repos/**"
            features = ["github.admin"]

            [[rule]]
            path = "/pets/{petId}"
            features = ["pets.read"]

            [[rule]]
            method = "*"
            path = "/orgs/*"
            features = ["orgs.write"]
            "#,
        )
        .unwrap();
        let req = |m: &str, p: &str| {
            rules
                .required_for(m, p)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(req("DELETE", "/repos/{owner}/{repo}"), ["github.admin"]);
        assert!(req("GET", "/repos/{owner}/{repo}").is_empty());
        assert_eq!(req("GET", "/pets/{petId}"), ["pets.read"]);
        assert!(req("GET", "/pets/other").is_empty());
        assert_eq!(req("PATCH", "/orgs/{org}"), ["orgs.write"]);
        assert!(req("PATCH", "/orgs/{org}/members").is_empty());
        assert_eq!(req("delete", "/repos/{owner}/{repo}"), ["github.admin"]);
    }

    #[test]
    fn bad_rules_are_reported() {
        assert!(PermissionRules::from_toml("[[rule]]\npath = \"repos\"\nfeatures = []").is_err());
        assert!(
            PermissionRules::from_toml("[[rule]]\npath = \"/a\"\nfeatures = [\"a..b\"]").is_err()
        );
        assert!(PermissionRules::from_toml("[[rule]]\npath = \"/a\"\nfeature = []").is_err());
        assert!(
            PermissionRules::from_toml("[[rule]]\npath = \"/a\"\nfeatures = [\"a.*\"]").is_err()
        );
    }
}
