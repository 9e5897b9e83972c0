//! Spec loading from arbitrary bytes: `Spec::from_bytes` as JSON or YAML (the first byte's
//! low bit picks the file name `fuzz.json` or `fuzz.yaml`, which decides the parser for
//! input starting with `{`), then everything `api_schema` and `api_execute` do with a loaded
//! document: `describe` and its `detail` parts, `args_schema`, validation (which compiles the argument schema) and
//! `find`. Hangs and memory blow-ups are caught by libFuzzer's `-timeout` and
//! `-rss_limit_mb` (see scripts/fuzz.sh).
//!
//! Properties beyond "no panic": operation ids are unique (`index_of` finds each operation
//! at its own position), and `find` with an operation's own template returns that template.

#![no_main]

use apigate::spec::Spec;
use libfuzzer_sys::fuzz_target;
use serde_json::json;

/// Operations exercised per input: enough to reach every code path, few enough to stay fast.
const MAX_OPS: usize = 8;

fuzz_target!(|data: &[u8]| {
    let Some((&first, doc)) = data.split_first() else {
        return;
    };
    let name = if first & 1 == 0 {
        "fuzz.json"
    } else {
        "fuzz.yaml"
    };
    let Ok(spec) = Spec::from_bytes(doc, name) else {
        return;
    };
    for (i, op) in spec.operations.iter().enumerate() {
        assert_eq!(
            spec.index_of(&op.id),
            Some(i),
            "operation id {:?} is not unique",
            op.id
        );
    }
    for op in spec.operations.iter().take(MAX_OPS) {
        let (found, values) = spec
            .find(op.method, &op.path)
            .expect("find must return an operation for its own template");
        assert_eq!(found.path, op.path);
        assert!(values.is_empty());
        let _ = spec.describe(op, apigate::spec::Detail::Compact);
        let _ = spec.describe(op, apigate::spec::Detail::Full);
        // `api_schema`'s `detail` parts: every parameter, the body and each success body's
        // fields, one level down (a list's items' fields named as the list's).
        for p in &op.parameters {
            let _ = spec.describe_part(op, &p.name);
        }
        let _ = spec.describe_part(op, "requestBody");
        let _ = spec.describe_part(op, "responses");
        for r in &op.responses {
            for path in [
                format!("responses.{}", r.status),
                format!("responses.{}.items.id", r.status),
                format!("responses.{}.data.id", r.status),
            ] {
                let _ = spec.describe_part(op, &path);
            }
        }
        let _ = spec.args_schema(op);
        let mut empty = json!({});
        let _ = spec.validate(op, &mut empty);
        let mut typed = json!({"pathParams": {"id": "1"}, "query": {"limit": "10"}, "body": {"a": [1, "x", null]}});
        let _ = spec.validate(op, &mut typed);
    }
});
