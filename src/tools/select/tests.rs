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
    let charges = json!({"data": [{"id": "ch_1", "amount": 500}, {"id": "ch_2", "amount": 5000}]});
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
        "(", "[", "{a: ", "!", "[?", ".a", "|a", "||a", "&&a", " == a", "[0]", "[]", "[*]", ".*",
        " < a",
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
