//! `api_execute`'s `select`: a JMESPath expression (the language of the AWS and Azure CLIs'
//! `--query`) compiled once when the arguments are parsed (`args::execute`: the typed
//! arguments hold a [`Select`], never its text), before any request is sent, and applied to the
//! parsed response body before the response budget; what an agent is told when it does not
//! compile or fails on a body ([`SelectError::to_tool_error`]). JMESPath has no loops or
//! recursion of its own: an expression always terminates. Pure: no I/O, no upstream.

use serde_json::Value;

use super::error::ToolError;
use crate::spec::Violation;

mod eval;

/// Longest `select` expression, in bytes (also the input schema's `maxLength`).
pub(crate) const MAX_SELECT_BYTES: usize = 1024;

/// A compiled `select` expression. Serialized as the text it was compiled from (the `next`
/// call's arguments carry it).
#[derive(Clone)]
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
#[derive(Debug)]
pub struct SelectError {
    pub stage: Stage,
    pub offset: usize,
    pub reason: String,
}

impl std::fmt::Display for SelectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.stage {
            Stage::Size => write!(f, "{}: {}", self.stage.says(), self.reason),
            _ => write!(
                f,
                "{} at character {}: {}",
                self.stage.says(),
                self.offset,
                self.reason
            ),
        }
    }
}

impl std::error::Error for SelectError {}

impl SelectError {
    /// The error an agent gets: `INVALID_ARGUMENTS` at `/select`, with the parser's position
    /// (the size of a result says what to do instead).
    pub fn to_tool_error(&self) -> ToolError {
        let message = match self.stage {
            Stage::Size => format!("`select`: {self}"),
            _ => format!(
                "`select` {self}; it is a JMESPath expression, e.g. `[].{{id: id, name: name}}`"
            ),
        };
        ToolError::invalid(
            message,
            vec![Violation {
                pointer: "/select".into(),
                message: self.to_string(),
            }],
        )
    }
}

impl serde::Serialize for Select {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Where a [`SelectError`] happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Not valid JMESPath: `offset` is the character where the parser stopped.
    Syntax,
    /// Valid, but failed on this body (a function given the wrong type, for example).
    Runtime,
    /// Valid, but its result on this body would be larger than the call may hold.
    Size,
}

