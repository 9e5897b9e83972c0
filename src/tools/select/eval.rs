//! `select`'s interpreter: the AST the `jmespath` crate parsed, evaluated within a budget of
//! steps and of the bytes the values it creates take. JMESPath shares what an expression
//! repeats, so a few bytes of expression can build a structure of 10^10 references
//! (`[@,@,…][*].[@,@,…][*].…`) or a string of terabytes (`to_string` of such a structure,
//! `join` of joins): every array, object and string it creates is counted before (or, for the
//! functions whose output is bounded by what they are given, right after) it is made, and the
//! first one over the budget stops the search. The crate's own functions are called for all
//! but the four that evaluate an expression themselves (`map`, `sort_by`, `max_by`,
//! `min_by`), which are evaluated here, within the same budget. Pure: no I/O.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use jmespath::ast::Ast;
use jmespath::{Context, JmespathError, Rcvar, Variable};

/// The most nodes one search evaluates (a node over each item of a list is one per item).
pub(super) const MAX_STEPS: usize = 20_000_000;

/// What a new value costs beside its elements: the shared box holding it.
const BOX_BYTES: usize = 96;

/// What an element of a new array costs: its reference, and the box of a value made for it.
const ELEMENT_BYTES: usize = 96;

/// Why a search stopped.
pub(super) enum Stop {
    /// A function failed (the crate's own error).
    Failed(Box<JmespathError>),
    /// An error of one of the functions evaluated here.
    Invalid { offset: usize, reason: String },
    /// The values it creates would take more than the memory it may.
    Bytes(usize),
    /// It would evaluate more than [`MAX_STEPS`] nodes.
    Steps,
}

/// One search's budget.
pub(super) struct Eval<'a> {
    expression: &'a str,
    steps: usize,
    bytes: usize,
    limit: usize,
}

