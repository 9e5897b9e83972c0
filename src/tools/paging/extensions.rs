//! Pagination a spec declares on the operation, used before the conventions' table:
//! `x-ms-pageable` (Azure: `nextLinkName`, `itemName`), `x-speakeasy-pagination` (`cursor`,
//! `offsetLimit`, `url`) and `x-fern-pagination` (`cursor`/`next_cursor`, `offset`/`step`).
//! An extension this server cannot read (a cursor in the request body, a JSONPath beyond
//! `$.a.b`) is reported by [`declared`] and the table is used instead.

use serde_json::Value;

use super::conventions::Shows;
use super::next::{Next, Seen, declares};

/// What an operation's pagination extension says, owned.
#[derive(Debug, Clone)]
pub(crate) struct Declared {
    /// The extension's name.
    pub name: &'static str,
    kind: Kind,
    at: Vec<String>,
    param: String,
    flag: Option<String>,
    /// The pointer of the item list, when the extension names it.
    pub results: Option<String>,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// One page only (`x-ms-pageable` with `nextLinkName: null`).
    Single,
    NextUrl,
    Token,
    Offset,
    Increment,
}

impl Declared {
    /// What the response says of the next page by the extension; a response without the
    /// marker the extension names has no next page.
    pub(super) fn read(&self, seen: &Seen) -> Next {
        let at: Vec<&str> = self.at.iter().map(String::as_str).collect();
        let param = [self.param.as_str()];
        let shows = match self.kind {
            Kind::Single => return Next::End,
            Kind::Offset => return offset_by_items(seen, &self.param, self.flag.as_deref()),
            Kind::NextUrl => Shows::NextUrl(&at),
            Kind::Token => Shows::Token {
                at: &at,
                param: &param,
            },
            Kind::Increment => Shows::Increment {
                param: &self.param,
                flag: self.flag.as_deref(),
            },
        };
        shows.read(seen).unwrap_or(Next::End)
    }
}

/// An offset counted up by the items returned while pages hold items (and `flag`, if any, is
/// true): the extensions name no total.
fn offset_by_items(seen: &Seen, param: &str, flag: Option<&str>) -> Next {
    let more = match flag {
        Some(f) => seen
            .body
            .pointer(f)
            .and_then(Value::as_bool)
            .unwrap_or(false),
        None => true,
    };
    let returned = seen.items().map_or(0, |a| a.len() as u64);
    if !more || returned == 0 || !declares(seen.op, param) {
        return Next::End;
    }
    let offset = seen
        .sent
        .get(param)
        .and_then(super::conventions::as_u64)
        .unwrap_or(0);
    let Some(next) = offset.checked_add(returned) else {
        return Next::End;
    };
    let mut q = seen.sent.clone();
    q.insert(param.into(), Value::from(next));
    Next::Query(q)
}

/// The operation's pagination extension, if it has one this server can read; `Err` says why
/// one it has cannot be used.
pub(crate) fn declared(op: &crate::spec::Operation) -> Option<Result<Declared, String>> {
    let ext = &op.extensions;
    if let Some(v) = ext.get("x-ms-pageable") {
        return Some(ms_pageable(v));
    }
    if let Some(v) = ext.get("x-speakeasy-pagination") {
        return Some(speakeasy(v));
    }
    if let Some(v) = ext.get("x-fern-pagination") {
        return Some(fern(v));
    }
    None
}

fn ms_pageable(v: &Value) -> Result<Declared, String> {
    let item = v.get("itemName").and_then(Value::as_str).unwrap_or("value");
    let mut d = Declared {
        name: "x-ms-pageable",
        kind: Kind::Single,
        at: Vec::new(),
        param: String::new(),
        flag: None,
        results: Some(pointer_of(&[item])),
    };
    // `nextLinkName: null` (or absent) means a single page.
    if let Some(next) = v.get("nextLinkName").and_then(Value::as_str) {
        d.kind = Kind::NextUrl;
        d.at = vec![pointer_of(&[next])];
    }
    Ok(d)
}