impl Stage {
    fn says(self) -> &'static str {
        match self {
            Stage::Syntax => "not a valid JMESPath expression",
            Stage::Runtime => "the expression failed on this body",
            Stage::Size => "the result is too large",
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
    /// operators are refused before the (recursive) parser sees them; more than
    /// [`MAX_NODES`] nodes of any kind, or a function JMESPath does not have, once parsed:
    /// before any request is sent.
    pub fn parse(text: &str) -> Result<Select, SelectError> {
        operators(text)?;
        let expression = jmespath::compile(text).map_err(|e| Stage::Syntax.error(&e))?;
        let mut nodes = 0;
        check(expression.as_ast(), &mut nodes)?;
        Ok(Select { expression })
    }

    /// The expression as given.
    pub fn as_str(&self) -> &str {
        self.expression.as_str()
    }

    /// Whether the expression maps the list at JSON pointer `list` item by item, in order, to
    /// a top-level list (`[].title`, `data[*].{id: id}`): no filter, sort or function around
    /// it. Its result's `n`th element then comes from the list's `n`th item whenever the two
    /// lists are as long (a projection drops the items it maps to `null`).
    pub fn item_wise(&self, list: &str) -> bool {
        use jmespath::ast::Ast;
        fn path(ast: &Ast, out: &mut String) -> bool {
            match ast {
                Ast::Identity { .. } => true,
                Ast::Field { name, .. } => {
                    crate::spec::push_segment(out, name);
                    true
                }
                Ast::Subexpr { lhs, rhs, .. } => path(lhs, out) && path(rhs, out),
                _ => false,
            }
        }
        let Ast::Projection { lhs, rhs, .. } = self.expression.as_ast() else {
            return false;
        };
        if matches!(**rhs, Ast::Condition { .. }) {
            return false;
        }
        let source = match &**lhs {
            Ast::Flatten { node, .. } => node,
            other => other,
        };
        let mut at = String::new();
        path(source, &mut at) && at == list
    }

    /// The expression's result on `body` (`null` when nothing matched), taking the body
    /// (its strings move into the expression's data, not copied). The result is built within
    /// `room`: JMESPath shares the values an expression repeats (`[@, @]` holds the body twice
    /// by reference), and the JSON result would copy each; a result over either bound is
    /// refused before it is allocated.
    pub fn apply(&self, body: Value, room: Room) -> Result<Value, SelectError> {
        let data = into_variable(body);
        let mut search = eval::Eval::new(self.as_str(), room.memory);
        let found = search
            .eval(&data, self.expression.as_ast())
            .map_err(|stop| match stop {
                eval::Stop::Failed(e) => Stage::Runtime.error(&e),
                eval::Stop::Invalid { offset, reason } => SelectError {
                    stage: Stage::Runtime,
                    offset,
                    reason,
                },
                eval::Stop::Bytes(n) => SelectError {
                    stage: Stage::Size,
                    offset: 0,
                    reason: TooLarge::Memory(n).to_string(),
                },
                eval::Stop::Steps => SelectError {
                    stage: Stage::Size,
                    offset: 0,
                    reason: format!(
                        "the selection would take more than {} steps: select less",
                        eval::MAX_STEPS
                    ),
                },
            })?;
        drop(data);
        // What the search made is still held while the result is built.
        let mut used = Used {
            room,
            json_bytes: 0,
            memory: search.used(),
        };
        let mut out = to_json(&found, &mut used).map_err(|over| SelectError {
            stage: Stage::Size,
            offset: 0,
            reason: over.to_string(),
        })?;
        whole_numbers(&mut out);
        Ok(out)
    }
}

/// The bounds a `select` result is built within, counted down as it is built.
#[derive(Debug, Clone, Copy)]
pub struct Room {
    /// Bytes of JSON text the result may take (the body itself may be up to
    /// `--max-read-bytes`: a selection is never allowed less).
    pub json_bytes: usize,
    /// Bytes of memory the result may take: [`VALUE_BYTES`] per value beside its text (what
    /// is left of the call's budget).
    pub memory: usize,
}

impl Room {
    /// No bound but the text's (tests, the fuzz target).
    pub fn json(json_bytes: usize) -> Room {
        Room {
            json_bytes,
            memory: usize::MAX,
        }
    }
}

/// What one JSON value costs in memory beside its text, as the result is counted.
pub const VALUE_BYTES: usize = 112;

/// Which bound of [`Room`] a result would pass.
#[derive(Debug, Clone, Copy, thiserror::Error)]
pub enum TooLarge {
    #[error(
        "the selection would produce more than {0} bytes of JSON (--max-read-bytes): select \
         less, e.g. fewer fields or a slice such as [:100]"
    )]
    Text(usize),
    #[error(
        "the selection would produce more than {0} bytes in memory, what is left of this \
         call's budget (--max-call-bytes): select less, or fewer pages"
    )]
    Memory(usize),
}

/// The most nodes an expression may have once parsed: every field, literal, `@`, element
/// of a multi-select, key of a hash, function, argument and operator counts.
pub(crate) const MAX_NODES: usize = 128;

/// The functions JMESPath has (`jmespath::Runtime::register_builtin_functions`), with the
/// fewest and most arguments each takes (`merge` and `not_null` take any number from one).
const FUNCTIONS: [(&str, usize, usize); 26] = [
    ("abs", 1, 1),
    ("avg", 1, 1),
    ("ceil", 1, 1),
    ("contains", 2, 2),
    ("ends_with", 2, 2),
    ("floor", 1, 1),
    ("join", 2, 2),
    ("keys", 1, 1),
    ("length", 1, 1),
    ("map", 2, 2),
    ("min", 1, 1),
    ("max", 1, 1),
    ("max_by", 2, 2),
    ("min_by", 2, 2),
    ("merge", 1, usize::MAX),
    ("not_null", 1, usize::MAX),
    ("reverse", 1, 1),
    ("sort", 1, 1),
    ("sort_by", 2, 2),
    ("starts_with", 2, 2),
    ("sum", 1, 1),
    ("to_array", 1, 1),
    ("to_number", 1, 1),
    ("to_string", 1, 1),
    ("type", 1, 1),
    ("values", 1, 1),
];

/// The names of [`FUNCTIONS`], for a message.
fn function_names() -> String {
    FUNCTIONS.map(|(name, ..)| name).join(", ")
}

