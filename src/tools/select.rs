//! `api_execute`'s `select`: a JMESPath expression (the language of the AWS and Azure CLIs'
//! `--query`) compiled once when the arguments are planned, before any request is sent, and
//! applied to the parsed response body before the response budget. JMESPath has no loops or
//! recursion of its own: an expression always terminates. Pure: no I/O, no upstream.

use serde_json::Value;

/// Longest `select` expression, in bytes (also the input schema's `maxLength`).
pub(crate) const MAX_SELECT_BYTES: usize = 1024;

/// A compiled `select` expression.
pub struct Select {
    expression: jmespath::Expression<'static>,
}

impl std::fmt::Debug for Select {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Select")
            .field(&self.expression.as_str())
            .finish()
    }
}

/// Why a `select` expression could not be compiled or applied: at which character, and why.
#[derive(Debug, thiserror::Error)]
#[error("{} at character {offset}: {reason}", .stage.says())]
pub struct SelectError {
    pub stage: Stage,
    pub offset: usize,
    pub reason: String,
}

/// Where a [`SelectError`] happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Not valid JMESPath: `offset` is the character where the parser stopped.
    Syntax,
    /// Valid, but failed on this body (a function given the wrong type, for example).
    Runtime,
}

impl Stage {
    fn says(self) -> &'static str {
        match self {
            Stage::Syntax => "not a valid JMESPath expression",
            Stage::Runtime => "the expression failed on this body",
        }
    }

    fn error(self, e: &jmespath::JmespathError) -> SelectError {
        SelectError {
            stage: self,
            offset: e.offset,
            reason: reason(e),
        }
    }
}

impl Select {
    /// Compiles `text`; the caller has checked its length. More than [`MAX_OPERATORS`]
    /// operators are refused before the (recursive) parser sees them.
    pub fn parse(text: &str) -> Result<Select, SelectError> {
        operators(text)?;
        jmespath::compile(text)
            .map(|expression| Select { expression })
            .map_err(|e| Stage::Syntax.error(&e))
    }

    /// The expression as given.
    pub fn as_str(&self) -> &str {
        self.expression.as_str()
    }

    /// The expression's result on `body` (`null` when nothing matched).
    pub fn apply(&self, body: &Value) -> Result<Value, SelectError> {
        let runtime = |e: jmespath::JmespathError| Stage::Runtime.error(&e);
        let data = jmespath::Variable::try_from(body).map_err(runtime)?;
        let found = self.expression.search(data).map_err(runtime)?;
        // A Variable serializes to JSON without fail: its values came from JSON.
        let mut out = serde_json::to_value(&*found).unwrap_or(Value::Null);
        whole_numbers(&mut out);
        Ok(out)
    }
}

