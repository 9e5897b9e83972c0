//! Replays the inputs the fuzz targets (`fuzz/`, `scripts/fuzz.sh`) found crashing, with the
//! property each one broke, so the fixes stay fixed in plain `cargo test`. One directory per
//! target under `tests/data/fuzz/` (only targets that found something have one), holding JSON
//! cases: the structured fuzz inputs written out readably, what was called and what must hold.

use std::path::{Path, PathBuf};

use apigate::monitor::{OperationRef, sanitize_args};
use apigate::spec::match_template;
use apigate::tools::Tool;
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
        let tool = Tool::parse(case["tool"].as_str().unwrap()).unwrap();
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

/// `shown_body` cases: `{upstream, header, body, contentType, budget, credentials}`, the body
/// read as `read_limited` reads it (its first `budget` bytes); no piece of 6 characters of a
/// credential may appear in the result (its JSON, its decoded strings).
#[test]
fn redact_response_regressions() {
    use apigate::upstream::{UpstreamConfig, shown_body};
    for path in cases("redact_response") {
        let case = json_case(&path);
        let cfg = UpstreamConfig::from_flags(
            case["upstream"].as_str(),
            &[case["header"].as_str().unwrap().to_string()],
            None,
        )
        .unwrap();
        let secrets = cfg.secrets().unwrap();
        let body = case["body"].as_str().unwrap().as_bytes();
        let budget = case["budget"].as_u64().unwrap() as usize;
        let read = &body[..body.len().min(budget)];
        let ct = case["contentType"].as_str().filter(|c| !c.is_empty());
        let shown = shown_body(read, body.len() > budget, ct, budget, &secrets);
        let mut texts = vec![shown.to_string()];
        if let Some(s) = shown.as_str() {
            texts.push(s.to_string());
        }
        for credential in case["credentials"].as_array().unwrap() {
            let credential = credential.as_str().unwrap().as_bytes();
            for piece in credential.windows(6) {
                let piece = String::from_utf8_lossy(piece);
                for text in &texts {
                    assert!(
                        !text.contains(piece.as_ref()),
                        "{}: {piece:?} in {text}",
                        path.display()
                    );
                }
            }
        }
    }
}

/// `paging` cases: `{declared, extensions, sent, headers, body, list}`; a next query names only
/// parameters the operation declares (or that were sent), as the fuzz target's oracle says.
#[test]
fn paging_regressions() {
    use apigate::spec::{Method, Operation, ParamIn, Parameter};
    use apigate::tools::paging::{Next, paging};
    for path in cases("paging") {
        let case = json_case(&path);
        let declared: Vec<String> = case["declared"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        let op = Operation {
            id: "list".into(),
            method: Method::Get,
            path: "/things".into(),
            summary: None,
            description: None,
            tags: Vec::new(),
            deprecated: false,
            parameters: declared
                .iter()
                .map(|n| Parameter {
                    name: n.clone(),
                    location: ParamIn::Query,
                    required: false,
                    description: None,
                    schema: json!({"type": "string"}),
                    style: "form".into(),
                    explode: true,
                    deprecated: false,
                })
                .collect(),
            request_body: None,
            responses: Vec::new(),
            security: None,
            servers: Vec::new(),
            extensions: case["extensions"].as_object().cloned().unwrap_or_default(),
            required_features: Vec::new(),
            response_types: Vec::new(),
        };
        let sent = case["sent"].as_object().cloned().unwrap_or_default();
        let headers = case["headers"].as_object().cloned().unwrap_or_default();
        let url = url::Url::parse("https://api.example/things?page=1").unwrap();
        let p = paging(
            &op,
            &url,
            &sent,
            &headers,
            &case["body"],
            case["list"].as_str(),
        );
        if let Next::Query(q) = &p.next {
            for k in q.keys() {
                assert!(
                    declared.contains(k) || sent.contains_key(k),
                    "{}: {k} is not declared: {q:?}",
                    path.display()
                );
            }
        }
    }
}