/// Counts the nodes of `ast` into `nodes` and refuses more than [`MAX_NODES`], and functions
/// JMESPath does not have. Recursion is bounded by [`MAX_OPERATORS`] (checked before).
fn check(ast: &jmespath::ast::Ast, nodes: &mut usize) -> Result<(), SelectError> {
    use jmespath::ast::Ast;
    *nodes += 1;
    let at = offset(ast);
    if *nodes > MAX_NODES {
        return Err(SelectError {
            stage: Stage::Syntax,
            offset: at,
            reason: format!(
                "more than {MAX_NODES} parts (fields, `@`, literals, elements of a \
                 multi-select, functions and operators): select less at once"
            ),
        });
    }
    match ast {
        Ast::Identity { .. }
        | Ast::Field { .. }
        | Ast::Index { .. }
        | Ast::Literal { .. }
        | Ast::Slice { .. } => Ok(()),
        Ast::Comparison { lhs, rhs, .. }
        | Ast::Projection { lhs, rhs, .. }
        | Ast::And { lhs, rhs, .. }
        | Ast::Or { lhs, rhs, .. }
        | Ast::Subexpr { lhs, rhs, .. } => {
            check(lhs, nodes)?;
            check(rhs, nodes)
        }
        Ast::Condition {
            predicate, then, ..
        } => {
            check(predicate, nodes)?;
            check(then, nodes)
        }
        Ast::Expref { ast: node, .. }
        | Ast::Flatten { node, .. }
        | Ast::Not { node, .. }
        | Ast::ObjectValues { node, .. } => check(node, nodes),
        Ast::MultiList { elements, .. } => elements.iter().try_for_each(|e| check(e, nodes)),
        Ast::MultiHash { elements, .. } => elements.iter().try_for_each(|kv| {
            *nodes += 1;
            check(&kv.value, nodes)
        }),
        Ast::Function { name, args, .. } => {
            let refuse = |reason: String| SelectError {
                stage: Stage::Syntax,
                offset: at,
                reason,
            };
            let Some(&(_, fewest, most)) = FUNCTIONS.iter().find(|(f, ..)| f == name) else {
                return Err(refuse(format!(
                    "unknown function {}(): JMESPath's functions are {}",
                    name.chars().take(40).collect::<String>(),
                    function_names()
                )));
            };
            if args.len() < fewest || args.len() > most {
                let takes = match (fewest, most) {
                    (n, m) if n == m => format!("{n}"),
                    (n, _) => format!("at least {n}"),
                };
                return Err(refuse(format!(
                    "{name}() takes {takes} argument{}, not {}",
                    if fewest == 1 { "" } else { "s" },
                    args.len()
                )));
            }
            args.iter().try_for_each(|a| check(a, nodes))
        }
    }
}

/// Where a node starts in the expression.
fn offset(ast: &jmespath::ast::Ast) -> usize {
    use jmespath::ast::Ast;
    match ast {
        Ast::Comparison { offset, .. }
        | Ast::Condition { offset, .. }
        | Ast::Identity { offset }
        | Ast::Expref { offset, .. }
        | Ast::Flatten { offset, .. }
        | Ast::Function { offset, .. }
        | Ast::Field { offset, .. }
        | Ast::Index { offset, .. }
        | Ast::Literal { offset, .. }
        | Ast::MultiList { offset, .. }
        | Ast::MultiHash { offset, .. }
        | Ast::Not { offset, .. }
        | Ast::Projection { offset, .. }
        | Ast::ObjectValues { offset, .. }
        | Ast::And { offset, .. }
        | Ast::Or { offset, .. }
        | Ast::Slice { offset, .. }
        | Ast::Subexpr { offset, .. } => *offset,
    }
}

/// `v` as JMESPath's data, its strings and numbers moved rather than copied.
fn into_variable(v: Value) -> jmespath::Rcvar {
    use jmespath::Variable;
    jmespath::Rcvar::new(match v {
        Value::Null => Variable::Null,
        Value::Bool(b) => Variable::Bool(b),
        Value::Number(n) => Variable::Number(n),
        Value::String(s) => Variable::String(s),
        Value::Array(a) => Variable::Array(a.into_iter().map(into_variable).collect()),
        Value::Object(m) => {
            Variable::Object(m.into_iter().map(|(k, v)| (k, into_variable(v))).collect())
        }
    })
}

/// What a result took so far, against its [`Room`].
struct Used {
    room: Room,
    json_bytes: usize,
    memory: usize,
}

