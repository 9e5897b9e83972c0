//! Rules of the reference monitor (`apigate monitor --rules FILE`): a TOML file read once at
//! start-up and the first-match evaluation of a `tool.pre_execute` event against it.
//!
//! ```toml
//! default = "allow"              # when no rule matches: allow | block | require_approval
//!
//! [[rule]]
//! name = "no-user-deletes"
//! action = "block"               # allow | block | require_approval
//! reason = "Deleting users is not allowed"
//! method = "DELETE"              # string or list; implies tool = "api_execute"
//! path = "/users/**"             # glob(s) on the path template; `*` stops at `/`
//! ```
//!
//! Conditions in one rule must all hold; rules are tried in file order and the first match
//! decides. Pure logic: no HTTP, no I/O besides reading the file.

use std::collections::BTreeMap;
use std::path::Path;

use globset::{Glob, GlobBuilder, GlobMatcher};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::spec::method::Method;
use crate::types::Tool;

/// What a rule does with a matching call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Allow,
    Block,
    RequireApproval,
}

/// Why a rules file was refused.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    #[error("cannot read rules file {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid rules file: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("rule {rule:?}: invalid {what} {pattern:?}: {reason}")]
    Pattern {
        rule: String,
        what: &'static str,
        pattern: String,
        reason: String,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    /// The values of an optional string-or-list key; none when it is absent.
    fn list(value: &Option<OneOrMany>) -> Vec<String> {
        match value {
            None => Vec::new(),
            Some(Self::One(s)) => vec![s.clone()],
            Some(Self::Many(v)) => v.clone(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    default: Option<Action>,
    #[serde(default, rename = "rule")]
    rules: Vec<MonitorRuleSpec>,
}

/// One rule as written in the file (also what `/api/rules` shows).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MonitorRuleSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    action: Action,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// Tool name(s) or globs (`api_execute`, `api_*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool: Option<OneOrMany>,
    /// HTTP method(s) of `api_execute`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    method: Option<OneOrMany>,
    /// Glob(s) on the operation's path template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<OneOrMany>,
    /// Argument name → regex on the sanitized argument (a string, or the type name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    args: Option<BTreeMap<String, String>>,
    /// `true`: only `api_execute` calls that change something (POST, PUT, PATCH, DELETE and
    /// not a dry run); `false`: only the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mutating: Option<bool>,
    /// Matches once the session's `toolCallCount` is above this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_tool_calls: Option<u64>,
    /// Matches once the session, or the API key or user session behind it (apigate's
    /// session ids name both), made more than this many calls in the last 60 seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_calls_per_minute: Option<u32>,
}

#[derive(Debug, Clone)]
struct Rule {
    name: String,
    action: Action,
    reason: Option<String>,
    tools: Vec<GlobMatcher>,
    methods: Vec<String>,
    paths: Vec<GlobMatcher>,
    args: Vec<(String, Regex)>,
    mutating: Option<bool>,
    max_tool_calls: Option<u64>,
    max_calls_per_minute: Option<u32>,
}

/// A loaded rule set.
#[derive(Debug, Clone)]
pub struct RuleSet {
    default: Action,
    rules: Vec<Rule>,
    specs: Vec<MonitorRuleSpec>,
    source: String,
}

/// What the monitor knows about a call when it decides.
#[derive(Debug, Clone, Copy)]
pub struct RuleFacts<'a> {
    pub tool: &'a str,
    /// The sanitized `args` of the event.
    pub args: &'a Value,
    /// `sessionStats.toolCallCount` of the event.
    pub tool_call_count: u64,
    /// Calls in the last 60 s, this one included: the most of this session's, its key's and
    /// its user session's.
    pub calls_last_minute: u32,
}

/// The outcome of evaluating a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub action: Action,
    /// The matching rule's name, `None` for the default.
    pub rule: Option<String>,
    pub reason: String,
}

