//! How large `api_schema`'s answers are: the compact JSON size of `Spec::describe` for every
//! operation of a spec (median, 90th percentile, largest) and for named operations, by default
//! and with `detail: "full"`.
//! `cargo run --release --example schema_sizes -- SPEC [OPERATION_ID…]`

use apigate::spec::{Detail, Spec};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        anyhow::bail!("usage: schema_sizes SPEC [OPERATION_ID…]");
    };
    let spec = Spec::load(path).await?;
    let size = |op, detail| serde_json::to_string(&spec.describe(op, detail)).map(|s| s.len());
    for (label, detail) in [("default", Detail::Compact), ("detail full", Detail::Full)] {
        let mut sizes = Vec::with_capacity(spec.operations.len());
        for op in &spec.operations {
            sizes.push(size(op, detail)?);
        }
        sizes.sort_unstable();
        let at = |p: f64| sizes[((sizes.len() - 1) as f64 * p).round() as usize];
        println!(
            "{path} ({label}): {} operations; bytes median {}, p90 {}, max {}",
            sizes.len(),
            at(0.5),
            at(0.9),
            at(1.0)
        );
        for id in &args[1..] {
            match spec.get(id) {
                Some(op) => println!("  {id}: {} bytes", size(op, detail)?),
                None => println!("  {id}: no such operation"),
            }
        }
    }
    Ok(())
}