impl Used {
    /// Counts a value of `bytes` bytes of text, or says which bound it would pass.
    fn take(&mut self, bytes: usize) -> Result<(), TooLarge> {
        self.json_bytes = self.json_bytes.saturating_add(bytes);
        self.memory = self.memory.saturating_add(bytes + VALUE_BYTES);
        if self.json_bytes > self.room.json_bytes {
            return Err(TooLarge::Text(self.room.json_bytes));
        }
        if self.memory > self.room.memory {
            return Err(TooLarge::Memory(self.room.memory));
        }
        Ok(())
    }
}

/// The bytes `s` takes as a JSON string, quotes and escapes included.
fn escaped_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..0x20 => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// `v` as JSON, each value counted against `used` before it is allocated: a value shared
/// many times over is counted each time it would be copied.
fn to_json(v: &jmespath::Variable, used: &mut Used) -> Result<Value, TooLarge> {
    use jmespath::Variable;
    Ok(match v {
        Variable::Null | Variable::Expref(_) => {
            used.take(4)?;
            Value::Null
        }
        Variable::Bool(b) => {
            used.take(5)?;
            Value::Bool(*b)
        }
        Variable::Number(n) => {
            used.take(24)?;
            Value::Number(n.clone())
        }
        Variable::String(s) => {
            used.take(escaped_len(s))?;
            Value::String(s.clone())
        }
        Variable::Array(a) => {
            used.take(2 + a.len())?;
            let mut out = Vec::with_capacity(a.len());
            for item in a {
                out.push(to_json(item, used)?);
            }
            Value::Array(out)
        }
        Variable::Object(m) => {
            used.take(2)?;
            let mut out = serde_json::Map::with_capacity(m.len());
            for (k, item) in m {
                used.take(escaped_len(k) + 2)?;
                out.insert(k.clone(), to_json(item, used)?);
            }
            Value::Object(out)
        }
    })
}