impl RuleSet {
    /// The rules used without `--rules`: every mutating `api_execute` needs approval.
    pub(crate) fn default_rules() -> Self {
        let spec = MonitorRuleSpec {
            name: Some("approve-mutating".to_owned()),
            action: Action::RequireApproval,
            reason: Some("a call that changes data needs a person's approval".to_owned()),
            tool: Some(OneOrMany::One(Tool::Execute.name().to_owned())),
            method: None,
            path: None,
            args: None,
            mutating: Some(true),
            max_tool_calls: None,
            max_calls_per_minute: None,
        };
        let file = RulesFile {
            default: Some(Action::Allow),
            rules: vec![spec],
        };
        // The built-in rule has no patterns that can fail to compile.
        Self::compile(file, "built-in default rules".to_owned()).unwrap_or_else(|_| Self {
            default: Action::Allow,
            rules: Vec::new(),
            specs: Vec::new(),
            source: "built-in default rules".to_owned(),
        })
    }

    /// Reads and compiles a TOML rules file.
    pub(crate) fn from_file(path: &Path) -> Result<Self, RulesError> {
        let text = std::fs::read_to_string(path).map_err(|source| RulesError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let file: RulesFile = toml::from_str(&text)?;
        Self::compile(file, path.display().to_string())
    }

    /// Compiles rules from TOML text.
    pub fn from_toml_str(text: &str) -> Result<Self, RulesError> {
        let file: RulesFile = toml::from_str(text)?;
        Self::compile(file, "inline rules".to_owned())
    }

    /// Where the rules came from (a path or "built-in default rules").
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The action when no rule matches.
    pub(crate) fn default_action(&self) -> Action {
        self.default
    }

    /// The rules as written, for display.
    pub fn specs(&self) -> &[MonitorRuleSpec] {
        &self.specs
    }

    fn compile(file: RulesFile, source: String) -> Result<Self, RulesError> {
        let mut rules = Vec::with_capacity(file.rules.len());
        for (i, spec) in file.rules.iter().enumerate() {
            rules.push(compile_rule(spec.clone(), i)?);
        }
        Ok(Self {
            default: file.default.unwrap_or(Action::Allow),
            rules,
            specs: file.rules,
            source,
        })
    }

    /// The first matching rule decides; otherwise the default action.
    pub fn evaluate(&self, facts: &RuleFacts<'_>) -> Verdict {
        for rule in &self.rules {
            if rule.matches(facts) {
                let reason = rule.reason.clone().unwrap_or_else(|| rule.describe(facts));
                return Verdict {
                    action: rule.action,
                    rule: Some(rule.name.clone()),
                    reason,
                };
            }
        }
        Verdict {
            action: self.default,
            rule: None,
            reason: match self.default {
                Action::Allow => "no rule matched".to_owned(),
                Action::Block => "no rule allows this call (default: block)".to_owned(),
                Action::RequireApproval => {
                    "no rule matched; approval required by default".to_owned()
                }
            },
        }
    }
}

fn compile_rule(spec: MonitorRuleSpec, index: usize) -> Result<Rule, RulesError> {
    let name = spec
        .name
        .clone()
        .unwrap_or_else(|| format!("rule {}", index + 1));
    let pattern_error = |what: &'static str, pattern: &str, reason: String| RulesError::Pattern {
        rule: name.clone(),
        what,
        pattern: pattern.to_owned(),
        reason,
    };
    let tools = OneOrMany::list(&spec.tool)
        .iter()
        .map(|t| {
            Glob::new(t)
                .map(|g| g.compile_matcher())
                .map_err(|e| pattern_error("tool pattern", t, e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let methods = OneOrMany::list(&spec.method)
        .into_iter()
        .map(|m| m.to_ascii_uppercase())
        .collect();
    let paths = OneOrMany::list(&spec.path)
        .iter()
        .map(|p| {
            GlobBuilder::new(p)
                .literal_separator(true)
                .build()
                .map(|g| g.compile_matcher())
                .map_err(|e| pattern_error("path glob", p, e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let args = spec
        .args
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, re)| {
            Regex::new(&re)
                .map(|r| (k.clone(), r))
                .map_err(|e| pattern_error("argument regex", &re, e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Rule {
        name,
        action: spec.action,
        reason: spec.reason,
        tools,
        methods,
        paths,
        args,
        mutating: spec.mutating,
        max_tool_calls: spec.max_tool_calls,
        max_calls_per_minute: spec.max_calls_per_minute,
    })
}

fn arg_str<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// Does this `api_execute` call change something? `Method::is_mutating` decides, as it does
/// for discovery; a method that is not one of the eight, or none, counts as mutating.
pub(crate) fn is_mutating(tool: &str, args: &Value) -> bool {
    if tool != Tool::Execute.name() {
        return false;
    }
    if args.get("dryRun") == Some(&Value::Bool(true)) {
        return false;
    }
    arg_str(args, "method")
        .and_then(Method::parse)
        .is_none_or(Method::is_mutating)
}

impl Rule {
    fn matches(&self, f: &RuleFacts<'_>) -> bool {
        let operation_condition = !self.methods.is_empty() || !self.paths.is_empty();
        let tool_ok = if self.tools.is_empty() {
            !operation_condition || f.tool == Tool::Execute.name()
        } else {
            self.tools.iter().any(|g| g.is_match(f.tool))
        };
        if !tool_ok {
            return false;
        }
        if !self.methods.is_empty() {
            let Some(m) = arg_str(f.args, "method") else {
                return false;
            };
            if !self.methods.iter().any(|x| x.eq_ignore_ascii_case(m)) {
                return false;
            }
        }
        if !self.paths.is_empty() {
            let Some(p) = arg_str(f.args, "path") else {
                return false;
            };
            if !self.paths.iter().any(|g| g.is_match(p)) {
                return false;
            }
        }
        for (key, re) in &self.args {
            let Some(v) = arg_str(f.args, key) else {
                return false;
            };
            if !re.is_match(v) {
                return false;
            }
        }
        if let Some(want) = self.mutating
            && is_mutating(f.tool, f.args) != want
        {
            return false;
        }
        if let Some(max) = self.max_tool_calls
            && f.tool_call_count <= max
        {
            return false;
        }
        if let Some(max) = self.max_calls_per_minute
            && f.calls_last_minute <= max
        {
            return false;
        }
        true
    }

    fn describe(&self, f: &RuleFacts<'_>) -> String {
        let what = match (arg_str(f.args, "method"), arg_str(f.args, "path")) {
            (Some(m), Some(p)) => format!("{} {m} {p}", f.tool),
            _ => f.tool.to_owned(),
        };
        let verb = match self.action {
            Action::Allow => "allows",
            Action::Block => "blocks",
            Action::RequireApproval => "requires approval for",
        };
        let mut why = Vec::new();
        if let Some(max) = self.max_tool_calls {
            why.push(format!(
                "{} calls in this session, limit {max}",
                f.tool_call_count
            ));
        }
        if let Some(max) = self.max_calls_per_minute {
            why.push(format!(
                "{} calls in the last minute, limit {max}",
                f.calls_last_minute
            ));
        }
        let why = if why.is_empty() {
            String::new()
        } else {
            format!(" ({})", why.join("; "))
        };
        format!("rule {:?} {verb} {what}{why}", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts<'a>(tool: &'a str, args: &'a Value) -> RuleFacts<'a> {
        RuleFacts {
            tool,
            args,
            tool_call_count: 1,
            calls_last_minute: 1,
        }
    }

    #[test]
    fn the_approval_rule_and_discovery_agree_on_every_method() {
        for m in Method::ALL {
            for name in [m.as_str().to_string(), m.as_str().to_ascii_lowercase()] {
                let args = json!({"method": name, "path": "/x"});
                assert_eq!(is_mutating("api_execute", &args), m.is_mutating(), "{name}");
            }
        }
        // TRACE echoes the request, credentials included: a person approves it.
        let trace = json!({"method": "TRACE", "path": "/x"});
        assert_eq!(
            RuleSet::default_rules()
                .evaluate(&facts("api_execute", &trace))
                .action,
            Action::RequireApproval
        );
        assert!(is_mutating("api_execute", &json!({"method": "FETCH"})));
        assert!(is_mutating("api_execute", &json!({"path": "/x"})));
    }

    #[test]
    fn default_rules_ask_approval_for_mutating_execute_only() {
        let rules = RuleSet::default_rules();
        let del = json!({"method": "DELETE", "path": "/pets/{id}"});
        let get = json!({"method": "GET", "path": "/pets"});
        let dry = json!({"method": "POST", "path": "/pets", "dryRun": true});
        for (tool, args, action) in [
            ("api_execute", &del, Action::RequireApproval),
            ("api_execute", &get, Action::Allow),
            ("api_execute", &dry, Action::Allow),
            ("api_discover", &del, Action::Allow),
        ] {
            assert_eq!(
                rules.evaluate(&facts(tool, args)).action,
                action,
                "{tool} {args}"
            );
        }
    }

    #[test]
    fn conditions_combine_and_first_match_wins() {
        let rules = RuleSet::from_toml_str(
            r#"
            default = "block"
            [[rule]]
            name = "admin"
            action = "block"
            reason = "no admin"
            path = "/admin/**"
            [[rule]]
            action = "block"
            method = ["delete"]
            path = "/users/*"
            [[rule]]
            name = "sql"
            action = "block"
            tool = "api_discover"
            args = { query = "(?i)drop\\s+table" }
            [[rule]]
            name = "burst"
            action = "block"
            max_calls_per_minute = 3
            [[rule]]
            name = "budget"
            action = "block"
            max_tool_calls = 10
            [[rule]]
            name = "reads"
            action = "allow"
            tool = "api_*"
            "#,
        )
        .unwrap();
        let admin = json!({"method": "GET", "path": "/admin/a/b"});
        let v = rules.evaluate(&facts("api_execute", &admin));
        assert_eq!(
            (v.action, v.rule.as_deref(), v.reason.as_str()),
            (Action::Block, Some("admin"), "no admin")
        );
        // `admin` has only a path: api_schema is not matched by it.
        assert_eq!(
            rules.evaluate(&facts("api_schema", &admin)).rule.as_deref(),
            Some("reads")
        );
        let del_user = json!({"method": "DELETE", "path": "/users/{id}"});
        let v = rules.evaluate(&facts("api_execute", &del_user));
        assert_eq!(v.rule.as_deref(), Some("rule 2"));
        assert!(
            v.reason.contains("blocks api_execute DELETE /users/{id}"),
            "{}",
            v.reason
        );
        let nested = json!({"method": "DELETE", "path": "/users/{id}/keys"});
        assert_eq!(
            rules
                .evaluate(&facts("api_execute", &nested))
                .rule
                .as_deref(),
            Some("reads")
        );
        let q = json!({"query": "please DROP  TABLE users"});
        assert_eq!(
            rules.evaluate(&facts("api_discover", &q)).rule.as_deref(),
            Some("sql")
        );
        let mut f = facts("api_discover", &admin);
        f.calls_last_minute = 4;
        assert_eq!(rules.evaluate(&f).rule.as_deref(), Some("burst"));
        let mut f = facts("api_discover", &admin);
        f.tool_call_count = 10;
        assert_eq!(rules.evaluate(&f).rule.as_deref(), Some("reads"));
        f.tool_call_count = 11;
        assert_eq!(rules.evaluate(&f).rule.as_deref(), Some("budget"));
        let v = rules.evaluate(&facts("other_tool", &admin));
        assert_eq!((v.action, v.rule), (Action::Block, None));
    }

    #[test]
    fn bad_files_are_refused_with_the_rule_named() {
        let err = RuleSet::from_toml_str(
            "[[rule]]\nname = \"x\"\naction = \"block\"\nargs = { query = \"(\" }\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("rule \"x\""), "{err}");
        assert!(RuleSet::from_toml_str("[[rule]]\naction = \"maybe\"\n").is_err());
        assert!(RuleSet::from_toml_str("[[rule]]\naction = \"block\"\ntypo = 1\n").is_err());
    }

    #[test]
    fn sample_rules_file_compiles() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/monitor-rules.toml");
        let rules = RuleSet::from_file(&path).unwrap();
        assert!(!rules.specs().is_empty());
    }
}