/// `api_schema`'s lesson on `select` for an operation it described (`responses`, of its
/// compact view): one example made of the success body's own field names, when it has some.
pub fn lesson(responses: &serde_json::Map<String, Value>) -> Option<String> {
    let shape = responses
        .iter()
        .filter(|(status, _)| status.starts_with('2'))
        .find_map(|(_, r)| r.get("shape").filter(|s| s.is_object()))?;
    // Two names, identifiers and titles first; names JMESPath takes bare.
    let pick = |fields: &serde_json::Map<String, Value>, arrays: bool| -> Vec<String> {
        let bare = |n: &str| {
            n.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        let is_array = |t: &Value| t.as_str().is_some_and(|t| t.starts_with("array"));
        let mut names: Vec<&String> = fields
            .iter()
            .filter(|(n, t)| bare(n) && is_array(t) == arrays)
            .map(|(n, _)| n)
            .collect();
        let rank = |n: &str| {
            ["number", "title", "name", "id", "status", "state"]
                .iter()
                .position(|p| *p == n)
                .unwrap_or(usize::MAX)
        };
        names.sort_by_key(|n| rank(n));
        names.into_iter().take(2).cloned().collect()
    };
    let pairs = |names: &[String]| {
        names
            .iter()
            .map(|n| format!("{n}: {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let example = if let Some(items) = shape["items"]["properties"].as_object() {
        format!("[].{{{}}}", pairs(&pick(items, false)))
    } else {
        let fields = shape["properties"].as_object()?;
        match pick(fields, true).first() {
            Some(list) => {
                let others = pick(fields, false);
                let mut parts = vec![format!("{list}: {list}[:10]")];
                parts.extend(others.iter().map(|n| format!("{n}: {n}")));
                format!("{{{}}}", parts.join(", "))
            }
            None => format!("{{{}}}", pairs(&pick(fields, false))),
        }
    };
    (!example.contains("{}")).then(|| {
        format!(
            "api_execute's `select` keeps only what you need of the response body before it is \
             cut to the budget: a JMESPath expression, e.g. `{example}`"
        )
    })
}

/// The most operators (`.`, `|`, `||`, `&&`, comparisons, `!`, opening brackets) an
/// expression may hold: the parser and the interpreter recurse once per operator of a chain
/// or a nesting, and a 1 KiB chain (`a.a.a…`, 500 levels) overflows a thread's stack.
pub(crate) const MAX_OPERATORS: usize = 64;

/// Refuses an expression with more than [`MAX_OPERATORS`] operators outside its quoted
/// strings and literals, before the recursive parser sees it.
fn operators(text: &str) -> Result<(), SelectError> {
    let (mut count, mut quote, mut prev) = (0usize, None::<char>, ' ');
    let mut chars = text.char_indices();
    while let Some((at, c)) = chars.next() {
        match (quote, c) {
            (Some(_), '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"' | '`') => quote = Some(c),
            // `||`, `&&`, `==`, `<=`, … count once.
            (None, '|' | '&' | '=') if prev == c || (c == '=' && "<>!".contains(prev)) => {}
            (None, '(' | '[' | '{' | '.' | '|' | '&' | '!' | '<' | '>' | '=') => count += 1,
            _ => {}
        }
        prev = c;
        if count > MAX_OPERATORS {
            return Err(SelectError {
                stage: Stage::Syntax,
                offset: text[..at].chars().count(),
                reason: format!(
                    "more than {MAX_OPERATORS} operators (., |, [, {{, (, !, comparisons): \
                     select less at once"
                ),
            });
        }
    }
    Ok(())
}

/// JMESPath computes in floating point: `abs`, `sum`, `ceil`… give `3.0` for 3. A whole
/// number is shown as one, as the API would have written it.
fn whole_numbers(v: &mut Value) {
    match v {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9.0e15
            {
                *v = Value::from(f as i64);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(whole_numbers),
        Value::Object(m) => m.values_mut().for_each(whole_numbers),
        _ => {}
    }
}

/// The error's reason without the crate's multi-line rendering of the expression.
fn reason(e: &jmespath::JmespathError) -> String {
    match &e.reason {
        jmespath::ErrorReason::Parse(s) => s.clone(),
        jmespath::ErrorReason::Runtime(r) => r.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn selects_fields_and_filters() {
        let issues = json!([
            {"number": 1, "title": "a", "labels": [{"name": "bug"}], "body": "long"},
            {"number": 2, "title": "b", "labels": [], "body": "longer"}
        ]);
        let s = Select::parse("[].{number: number, title: title, labels: labels[].name}").unwrap();
        assert_eq!(
            s.apply(&issues).unwrap(),
            json!([{"labels": ["bug"], "number": 1, "title": "a"},
                   {"labels": [], "number": 2, "title": "b"}])
        );
        let charges =
            json!({"data": [{"id": "ch_1", "amount": 500}, {"id": "ch_2", "amount": 5000}]});
        let s = Select::parse("data[?amount > `1000`].id").unwrap();
        assert_eq!(s.apply(&charges).unwrap(), json!(["ch_2"]));
        assert_eq!(
            Select::parse("nothing.here")
                .unwrap()
                .apply(&charges)
                .unwrap(),
            Value::Null
        );
    }

    #[test]
    fn api_schema_teaches_it_with_the_fields_of_the_body() {
        let responses = |v: Value| v["responses"].as_object().cloned().unwrap();
        let list = responses(
            json!({"responses": {"200": {"shape": {"type": "array", "items": {"type": "object",
            "properties": {"url": "string", "number": "integer", "title": "string"}}}}}}),
        );
        let l = lesson(&list).unwrap();
        assert!(l.contains("`[].{number: number, title: title}`"), "{l}");
        let stripe = responses(
            json!({"responses": {"200": {"shape": {"type": "object", "properties":
            {"data": "array of object", "has_more": "boolean", "object": "string"}}}}}),
        );
        let l = lesson(&stripe).unwrap();
        assert!(
            l.contains("`{data: data[:10], has_more: has_more, object: object}`"),
            "{l}"
        );
        for s in [&list, &stripe] {
            let e = lesson(s).unwrap();
            let expr = e.split('`').nth(3).unwrap();
            Select::parse(expr).unwrap();
        }
        assert_eq!(lesson(&responses(json!({"responses": {"204": {}}}))), None);
    }

    #[test]
    fn errors_say_where() {
        let Err(SelectError {
            stage: Stage::Syntax,
            offset,
            ..
        }) = Select::parse("data[?amount >")
        else {
            panic!("a syntax error")
        };
        assert_eq!(offset, 14);
        let s = Select::parse("length(@)").unwrap();
        assert!(matches!(
            s.apply(&json!(5)),
            Err(SelectError {
                stage: Stage::Runtime,
                ..
            })
        ));
        // Deep nesting and long chains are refused past MAX_OPERATORS, before the recursive
        // parser sees them; up to it, neither the parser nor the interpreter overflows.
        let data = json!({"a": {"a": 1}});
        for link in [
            "(", "[", "{a: ", "!", "[?", ".a", "|a", "||a", "&&a", " == a", "[0]", "[]", "[*]",
            ".*", " < a",
        ] {
            let long = format!("a{}", link.repeat((MAX_SELECT_BYTES - 1) / link.len()));
            let Err(SelectError {
                stage: Stage::Syntax,
                reason,
                ..
            }) = Select::parse(&long)
            else {
                panic!("{link}: refused")
            };
            assert!(reason.contains("operators"), "{link}: {reason}");
            let most = format!("a{}", link.repeat(MAX_OPERATORS));
            if let Ok(s) = Select::parse(&most) {
                let _ = s.apply(&data);
            }
        }
        let nested = format!(
            "{}a{}",
            "(".repeat(MAX_OPERATORS),
            ")".repeat(MAX_OPERATORS)
        );
        assert_eq!(
            Select::parse(&nested).unwrap().apply(&data).unwrap(),
            data["a"]
        );
        // Quoted brackets and dots are not operators.
        Select::parse(&format!("'{}'", "[.".repeat(100))).unwrap();
    }

    /// One case of the JMESPath compliance suite (jmespath.test), and how it went.
    enum Outcome {
        Pass,
        Fail(String),
    }

    /// JSON equality with numbers compared by value (`1` is `1.0`), as JMESPath compares.
    fn same(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
            }
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
            }
            _ => a == b,
        }
    }

    fn run_case(given: &Value, case: &Value) -> Outcome {
        let Some(text) = case["expression"].as_str() else {
            return Outcome::Fail("no expression".into());
        };
        let compiled = Select::parse(text);
        match (case.get("result"), case.get("error")) {
            (Some(expected), _) => match compiled.map(|s| s.apply(given)) {
                Ok(Ok(got)) if same(&got, expected) => Outcome::Pass,
                Ok(Ok(got)) => Outcome::Fail(format!("got {got}, expected {expected}")),
                Ok(Err(e)) | Err(e) => Outcome::Fail(format!("{e}, expected {expected}")),
            },
            (None, Some(kind)) => {
                let failed = match (kind.as_str(), compiled) {
                    (Some("syntax"), Err(e)) if e.stage == Stage::Syntax => true,
                    (Some("syntax"), _) => false,
                    (_, Ok(s)) => s.apply(given).is_err(),
                    (_, Err(_)) => false,
                };
                if failed {
                    Outcome::Pass
                } else {
                    Outcome::Fail(format!("expected a {kind} error"))
                }
            }
            // A benchmark case asserts no result: only that the expression compiles (some
            // fail when run, as in every implementation: `sum` of 26 arguments).
            (None, None) => match compiled {
                Ok(s) => {
                    let _ = s.apply(given);
                    Outcome::Pass
                }
                Err(e) => Outcome::Fail(e.to_string()),
            },
        }
    }

    /// The JMESPath compliance suite (tests/data/jmespath/, from jmespath.test as the crate
    /// ships it) run through `Select`: every case, with the known failures listed by name in
    /// `known-failures.txt` (a case that starts to pass, or a new failure, fails this test).
    #[test]
    fn compliance_suite() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/jmespath");
        let known: std::collections::BTreeSet<String> =
            std::fs::read_to_string(format!("{dir}/known-failures.txt"))
                .unwrap()
                .lines()
                .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
                .map(|l| l.split(" # ").next().unwrap_or(l).trim().to_string())
                .collect();
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        let (mut passed, mut failed) = (0, Vec::new());
        for file in &files {
            let name = file.file_stem().unwrap().to_string_lossy().to_string();
            let suites: Vec<Value> =
                serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
            for (i, suite) in suites.iter().enumerate() {
                for (j, case) in suite["cases"].as_array().unwrap().iter().enumerate() {
                    let id = format!("{name}/{i}/{j}");
                    match run_case(&suite["given"], case) {
                        Outcome::Pass => passed += 1,
                        Outcome::Fail(why) => failed.push((id, why)),
                    }
                }
            }
        }
        let failed_ids: std::collections::BTreeSet<String> =
            failed.iter().map(|(id, _)| id.clone()).collect();
        let report: Vec<String> = failed
            .iter()
            .map(|(id, why)| format!("{id} # {why}"))
            .collect();
        assert_eq!(
            failed_ids,
            known,
            "the failures differ from known-failures.txt; now failing:\n{}",
            report.join("\n")
        );
        assert_eq!(passed + failed.len(), 875, "every case of the suite ran");
        assert_eq!(passed, 875 - known.len());
    }
}