impl<'a> Eval<'a> {
    /// A search of `expression` whose new values may take `bytes` bytes.
    pub(super) fn new(expression: &'a str, bytes: usize) -> Eval<'a> {
        Eval {
            expression,
            steps: 0,
            bytes,
            limit: bytes,
        }
    }

    /// The bytes the new values took, of what they were given.
    pub(super) fn used(&self) -> usize {
        self.limit - self.bytes
    }

    fn take(&mut self, bytes: usize) -> Result<(), Stop> {
        self.bytes = self
            .bytes
            .checked_sub(bytes)
            .ok_or(Stop::Bytes(self.limit))?;
        Ok(())
    }

    fn array(&mut self, items: Vec<Rcvar>) -> Result<Rcvar, Stop> {
        self.take(BOX_BYTES + ELEMENT_BYTES * items.len())?;
        Ok(Rcvar::new(Variable::Array(items)))
    }

    fn null() -> Rcvar {
        Rcvar::new(Variable::Null)
    }

    /// `node` on `data`.
    pub(super) fn eval(&mut self, data: &Rcvar, node: &Ast) -> Result<Rcvar, Stop> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(Stop::Steps);
        }
        match node {
            Ast::Field { name, .. } => Ok(data.get_field(name)),
            Ast::Subexpr { lhs, rhs, .. } => {
                let left = self.eval(data, lhs)?;
                self.eval(&left, rhs)
            }
            Ast::Identity { .. } => Ok(data.clone()),
            Ast::Literal { value, .. } => Ok(value.clone()),
            Ast::Index { idx, .. } => Ok(if *idx >= 0 {
                data.get_index(*idx as usize)
            } else {
                data.get_negative_index(idx.unsigned_abs() as usize)
            }),
            Ast::Or { lhs, rhs, .. } => {
                let left = self.eval(data, lhs)?;
                if left.is_truthy() {
                    Ok(left)
                } else {
                    self.eval(data, rhs)
                }
            }
            Ast::And { lhs, rhs, .. } => {
                let left = self.eval(data, lhs)?;
                if left.is_truthy() {
                    self.eval(data, rhs)
                } else {
                    Ok(left)
                }
            }
            Ast::Not { node, .. } => {
                let v = self.eval(data, node)?;
                Ok(Rcvar::new(Variable::Bool(!v.is_truthy())))
            }
            Ast::Condition {
                predicate, then, ..
            } => {
                if self.eval(data, predicate)?.is_truthy() {
                    self.eval(data, then)
                } else {
                    Ok(Eval::null())
                }
            }
            Ast::Comparison {
                comparator,
                lhs,
                rhs,
                ..
            } => {
                let left = self.eval(data, lhs)?;
                let right = self.eval(data, rhs)?;
                Ok(left
                    .compare(comparator, &right)
                    .map_or_else(Eval::null, |b| Rcvar::new(Variable::Bool(b))))
            }
            Ast::ObjectValues { node, .. } => {
                let subject = self.eval(data, node)?;
                match subject.as_object() {
                    Some(m) => self.array(m.values().cloned().collect()),
                    None => Ok(Eval::null()),
                }
            }
            Ast::Projection { lhs, rhs, .. } => {
                let left = self.eval(data, lhs)?;
                let Some(items) = left.as_array() else {
                    return Ok(Eval::null());
                };
                let mut out = Vec::new();
                for item in items {
                    let v = self.eval(item, rhs)?;
                    if !v.is_null() {
                        self.take(ELEMENT_BYTES)?;
                        out.push(v);
                    }
                }
                self.take(BOX_BYTES)?;
                Ok(Rcvar::new(Variable::Array(out)))
            }
            Ast::Flatten { node, .. } => {
                let v = self.eval(data, node)?;
                let Some(items) = v.as_array() else {
                    return Ok(Eval::null());
                };
                let len = items
                    .iter()
                    .map(|i| i.as_array().map_or(1, Vec::len))
                    .fold(0usize, usize::saturating_add);
                self.take(BOX_BYTES.saturating_add(ELEMENT_BYTES.saturating_mul(len)))?;
                let mut out = Vec::with_capacity(len);
                for item in items {
                    match item.as_array() {
                        Some(inner) => out.extend(inner.iter().cloned()),
                        None => out.push(item.clone()),
                    }
                }
                Ok(Rcvar::new(Variable::Array(out)))
            }
            Ast::MultiList { elements, .. } => {
                if data.is_null() {
                    return Ok(Eval::null());
                }
                self.take(BOX_BYTES + ELEMENT_BYTES * elements.len())?;
                let mut out = Vec::with_capacity(elements.len());
                for e in elements {
                    out.push(self.eval(data, e)?);
                }
                Ok(Rcvar::new(Variable::Array(out)))
            }
            Ast::MultiHash { elements, .. } => {
                if data.is_null() {
                    return Ok(Eval::null());
                }
                let keys: usize = elements.iter().map(|kv| kv.key.len()).sum();
                self.take(BOX_BYTES + (ELEMENT_BYTES + 24) * elements.len() + keys)?;
                let mut out = BTreeMap::new();
                for kv in elements {
                    let v = self.eval(data, &kv.value)?;
                    out.insert(kv.key.clone(), v);
                }
                Ok(Rcvar::new(Variable::Object(out)))
            }
            Ast::Function { name, args, offset } => self.function(data, name, args, *offset),
            Ast::Expref { ast, .. } => {
                self.take(BOX_BYTES)?;
                Ok(Rcvar::new(Variable::Expref(ast.as_ref().clone())))
            }
            Ast::Slice {
                start,
                stop,
                step,
                offset,
            } => {
                if *step == 0 {
                    return Err(Stop::Invalid {
                        offset: *offset,
                        reason: "a slice's step may not be 0".into(),
                    });
                }
                match data.as_array() {
                    Some(a) => {
                        self.take(BOX_BYTES + ELEMENT_BYTES * a.len())?;
                        let sliced = data.slice(*start, *stop, *step).unwrap_or_default();
                        Ok(Rcvar::new(Variable::Array(sliced)))
                    }
                    None => Ok(Eval::null()),
                }
            }
        }
    }

    fn function(
        &mut self,
        data: &Rcvar,
        name: &str,
        args: &[Ast],
        offset: usize,
    ) -> Result<Rcvar, Stop> {
        let invalid = |reason: String| Stop::Invalid { offset, reason };
        // The four that evaluate an expression: here, within the budget.
        if let ("map" | "sort_by" | "max_by" | "min_by", [first, second]) = (name, args) {
            let (list, expr) = match (name, first, second) {
                ("map", Ast::Expref { ast, .. }, list) => (list, ast),
                (_, list, Ast::Expref { ast, .. }) if name != "map" => (list, ast),
                _ => {
                    return Err(invalid(format!(
                        "{name}() takes {}",
                        if name == "map" {
                            "an expression (&…) and an array"
                        } else {
                            "an array and an expression (&…)"
                        }
                    )));
                }
            };
            let list = self.eval(data, list)?;
            let Some(items) = list.as_array() else {
                return Err(invalid(format!("{name}() takes an array")));
            };
            return self.by_expression(name, items, expr, offset);
        }
        let mut values = Vec::with_capacity(args.len());
        for a in args {
            values.push(self.eval(data, a)?);
        }
        // What the result will take, when it may be far more than what it is made from.
        match (name, values.as_slice()) {
            ("to_string", [v]) if v.as_string().is_none() => {
                let mut walked = 0usize;
                let len = json_len(v, self.bytes, &mut walked).ok_or(Stop::Bytes(self.limit))?;
                self.steps = self.steps.saturating_add(walked);
                if self.steps > MAX_STEPS {
                    return Err(Stop::Steps);
                }
                self.take(BOX_BYTES + len)?;
            }
            ("join", [glue, list]) => {
                if let (Some(glue), Some(items)) = (glue.as_string(), list.as_array()) {
                    let len = items
                        .iter()
                        .map(|i| {
                            i.as_string()
                                .map_or(0, String::len)
                                .saturating_add(glue.len())
                        })
                        .fold(0usize, usize::saturating_add);
                    self.take(BOX_BYTES.saturating_add(len))?;
                }
            }
            _ => {}
        }
        let runtime: &jmespath::Runtime = &jmespath::DEFAULT_RUNTIME;
        let Some(f) = runtime.get_function(name) else {
            return Err(invalid(format!("unknown function {name}()")));
        };
        let mut ctx = Context::new(self.expression, runtime);
        ctx.offset = offset;
        let out = f
            .evaluate(&values, &mut ctx)
            .map_err(|e| Stop::Failed(Box::new(e)))?;
        // The others make at most what they were given: counted once made.
        if !matches!(name, "to_string" | "join") {
            let made = match &*out {
                Variable::Array(a) => BOX_BYTES + ELEMENT_BYTES * a.len(),
                Variable::Object(m) => {
                    BOX_BYTES
                        + m.keys()
                            .map(|k| ELEMENT_BYTES + 24 + k.len())
                            .sum::<usize>()
                }
                Variable::String(s) => BOX_BYTES + s.len(),
                _ => 0,
            };
            self.take(made)?;
        }
        Ok(out)
    }

    /// `map`, `sort_by`, `max_by`, `min_by` of `items` by `expr`, as the crate's functions
    /// compute them.
    fn by_expression(
        &mut self,
        name: &str,
        items: &[Rcvar],
        expr: &Ast,
        offset: usize,
    ) -> Result<Rcvar, Stop> {
        if name == "map" {
            self.take(BOX_BYTES + ELEMENT_BYTES * items.len())?;
            let mut out = Vec::with_capacity(items.len());
            for i in items {
                out.push(self.eval(i, expr)?);
            }
            return Ok(Rcvar::new(Variable::Array(out)));
        }
        if items.is_empty() {
            return match name {
                "sort_by" => self.array(Vec::new()),
                _ => Ok(Eval::null()),
            };
        }
        self.take(ELEMENT_BYTES * 2 * items.len())?;
        let mut keyed = Vec::with_capacity(items.len());
        let mut kind = None;
        for i in items {
            let key = self.eval(i, expr)?;
            let this = match &*key {
                Variable::Number(_) => "number",
                Variable::String(_) => "string",
                _ => "other",
            };
            if this == "other" || kind.is_some_and(|k| k != this) {
                return Err(Stop::Invalid {
                    offset,
                    reason: format!(
                        "{name}()'s expression must give all numbers or all strings, and gave \
                         a {}",
                        key.get_type()
                    ),
                });
            }
            kind = Some(this);
            keyed.push((i.clone(), key));
        }
        Ok(match name {
            "sort_by" => {
                keyed.sort_by(|a, b| a.1.cmp(&b.1));
                self.array(keyed.into_iter().map(|(i, _)| i).collect())?
            }
            _ => {
                let better = if name == "max_by" {
                    Ordering::Greater
                } else {
                    Ordering::Less
                };
                let mut best = 0;
                for (n, (_, key)) in keyed.iter().enumerate().skip(1) {
                    if key.cmp(&keyed[best].1) == better {
                        best = n;
                    }
                }
                keyed.swap_remove(best).0
            }
        })
    }
}

/// The bytes of `v` as compact JSON text (strings counted escaped at their longest), or
/// `None` past `most`; `walked` counts the values visited.
fn json_len(v: &Variable, most: usize, walked: &mut usize) -> Option<usize> {
    let mut total = 0usize;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        *walked += 1;
        total = total.checked_add(match v {
            Variable::Null | Variable::Expref(_) => 4,
            Variable::Bool(_) => 5,
            Variable::Number(_) => 24,
            Variable::String(s) => 2 + 6 * s.len(),
            Variable::Array(a) => {
                stack.extend(a.iter().map(|i| &**i));
                2 + a.len()
            }
            Variable::Object(m) => {
                stack.extend(m.values().map(|i| &**i));
                2 + m.keys().map(|k| 4 + 6 * k.len()).sum::<usize>()
            }
        })?;
        if total > most {
            return None;
        }
    }
    Some(total)
}