fn speakeasy(v: &Value) -> Result<Declared, String> {
    let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
    let outputs = v.get("outputs");
    let output = |k: &str| outputs.and_then(|o| o.get(k)).and_then(Value::as_str);
    let input = |t: &str| -> Result<Option<String>, String> {
        let Some(inputs) = v.get("inputs").and_then(Value::as_array) else {
            return Ok(None);
        };
        for i in inputs {
            if i.get("type").and_then(Value::as_str) == Some(t) {
                let name = i.get("name").and_then(Value::as_str).unwrap_or("");
                return match i.get("in").and_then(Value::as_str) {
                    Some("parameters") => Ok(Some(name.to_string())),
                    other => Err(format!(
                        "its `{t}` input is in {} (only query parameters are followed)",
                        other.unwrap_or("no place")
                    )),
                };
            }
        }
        Ok(None)
    };
    let results = output("results").map(json_path).transpose()?;
    let base = |kind, at: Vec<String>, param: String| Declared {
        name: "x-speakeasy-pagination",
        kind,
        at,
        param,
        flag: None,
        results: results.clone(),
    };
    match kind {
        "cursor" => {
            let param = input("cursor")?.ok_or("it names no `cursor` input")?;
            let at = json_path(output("nextCursor").ok_or("it names no `nextCursor` output")?)?;
            Ok(base(Kind::Token, vec![at], param))
        }
        "offsetLimit" => {
            if let Some(param) = input("offset")? {
                return Ok(base(Kind::Offset, Vec::new(), param));
            }
            let param = input("page")?.ok_or("it names no `offset` or `page` input")?;
            Ok(base(Kind::Increment, Vec::new(), param))
        }
        "url" => {
            let at = json_path(output("nextUrl").ok_or("it names no `nextUrl` output")?)?;
            Ok(base(Kind::NextUrl, vec![at], String::new()))
        }
        other => Err(format!("its type {other:?} is not one this server knows")),
    }
}

fn fern(v: &Value) -> Result<Declared, String> {
    let get = |k: &str| v.get(k).and_then(Value::as_str);
    let request = |k: &str| -> Result<Option<String>, String> {
        let Some(path) = get(k) else { return Ok(None) };
        match path.strip_prefix("$request.") {
            Some(name) if !name.contains('.') => Ok(Some(name.to_string())),
            _ => Err(format!(
                "its `{k}` ({path}) is not a top-level request parameter"
            )),
        }
    };
    let results = get("results").map(json_path).transpose()?;
    let flag = get("has-next-page").map(json_path).transpose()?;
    let base = |kind, at: Vec<String>, param: String| Declared {
        name: "x-fern-pagination",
        kind,
        at,
        param,
        flag: flag.clone(),
        results: results.clone(),
    };
    if let Some(param) = request("cursor")? {
        let at = json_path(get("next_cursor").ok_or("it names no `next_cursor`")?)?;
        return Ok(base(Kind::Token, vec![at], param));
    }
    if let Some(param) = request("offset")? {
        // Without `step` the offset is a page index counted up by one.
        let kind = if get("step").is_some() {
            Kind::Offset
        } else {
            Kind::Increment
        };
        return Ok(base(kind, Vec::new(), param));
    }
    Err("it names neither `cursor` nor `offset`".into())
}

/// A JSON pointer from a JSONPath of plain names (`$.data`, `$response.next.cursor`).
fn json_path(path: &str) -> Result<String, String> {
    let rest = path
        .strip_prefix("$response")
        .or_else(|| path.strip_prefix('$'))
        .ok_or_else(|| format!("{path:?} is not a JSONPath"))?;
    let names: Vec<&str> = rest.split('.').filter(|s| !s.is_empty()).collect();
    if names
        .iter()
        .any(|n| n.contains(['[', ']', '*', '?', '(', '@']))
    {
        return Err(format!(
            "{path:?} is more than a path of names (`$.a.b`), which is all this server follows"
        ));
    }
    Ok(pointer_of(&names))
}

fn pointer_of(names: &[&str]) -> String {
    let mut pointer = String::new();
    for n in names {
        crate::spec::push_segment(&mut pointer, n);
    }
    pointer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths() {
        assert_eq!(json_path("$.data").as_deref(), Ok("/data"));
        assert_eq!(
            json_path("$response.next.starting_after").as_deref(),
            Ok("/next/starting_after")
        );
        assert!(json_path("$.data[*].id").is_err());
        assert!(json_path("data").is_err());
    }
}