/// `api_schema`'s example of `select` for an operation's answer, from the outline of its
/// success body: two of its fields (numbers, titles, names and ids first), of each item of a
/// list body, or of each item of the body's list whose fields the outline shows
/// (`data[].{id: id, status: status}`), else of the body; none without two such fields.
pub fn lesson(outline: &crate::spec::Outline) -> Option<String> {
    use crate::spec::{FieldKind, Outline};
    // Names JMESPath takes bare.
    let bare = |n: &str| {
        n.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let pairs = |o: &Outline| -> Option<String> {
        let rank = |n: &str| {
            ["number", "title", "name", "id", "status", "state"]
                .iter()
                .position(|p| *p == n)
                .unwrap_or(usize::MAX)
        };
        let mut names: Vec<&str> = o
            .fields
            .iter()
            .filter(|f| f.kind == FieldKind::Scalar && bare(&f.name))
            .map(|f| f.name.as_str())
            .collect();
        names.sort_by_key(|n| rank(n));
        (names.len() >= 2).then(|| {
            names[..2]
                .iter()
                .map(|n| format!("{n}: {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
    };
    if outline.list {
        return pairs(outline).map(|p| format!("[].{{{p}}}"));
    }
    let list = outline.fields.iter().find_map(|f| {
        let items = f.fields.as_deref()?;
        (f.kind == FieldKind::List && bare(&f.name)).then_some((f.name.as_str(), items))
    });
    if let Some((name, items)) = list
        && let Some(p) = pairs(items)
    {
        return Some(format!("{name}[].{{{p}}}"));
    }
    pairs(outline).map(|p| format!("{{{p}}}"))
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
            s.apply(issues.clone(), Room::json(1 << 20)).unwrap(),
            json!([{"labels": ["bug"], "number": 1, "title": "a"},
                   {"labels": [], "number": 2, "title": "b"}])
        );
        let charges =
            json!({"data": [{"id": "ch_1", "amount": 500}, {"id": "ch_2", "amount": 5000}]});
        let s = Select::parse("data[?amount > `1000`].id").unwrap();
        assert_eq!(
            s.apply(charges.clone(), Room::json(1 << 20)).unwrap(),
            json!(["ch_2"])
        );
        assert_eq!(
            Select::parse("nothing.here")
                .unwrap()
                .apply(charges.clone(), Room::json(1 << 20))
                .unwrap(),
            Value::Null
        );
    }

    #[test]
    fn api_schema_teaches_it_with_the_fields_of_the_body() {
        use crate::spec::{FieldKind, FieldOutline, Outline};
        let field = |name: &str, kind: FieldKind, fields: Option<Outline>| FieldOutline {
            name: name.into(),
            kind,
            fields: fields.map(Box::new),
        };
        let object = |fields: Vec<FieldOutline>| Outline {
            list: false,
            scalar: None,
            fields,
            more: 0,
        };
        let issue = object(vec![
            field("url", FieldKind::Scalar, None),
            field("number", FieldKind::Scalar, None),
            field("title", FieldKind::Scalar, None),
            field("labels", FieldKind::List, None),
        ]);
        let mut issues = issue.clone();
        issues.list = true;
        assert_eq!(
            lesson(&issues).as_deref(),
            Some("[].{number: number, title: title}")
        );
        assert_eq!(
            lesson(&issue).as_deref(),
            Some("{number: number, title: title}")
        );
        let charge = object(vec![
            field("amount", FieldKind::Scalar, None),
            field("id", FieldKind::Scalar, None),
            field("status", FieldKind::Scalar, None),
            field("billing_details", FieldKind::Object, None),
        ]);
        let stripe = object(vec![
            field("data", FieldKind::List, Some(charge)),
            field("has_more", FieldKind::Scalar, None),
            field("object", FieldKind::Scalar, None),
        ]);
        assert_eq!(
            lesson(&stripe).as_deref(),
            Some("data[].{id: id, status: status}")
        );
        for o in [&issues, &issue, &stripe] {
            Select::parse(&lesson(o).unwrap()).unwrap();
        }
        // Without two fields to name, no example.
        let bare = object(vec![field("ok", FieldKind::Scalar, None)]);
        assert_eq!(lesson(&bare), None);
        assert_eq!(
            lesson(&Outline {
                list: false,
                scalar: Some("string".into()),
                fields: Vec::new(),
                more: 0
            }),
            None
        );
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
            s.apply(json!(5), Room::json(1 << 20)),
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
                let _ = s.apply(data.clone(), Room::json(1 << 20));
            }
        }
        let nested = format!(
            "{}a{}",
            "(".repeat(MAX_OPERATORS),
            ")".repeat(MAX_OPERATORS)
        );
        assert_eq!(
            Select::parse(&nested)
                .unwrap()
                .apply(data.clone(), Room::json(1 << 20))
                .unwrap(),
            data["a"]
        );
        // Quoted brackets and dots are not operators.
        Select::parse(&format!("'{}'", "[.".repeat(100))).unwrap();
    }

    #[test]
    fn every_node_counts_and_unknown_functions_are_refused() {
        // Ten `@` chained eight times: 15 operators, 95 nodes, 10^8 copies of the body.
        let ten = format!("[{}]", ["@"; 10].join(","));
        let bomb = [ten.as_str(); 8].join("|");
        let s = Select::parse(&bomb).unwrap();
        let body = Value::Array(vec![json!({"id": 1, "name": "a"}); 100]);
        let e = s.apply(body.clone(), Room::json(1 << 20)).unwrap_err();
        assert_eq!(e.stage, Stage::Size);
        assert!(
            e.to_string()
                .contains("the selection would produce more than 1048576 bytes"),
            "{e}"
        );
        // Within memory too.
        let e = s
            .apply(
                body,
                Room {
                    json_bytes: usize::MAX,
                    memory: 1 << 20,
                },
            )
            .unwrap_err();
        assert!(e.to_string().contains("in memory"), "{e}");
        // Commas count: 130 fields of a multi-select are refused with no operator at all.
        let wide = format!("[{}]", vec!["a"; 130].join(","));
        let e = Select::parse(&wide).unwrap_err();
        assert!(e.reason.contains("parts"), "{e}");
        let hash = format!(
            "{{{}}}",
            (0..70)
                .map(|i| format!("k{i}: a"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert!(Select::parse(&hash).is_err());
        // Unknown functions, wherever they stand.
        for text in [
            "nosuch(@)",
            "a[?eval(b)]",
            "sort_by(@, &nosuch(a))",
            "{x: f(@)}",
        ] {
            let e = Select::parse(text).unwrap_err();
            assert_eq!(e.stage, Stage::Syntax, "{text}");
            assert!(e.reason.contains("unknown function"), "{text}: {e}");
        }
        for (f, fewest, _) in FUNCTIONS {
            let args = vec!["@"; fewest].join(", ");
            let text = format!("{f}({args})");
            if let Err(e) = Select::parse(&text) {
                assert!(!e.reason.contains("unknown"), "{text}: {e}");
            }
        }
        // The wrong number of arguments is refused when compiled too, before any request.
        for (text, says) in [
            ("length(@, @)", "length() takes 1 argument, not 2"),
            ("sort_by(@)", "sort_by() takes 2 arguments, not 1"),
            ("to_number(`1`, `2`)", "to_number() takes 1 argument, not 2"),
            ("merge()", "merge() takes at least 1 argument, not 0"),
            ("a[?contains(b)]", "contains() takes 2 arguments, not 1"),
        ] {
            let e = Select::parse(text).unwrap_err();
            assert_eq!(e.stage, Stage::Syntax, "{text}");
            assert_eq!(e.reason, says, "{text}");
        }
        assert!(Select::parse("merge(a, b, c)").is_ok());
        assert!(Select::parse("not_null(a, b, c)").is_ok());
        // A small selection of a big body is fine.
        let big = json!({"items": vec![json!({"id": 1}); 10_000]});
        let s = Select::parse("items[:2].id").unwrap();
        assert_eq!(s.apply(big, Room::json(100)).unwrap(), json!([1, 1]));
    }

    #[test]
    fn bombs_inside_the_search_stop_at_the_budget() {
        let ten = format!("[{}]", ["@"; 10].join(","));
        let chain = [ten.as_str(); 6].join("|");
        let body = json!({"a": "x".repeat(1000), "list": [1, 2, 3]});
        let room = Room {
            json_bytes: 1 << 20,
            memory: 64 << 20,
        };
        for text in [
            // Projections over shared multi-selects: 10^9 references made.
            format!("{ten}{}", format!("[*].{ten}").repeat(8)),
            // The text of a structure shared 10^6 times.
            format!("to_string({chain})"),
            format!("{chain} | to_string(@)"),
            // Joins of joins.
            format!(
                "join('', [{}])",
                vec![format!("join('', [{}])", ["a"; 6].join(",")); 6].join(",")
            ),
            // Flattening shared lists.
            format!("{chain}{}", "[]".repeat(6)),
            format!("map(&{ten}, {ten})[][]"),
            format!("{chain} | sort_by(@, &to_string(@))"),
        ] {
            let s = Select::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            match s.apply(body.clone(), room) {
                Err(e) => assert_eq!(e.stage, Stage::Size, "{text}: {e}"),
                Ok(v) => assert!(json_len_of(&v) <= 1 << 20, "{text}"),
            }
        }
        // map, sort_by, max_by and min_by as JMESPath says.
        let people = json!([{"n": "b", "a": 3}, {"n": "a", "a": 1}, {"n": "c", "a": 2}]);
        let run = |t: &str| {
            Select::parse(t)
                .unwrap()
                .apply(people.clone(), room)
                .unwrap()
        };
        assert_eq!(run("map(&n, @)"), json!(["b", "a", "c"]));
        assert_eq!(run("sort_by(@, &a)[].n"), json!(["a", "c", "b"]));
        assert_eq!(run("max_by(@, &a).n"), json!("b"));
        assert_eq!(run("min_by(@, &n).n"), json!("a"));
        assert!(
            Select::parse("sort_by(@, &[a])")
                .unwrap()
                .apply(people, room)
                .is_err()
        );
    }

    fn json_len_of(v: &Value) -> usize {
        serde_json::to_vec(v).map(|t| t.len()).unwrap_or(0)
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
            (Some(expected), _) => {
                match compiled.map(|s| s.apply(given.clone(), Room::json(1 << 24))) {
                    Ok(Ok(got)) if same(&got, expected) => Outcome::Pass,
                    Ok(Ok(got)) => Outcome::Fail(format!("got {got}, expected {expected}")),
                    Ok(Err(e)) | Err(e) => Outcome::Fail(format!("{e}, expected {expected}")),
                }
            }
            (None, Some(kind)) => {
                let failed = match (kind.as_str(), compiled) {
                    (Some("syntax"), Err(e)) if e.stage == Stage::Syntax => true,
                    (Some("syntax"), _) => false,
                    // An unknown function is refused when compiled, before any request.
                    (Some("unknown-function"), Err(e)) => e.reason.contains("unknown function"),
                    // So is a wrong number of arguments.
                    (Some("invalid-arity"), Err(e)) => e.reason.contains("argument"),
                    (_, Ok(s)) => s.apply(given.clone(), Room::json(1 << 24)).is_err(),
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
                    let _ = s.apply(given.clone(), Room::json(1 << 24));
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
