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
mod tests;
