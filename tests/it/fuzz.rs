//! Replays the inputs the fuzz targets (`fuzz/`, `scripts/fuzz.sh`) found crashing, with the
//! property each one broke, so the fixes stay fixed in plain `cargo test`. One directory per
//! target under `tests/data/fuzz/` (only targets that found something have one), holding JSON
//! cases: the structured fuzz inputs written out readably, what was called and what must hold.

use std::path::{Path, PathBuf};

use apigate::monitor::{OperationRef, sanitize_args};
use apigate::spec::match_template;
use serde_json::{Value, json};

fn cases(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fuzz")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no cases in {}", dir.display());
    files
}

fn json_case(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `sanitize_args` cases: `{tool, args, operation?, secrets}`; no secret may appear in the
/// sanitized arguments, which stay flat and bounded.
#[test]
fn sanitize_args_regressions() {
    for path in cases("sanitize_args") {
        let case = json_case(&path);
        let tool = case["tool"].as_str().unwrap();
        let op = case.get("operation").map(|o| {
            (
                o["operationId"].as_str().unwrap().to_string(),
                o["method"].as_str().unwrap().to_string(),
                o["path"].as_str().unwrap().to_string(),
            )
        });
        let op_ref = op.as_ref().map(|(id, method, path)| OperationRef {
            operation_id: id,
            method,
            path,
        });
        let out = sanitize_args(tool, &case["args"], op_ref.as_ref());
        let text = out.to_string();
        for secret in case["secrets"].as_array().unwrap() {
            let secret = secret.as_str().unwrap();
            assert!(
                !text.contains(secret),
                "{}: {secret} leaked: {text}",
                path.display()
            );
        }
        for (k, v) in out.as_object().unwrap() {
            assert!(
                v.is_string() || v.is_boolean(),
                "{}: {k} is {v}",
                path.display()
            );
        }
    }
}

/// `match_template` cases: `{template, concrete, values}` (`values` null when it must not
/// match).
#[test]
fn path_match_regressions() {
    for path in cases("path_match") {
        let case = json_case(&path);
        let got = match_template(
            case["template"].as_str().unwrap(),
            case["concrete"].as_str().unwrap(),
        )
        .map(|(_, values)| json!(values));
        let want = Some(case["values"].clone()).filter(|v| !v.is_null());
        assert_eq!(got, want, "{}", path.display());
    }
}
