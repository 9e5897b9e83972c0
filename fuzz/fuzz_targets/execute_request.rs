//! `api_execute` against a fixed spec (tests/data/fuzz/request-spec.json: path parameters in
//! the simple, label and matrix styles, every query style, headers, JSON, form, multipart and
//! text bodies, an operation-level server), through the server's own path:
//! `Engine::plan_execute` types the arguments, resolves the operation (by id, or by a concrete
//! path), validates them and builds the request without sending it, under three configurations
//! (the spec's servers, `--upstream` with no path, `--upstream` with user info and a path; the
//! credential goes in `Authorization`, or in `X-Api-Key` next to user info).
//!
//! Properties beyond "no panic", from `upstream`'s docs: the URL stays on the configured
//! origin without user info (that is sent as an `Authorization: Basic` header), under the
//! server's base path, with exactly the template's segments and literal text (values cannot
//! add segments, a query or a fragment, or be dot segments); a parameter alone in its segment round-trips through `match_template`; agent
//! headers never include credentials or connection headers; the dry-run view never holds the
//! configured credential or the `--upstream` password; validated query keys are declared names.

#![no_main]

use std::sync::{Arc, LazyLock};

use apigate::auth::Principal;
use apigate::index::Index;
use apigate::spec::{ParamIn, Spec, match_template};
use apigate::tools::Engine;
use apigate::upstream::{Upstream, UpstreamConfig};
use apigate_fuzz::{string, value};
use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

const SPEC: &[u8] = include_bytes!("../../tests/data/fuzz/request-spec.json");
const CREDENTIAL: &str = "Bearer CRED-SECRET-4711";
const UPSTREAM_PASSWORD: &str = "s3cretpw";

static SPEC_LOADED: LazyLock<Arc<Spec>> = LazyLock::new(|| {
    Arc::new(Spec::from_bytes(SPEC, "request-spec.json").expect("the fuzz fixture spec loads"))
});

/// (engine, expected origin override, expected base path override)
static UPSTREAMS: LazyLock<Vec<(Engine, Option<&'static str>, Option<&'static str>)>> =
    LazyLock::new(|| {
        let spec = SPEC_LOADED.clone();
        let index = Arc::new(Index::build(&[&*spec]).expect("the fixture indexes"));
        let build = |base: Option<&str>| {
            // User info is sent as `Authorization`: the credential goes elsewhere then.
            let name = match base {
                Some(b) if b.contains('@') => "X-Api-Key",
                _ => "Authorization",
            };
            let header = format!("{name}: {CREDENTIAL}");
            let cfg = UpstreamConfig::from_flags(base, &[header], None)
                .expect("valid fuzz upstream config");
            let upstream = Upstream::new(cfg).expect("upstream client builds");
            Engine::new(spec.clone(), index.clone(), upstream, None)
        };
        let with_user = format!("http://user:{UPSTREAM_PASSWORD}@localhost:9/base/");
        vec![
            (build(None), None, None),
            (
                build(Some("http://127.0.0.1:8080")),
                Some("http://127.0.0.1:8080"),
                None,
            ),
            (
                build(Some(&with_user)),
                Some("http://localhost:9"),
                Some("/base"),
            ),
        ]
    });

/// Header names an agent may never get onto the wire (credentials, connection headers).
const NEVER_FROM_AGENT: [&str; 8] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "host",
    "connection",
    "transfer-encoding",
    "content-length",
];

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

struct Case {
    op: usize,
    upstream: usize,
    args: Map<String, Value>,
    /// A concrete path to name the operation by, instead of its id.
    concrete: Option<String>,
}

