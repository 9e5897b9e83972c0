//! Operation ids: the document's `operationId` when it is unique, else one synthesized from
//! method and path; and the parameter names of a path template.

use std::collections::{HashMap, HashSet};

use super::method::Method;
use super::operation::Operation;

/// The `{names}` in a path template, in order.
pub(crate) fn template_names(path: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = path;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let name = &rest[start + 1..start + len];
        if !name.is_empty() && !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
        rest = &rest[start + len + 1..];
    }
    names
}

/// Gives every operation a unique, stable id: the document's `operationId` when present and
/// unique, otherwise one synthesized from method and path.
pub(super) fn assign_ids(ops: &mut [Operation], warnings: &mut Vec<String>) {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for op in ops.iter() {
        if !op.id.is_empty() {
            *counts.entry(op.id.clone()).or_default() += 1;
        }
    }
    let mut taken: HashSet<String> = ops
        .iter()
        .filter(|o| counts.get(&o.id) == Some(&1))
        .map(|o| o.id.clone())
        .collect();
    let mut missing = 0;
    for op in ops.iter_mut() {
        if !op.id.is_empty() && counts.get(&op.id) == Some(&1) {
            continue;
        }
        let base = if op.id.is_empty() {
            missing += 1;
            synthesize_id(op.method, &op.path)
        } else {
            warnings.push(format!(
                "operationId {:?} is used more than once; made unique",
                op.id
            ));
            op.id.clone()
        };
        let mut id = base.clone();
        let mut n = 1;
        while !taken.insert(id.clone()) {
            n += 1;
            id = format!("{base}_{n}");
        }
        op.id = id;
    }
    if missing > 0 {
        warnings.push(format!(
            "{missing} operations have no operationId; ids were synthesized from method and path"
        ));
    }
}

/// `GET /api/contents/{path}` → `get_api_contents_by_path`.
pub(crate) fn synthesize_id(method: Method, path: &str) -> String {
    let mut out = method.path_item_key().to_string();
    for seg in path.split('/').filter(|s| !s.is_empty()) {
        out.push('_');
        let seg = match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name) => format!("by_{name}"),
            None => seg.to_string(),
        };
        let mut last_underscore = true;
        for c in seg.chars() {
            if c.is_ascii_alphanumeric() {
                out.push(c.to_ascii_lowercase());
                last_underscore = false;
            } else if !last_underscore {
                out.push('_');
                last_underscore = true;
            }
        }
        while out.ends_with('_') {
            out.pop();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthesized_ids_are_readable() {
        assert_eq!(
            synthesize_id(Method::Get, "/api/contents/{path}"),
            "get_api_contents_by_path"
        );
        assert_eq!(
            synthesize_id(Method::Delete, "/api/sessions/{session}"),
            "delete_api_sessions_by_session"
        );
        assert_eq!(synthesize_id(Method::Get, "/"), "get");
    }

    #[test]
    fn template_names_are_found() {
        assert_eq!(
            template_names("/compare/{base}...{head}"),
            vec!["base", "head"]
        );
    }
}