fn case(u: &mut Unstructured<'_>) -> Result<Case> {
    let spec = &*SPEC_LOADED;
    let op_index = u.choose_index(spec.operations.len())?;
    let op = &spec.operations[op_index];
    let upstream = u.choose_index(UPSTREAMS.len())?;
    let mut args = Map::new();
    for (section, location) in [
        ("pathParams", ParamIn::Path),
        ("query", ParamIn::Query),
        ("headers", ParamIn::Header),
    ] {
        if !u.arbitrary::<bool>()? {
            continue;
        }
        let mut m = Map::new();
        for p in op.parameters.iter().filter(|p| p.location == location) {
            if u.ratio(3, 4)? {
                let name = if location == ParamIn::Header && u.arbitrary()? {
                    p.name.to_ascii_uppercase()
                } else {
                    p.name.clone()
                };
                m.insert(name, value(u, 2)?);
            }
        }
        if u.ratio(1, 8)? {
            let extra = if location == ParamIn::Header && u.arbitrary()? {
                (*u.choose(&NEVER_FROM_AGENT)?).to_string()
            } else {
                string(u)?
            };
            m.insert(extra, value(u, 1)?);
        }
        args.insert(section.into(), Value::Object(m));
    }
    if u.arbitrary()? {
        args.insert("body".into(), value(u, 3)?);
    }
    let concrete = if u.ratio(1, 4)? {
        let mut path = String::new();
        let mut rest = op.path.as_str();
        while let Some(start) = rest.find('{') {
            let Some(len) = rest[start..].find('}') else {
                break;
            };
            path.push_str(&rest[..start]);
            path.push_str(&string(u)?);
            rest = &rest[start + len + 1..];
        }
        path.push_str(rest);
        Some(path)
    } else {
        None
    };
    Ok(Case {
        op: op_index,
        upstream,
        args,
        concrete,
    })
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(Case {
        op,
        upstream,
        mut args,
        concrete,
    }) = case(&mut u)
    else {
        return;
    };
    let spec = &**SPEC_LOADED;
    let mut op = &spec.operations[op];
    match &concrete {
        Some(path) => {
            args.insert("method".into(), Value::String(op.method.to_string()));
            args.insert("path".into(), Value::String(path.clone()));
        }
        None => {
            args.insert("operationId".into(), Value::String(op.id.clone()));
        }
    }
    let forbidden_given = args
        .get("headers")
        .and_then(Value::as_object)
        .is_some_and(|h| {
            h.keys()
                .any(|h| NEVER_FROM_AGENT.contains(&h.to_ascii_lowercase().as_str()))
        });
    let (engine, origin_override, base_override) = &UPSTREAMS[upstream];
    let result = engine.plan_execute(&Principal::dev(), args);
    if forbidden_given {
        assert!(
            result.is_err(),
            "a forbidden header from the agent was accepted"
        );
    }
    let Ok(planned) = result else {
        return;
    };
    // A concrete path may match a more literal template than the one it was made from.
    op = &spec.operations[planned.op];
    let call = &planned.call;
    let request = &planned.request;

    // The origin and base path.
    let declared = op
        .servers
        .first()
        .or(spec.servers.first())
        .expect("the fixture declares servers");
    let server = url::Url::parse(declared).expect("fixture servers are absolute");
    let url = request.url();
    let expected_origin = match origin_override {
        Some(o) => url::Url::parse(o).expect("valid override").origin(),
        None => server.origin(),
    };
    assert_eq!(url.origin(), expected_origin, "host escape: {url}");
    assert!(
        url.username().is_empty() && url.password().is_none(),
        "user info in {url}"
    );
    assert!(url.fragment().is_none(), "fragment in {url}");
    let base = base_override
        .map(str::to_string)
        .unwrap_or_else(|| server.path().trim_end_matches('/').to_string());
    let path = url.path();
    let rest = path
        .strip_prefix(&base)
        .unwrap_or_else(|| panic!("{path} is not under the base path {base}"));
    assert_eq!(
        rest.split('/').count(),
        op.path.split('/').count(),
        "the values changed the number of segments: {path} for {}",
        op.path
    );
    for seg in rest.split('/') {
        let lower = seg.to_ascii_lowercase();
        assert!(
            !matches!(
                lower.as_str(),
                "." | ".." | "%2e" | "%2e%2e" | ".%2e" | "%2e."
            ),
            "dot segment in {path}"
        );
    }
    let (_, captured) = match_template(&op.path, rest)
        .unwrap_or_else(|| panic!("{rest} does not match its own template {}", op.path));
    for seg in op.path.split('/') {
        let Some(name) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) else {
            continue;
        };
        if name.contains(['{', '}']) {
            continue;
        }
        let simple = op
            .parameters
            .iter()
            .any(|p| p.location == ParamIn::Path && p.name == name && p.style == "simple");
        let Some(given) = call.path_params.get(name).and_then(scalar) else {
            continue;
        };
        if !simple {
            continue;
        }
        let got = captured.iter().find(|(n, _)| n == name).map(|(_, v)| v);
        assert_eq!(
            got,
            Some(&given),
            "path value {name} did not round-trip in {path}"
        );
    }

    // Query keys come from declared parameters (the arguments were valid).
    for (key, _) in url.query_pairs() {
        let base_name = key.split('[').next().unwrap_or_default();
        assert!(
            op.parameters
                .iter()
                .any(|p| p.location == ParamIn::Query && p.name == base_name),
            "undeclared query key {key:?} in {url}"
        );
    }

    // The dry-run view: no credential, no password, no agent-set forbidden header.
    let view = request.view();
    let text = view.to_string();
    assert!(
        !text.contains("CRED-SECRET-4711"),
        "credential in the dry run: {text}"
    );
    assert!(
        !text.contains(UPSTREAM_PASSWORD),
        "password in the dry run: {text}"
    );
    if let Some(headers) = view.get("headers").and_then(Value::as_object) {
        for (name, v) in headers {
            if NEVER_FROM_AGENT.contains(&name.as_str()) {
                assert_eq!(v, "[redacted]", "header {name} in the dry run: {text}");
            }
        }
    }
    if op.request_body.is_none() {
        assert!(view.get("body").is_none(), "a body for {}", op.key());
    }
});
