//! Semantic ranking: by default with the static model built into the binary (hybrid from the
//! first answer, also from a copied binary with no checkout beside it), and with a sentence
//! encoder given by `--embedding-model`: the domain-adapted model the repository ships
//! (`models/minilm-api`, which the static model is distilled from) and, where it is present,
//! the base all-MiniLM-L6-v2: vectors against an independent numpy implementation
//! (`tests/data/embed/reference.py`), the server's switch from lexical to hybrid and its vector
//! cache, `apigate index build` and `--index`, and a broken model folder.
//!
//! Only [`vectors_match_the_reference_implementation`] needs the base model
//! (`scripts/fetch-model.sh` puts it in /var/tmp/apigate-model, or set APIGATE_TEST_MODEL):
//! with APIGATE_TEST_MODEL set it fails without it; otherwise it says how to get it and checks
//! nothing more.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use apigate::index::{Embedder, Index, Query};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::{Proc, Server, call_ok, engine_args, spec_path};

/// The model the repository ships, which the tests rank with.
pub fn model_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/minilm-api")
}

/// The base all-MiniLM-L6-v2, when present: APIGATE_TEST_MODEL (which must then hold it), else
/// /var/tmp/apigate-model if it is there.
fn base_model_dir() -> Option<PathBuf> {
    const HOW: &str = "run `scripts/fetch-model.sh /var/tmp/apigate-model` (needs python3 and pip), or set APIGATE_TEST_MODEL to a folder holding all-MiniLM-L6-v2";
    match std::env::var_os("APIGATE_TEST_MODEL") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            assert!(
                dir.join("model.safetensors").is_file(),
                "APIGATE_TEST_MODEL={}: no embedding model there: {HOW}",
                dir.display()
            );
            Some(dir)
        }
        None => {
            let dir = PathBuf::from("/var/tmp/apigate-model");
            if dir.join("model.safetensors").is_file() {
                return Some(dir);
            }
            eprintln!(
                "note: the base model is not in {}, so its reference vectors were not checked: {HOW}",
                dir.display()
            );
            None
        }
    }
}

fn embedder() -> Embedder {
    Embedder::load(&model_dir()).expect("the model loads")
}

/// One model's vectors by the independent numpy implementation (`tests/data/embed/reference.py`):
/// `reference.json` for all-MiniLM-L6-v2, `reference-api.json` for `models/minilm-api`.
fn reference(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/embed")
        .join(file);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// The base model, as the numpy implementation computes it (when the base model is present).
#[test]
fn vectors_match_the_reference_implementation() {
    let Some(dir) = base_model_dir() else {
        return;
    };
    let base = Embedder::load(&dir).expect("the base model loads");
    assert_matches_reference(&base, &reference("reference.json"));
    assert_ne!(
        base.hash(),
        embedder().hash(),
        "a vector cache keeps the base and shipped models apart"
    );
}

/// The shipped model is read from fp16 weights (as f32): its vectors must match the numpy
/// implementation run on the same file, and differ from the base model's.
#[test]
fn the_shipped_api_model_matches_its_reference_vectors() {
    let tuned = embedder();
    assert_matches_reference(&tuned, &reference("reference-api.json"));
    assert_eq!(tuned.name(), "minilm-api");
    let base = &reference("reference.json")["sentences"][0];
    let got = tuned
        .embed_batch(&[base["text"].as_str().unwrap()])
        .unwrap();
    assert!(
        max_diff(&got[0], &floats(&base["embedding"])) > 0.01,
        "the weights are not the base model's"
    );
}

#[test]
fn the_shipped_api_model_is_what_its_checksums_say() {
    let dir = model_dir();
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    let mut names = Vec::new();
    for line in sums.lines() {
        let (want, name) = line.split_once("  ").expect("sha256sum's format");
        let data = std::fs::read(dir.join(name)).unwrap();
        assert_eq!(hex::encode(Sha256::digest(&data)), want, "{name}");
        names.push(name);
    }
    names.sort_unstable();
    assert_eq!(
        names,
        ["config.json", "model.safetensors", "tokenizer.json"]
    );
}

fn assert_matches_reference(embedder: &Embedder, reference: &Value) {
    assert_eq!(embedder.dim(), 384);
    let sentences = reference["sentences"].as_array().unwrap();
    let texts: Vec<&str> = sentences
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    // One batch, padded to its longest sentence: padding must not change any vector.
    let batch = embedder.embed_batch(&texts).unwrap();
    for (i, s) in sentences.iter().enumerate() {
        let want = floats(&s["embedding"]);
        let alone = embedder.embed_batch(&[texts[i]]).unwrap().remove(0);
        assert!(
            max_diff(&alone, &want) < 1e-4,
            "{:?}: {:?} vs {:?}",
            texts[i],
            &alone[..4],
            &want[..4]
        );
        assert!(
            max_diff(&batch[i], &alone) < 1e-5,
            "batch vs alone: {:?}",
            texts[i]
        );
        let norm: f32 = alone.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
    }
    let cosine = reference["cosine"].as_array().unwrap();
    for (i, row) in cosine.iter().enumerate() {
        for (j, want) in floats(row).iter().enumerate() {
            let got: f32 = batch[i].iter().zip(&batch[j]).map(|(a, b)| a * b).sum();
            assert!(
                (got - want).abs() < 1e-4,
                "cosine[{i}][{j}] {got} vs {want}"
            );
        }
    }
}

#[test]
fn query_vectors_are_cached_and_case_blind() {
    let embedder = embedder();
    let a = embedder.embed_query("List pull requests").unwrap();
    let b = embedder.embed_query("  list PULL requests ").unwrap();
    assert!(
        Arc::ptr_eq(&a, &b),
        "the second lookup is served from the cache"
    );
    assert_eq!(a.len(), 384);
}

#[test]
fn a_broken_model_folder_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let e = Embedder::load(dir.path()).unwrap_err().to_string();
    assert!(e.contains("model.safetensors is missing"), "{e}");
    assert!(e.contains("scripts/fetch-model.sh"), "{e}");
    let model = model_dir();
    for f in ["tokenizer.json", "config.json"] {
        std::fs::copy(model.join(f), dir.path().join(f)).unwrap();
    }
    std::fs::write(dir.path().join("model.safetensors"), b"not weights").unwrap();
    let e = Embedder::load(dir.path()).unwrap_err().to_string();
    assert!(e.starts_with("embedding model:"), "{e}");
    std::fs::copy(
        model.join("model.safetensors"),
        dir.path().join("model.safetensors"),
    )
    .unwrap();
    std::fs::write(dir.path().join("config.json"), b"{}").unwrap();
    let e = Embedder::load(dir.path()).unwrap_err().to_string();
    assert!(e.contains("config.json is not a BERT config"), "{e}");
}

/// A query that shares no word with the operation it means: lexically it finds nothing.
const SPEC: &str = "spotify.json";
const QUERY: &str = "mute";
const EXPECTED: &str = "PUT /me/player/volume";

async fn health(server: &Server) -> Value {
    crate::support::get_json(server.url("/health")).await
}

async fn wait_for_hybrid(server: &Server) {
    for _ in 0..600 {
        if health(server).await["ranker"] == "hybrid" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("the server did not switch to hybrid ranking within 300 s");
}

/// Hybrid with the encoder `models/minilm-api`, with vectors cached in `cache`.
fn ranking_args(cache: &Path, index: Option<&Path>) -> apigate::cli::index::RankingArgs {
    apigate::cli::index::RankingArgs {
        embedding_model: Some(model_dir()),
        cache_dir: Some(cache.to_path_buf()),
        index: index.map(Path::to_path_buf),
        ..Default::default()
    }
}

async fn discovered(server: &Server, query: &str) -> Vec<String> {
    let client = server.client().await;
    discovered_by(&client, query).await
}

/// The top five `api_discover` hits for `query`, as `METHOD /path`.
async fn discovered_by(client: &rmcp::Peer<rmcp::RoleClient>, query: &str) -> Vec<String> {
    let out = call_ok(client, "api_discover", json!({"query": query, "limit": 5})).await;
    out["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r["method"].as_str().unwrap(),
                r["path"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_turns_hybrid_in_the_background_and_reuses_its_cache() {
    // Lexically, the operation is not in the top 5.
    let spec = apigate::spec::Spec::load(&spec_path(SPEC)).await.unwrap();
    let lexical = Index::build(&[&spec]).unwrap();
    let top: Vec<String> = lexical
        .search(&Query::text(QUERY, 5))
        .iter()
        .map(|h| spec.operations[h.op].key())
        .collect();
    assert!(
        !top.contains(&EXPECTED.to_string()),
        "lexical already finds it: {top:?}"
    );

    let cache = tempfile::tempdir().unwrap();
    let mut args = engine_args(&spec_path(SPEC), None);
    args.ranking = ranking_args(cache.path(), None);
    let server = Server::start(args, true).await;
    // Answers at once, lexically or hybrid, while the vectors are computed.
    assert_eq!(health(&server).await["status"], "ok");
    discovered(&server, QUERY).await;
    wait_for_hybrid(&server).await;
    let files: Vec<_> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].ends_with(".vectors"));
    let hits = discovered(&server, QUERY).await;
    assert!(hits.contains(&EXPECTED.to_string()), "hybrid: {hits:?}");
    drop(server);

    // A restart with the same cache is hybrid from the start.
    let mut args = engine_args(&spec_path(SPEC), None);
    args.ranking = ranking_args(cache.path(), None);
    let server = Server::start(args, true).await;
    assert_eq!(health(&server).await["ranker"], "hybrid");
    assert_eq!(discovered(&server, QUERY).await, hits);
    drop(server);

    // A damaged cache file is not used: the server recomputes and rewrites it.
    let file = cache.path().join(&files[0]);
    std::fs::write(&file, b"APGVEC01 cut short").unwrap();
    let mut args = engine_args(&spec_path(SPEC), None);
    args.ranking = ranking_args(cache.path(), None);
    let server = Server::start(args, true).await;
    wait_for_hybrid(&server).await;
    assert_eq!(discovered(&server, QUERY).await, hits);
    assert!(std::fs::metadata(&file).unwrap().len() > 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_build_output_is_loaded_by_dev_and_a_bad_model_stops_start_up() {
    let out = tempfile::tempdir().unwrap();
    let spec = spec_path(SPEC);
    // Without --embedding-model, `index build` says the built-in model needs none.
    let refused = tokio::process::Command::new(env!("CARGO_BIN_EXE_apigate"))
        .args(["index", "build", "--spec", &spec, "--out"])
        .arg(out.path())
        .env_remove("APIGATE_EMBEDDING_MODEL")
        .output()
        .await
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("needs no prebuilt vectors"), "{stderr}");
    let encoder = model_dir();
    let status = tokio::process::Command::new(env!("CARGO_BIN_EXE_apigate"))
        .args([
            "index",
            "build",
            "--spec",
            &spec,
            "--embedding-model",
            path(&encoder),
            "--out",
        ])
        .arg(out.path())
        .env("NO_COLOR", "1")
        .env_remove("APIGATE_EMBEDDING_MODEL")
        .env_remove("APIGATE_RANKER")
        .output()
        .await
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(stdout.contains("operations embedded"), "{stdout}");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(out.path().join("manifest.json")).unwrap()).unwrap();
    let vectors = manifest["vectors"].as_str().unwrap();
    assert!(out.path().join(vectors).is_file());
    assert_eq!(manifest["dim"], 384);
    assert_eq!(manifest["modelName"], "minilm-api");

    // `dev --index` with an empty cache: hybrid from the first request, nothing recomputed.
    let cache = tempfile::tempdir().unwrap();
    let (mut dev, health) = start_dev(
        &spec,
        &[
            "--index",
            path(out.path()),
            "--embedding-model",
            path(&encoder),
            "--cache-dir",
            path(cache.path()),
        ],
    )
    .await;
    assert_eq!(health["ranker"], "hybrid", "{}", dev.stderr());
    assert_eq!(health["model"]["name"], "minilm-api");
    assert_eq!(health["model"]["hash"], manifest["model"]);
    let log = dev.stderr();
    assert!(log.contains("ranker: hybrid (operation vectors loaded from disk)"));
    assert!(log.contains("(ranker: hybrid, model minilm-api ("), "{log}");
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0);
    dev.terminate().await;

    // Opting out: lexical, no model, said once at start-up.
    for opt_out in [&["--ranker", "lexical"][..], &["--no-embedding-model"]] {
        let (mut dev, health) = start_dev(&spec, opt_out).await;
        assert_eq!(health["ranker"], "lexical");
        assert_eq!(health["model"], Value::Null);
        let log = dev.stderr();
        assert_eq!(log.matches("ranker: lexical").count(), 2, "{log}");
        assert!(log.contains("(ranker: lexical)"), "the banner: {log}");
        assert!(!log.contains("embedding model loaded"), "{log}");
        dev.terminate().await;
    }

    // Prebuilt vectors with the built-in model: refused, saying which model they need.
    let stderr = dev_refused(&spec, &["--index", path(out.path())]).await;
    assert!(
        stderr.contains("give the same --embedding-model"),
        "{stderr}"
    );

    // Prebuilt vectors with the lexical ranker: refused.
    let stderr = dev_refused(&spec, &["--ranker", "lexical", "--index", path(out.path())]).await;
    assert!(
        stderr.contains("--index holds vectors for hybrid ranking"),
        "{stderr}"
    );

    // A model folder that is not one: start-up fails and says what to do.
    let bad = tempfile::tempdir().unwrap();
    let stderr = dev_refused(&spec, &["--embedding-model", path(bad.path())]).await;
    assert!(stderr.contains("model.safetensors is missing"), "{stderr}");
    assert!(stderr.contains("scripts/fetch-model.sh"), "{stderr}");
}

/// What a new user runs, `apigate dev --spec SPEC` with no flag and no environment, from a copy of the binary in an empty folder (as `cargo install`, a package or
/// the Docker image leave it: no checkout, no `share/`): hybrid from the first answer with the
/// built-in model, named with its hash in `/health` and the start-up line, and nothing written
/// to the vector cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copied_binary_with_no_flag_ranks_hybrid_from_its_first_answer() {
    let home = tempfile::tempdir().unwrap();
    let bin_dir = tempfile::tempdir().unwrap();
    let bin = bin_dir.path().join("apigate");
    std::fs::copy(env!("CARGO_BIN_EXE_apigate"), &bin).unwrap();
    let spec = bin_dir.path().join(SPEC);
    std::fs::copy(spec_path(SPEC), &spec).unwrap();
    let mut dev = tokio::process::Command::new(&bin)
        .args(DEV)
        .arg(&spec)
        .current_dir(bin_dir.path())
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", "/usr/bin:/bin")
        .env("NO_COLOR", "1")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = tokio::io::BufReader::new(dev.stderr.take().unwrap());
    let mut banner = String::new();
    while !banner.contains("apigate dev:") {
        use tokio::io::AsyncBufReadExt as _;
        let mut line = String::new();
        let n = stderr.read_line(&mut line).await.unwrap();
        assert!(n > 0, "apigate exited: {banner}");
        banner.push_str(&line);
    }
    let url = banner
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no URL in {banner}"))
        .trim_end_matches(['.', ','])
        .to_string();
    let base = url.trim_end_matches("/mcp");
    let health = crate::support::get_json(format!("{base}/health")).await;
    assert_eq!(health["ranker"], "hybrid", "{health}\n{banner}");
    assert_eq!(health["model"]["name"], "static-api", "{health}");
    let hash = health["model"]["hash"].as_str().unwrap();
    assert_eq!(hash.len(), 24, "{hash}");
    assert!(
        banner.contains(&format!("(ranker: hybrid, model static-api ({hash}))")),
        "{banner}"
    );
    // The first answer is ranked by meaning too: "mute" shares no word with the volume call.
    let client = crate::support::mcp_client(&url, &[("x-api-key", crate::support::KEY)]).await;
    let hits = discovered_by(&client, QUERY).await;
    assert!(hits.iter().any(|h| h == EXPECTED), "{hits:?}");
    let _ = dev.kill().await;
    assert!(
        !home.path().join(".cache/apigate").exists(),
        "the built-in model caches nothing"
    );
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

const DEV: [&str; 6] = [
    "dev",
    "--listen",
    "127.0.0.1:0",
    "--api-key",
    crate::support::KEY,
    "--spec",
];

/// `apigate dev --spec SPEC EXTRA…`, started; with its `/health` answer.
async fn start_dev(spec: &str, extra: &[&str]) -> (Proc, Value) {
    let args: Vec<&str> = DEV
        .iter()
        .copied()
        .chain([spec])
        .chain(extra.iter().copied())
        .collect();
    // The CLI's defaults, not the test support's lexical ones.
    let (dev, url) =
        Proc::spawn_with_env("dev", &args, &[("APIGATE_RANKER", "")], "apigate dev:").await;
    let base = url.trim_end_matches("/mcp").trim_end_matches('/');
    let health = crate::support::get_json(format!("{base}/health")).await;
    (dev, health)
}

/// `apigate dev --spec SPEC EXTRA…`, which must fail at start-up; its stderr.
async fn dev_refused(spec: &str, extra: &[&str]) -> String {
    let failed = tokio::process::Command::new(env!("CARGO_BIN_EXE_apigate"))
        .args(DEV)
        .arg(spec)
        .args(extra)
        .env("NO_COLOR", "1")
        .env_remove("APIGATE_EMBEDDING_MODEL")
        .env_remove("APIGATE_INDEX")
        .env_remove("APIGATE_RANKER")
        .output()
        .await
        .unwrap();
    assert!(!failed.status.success(), "apigate dev {extra:?} started");
    String::from_utf8_lossy(&failed.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_the_vectors_of_unchanged_operations() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spotify.json");
    std::fs::copy(spec_path(SPEC), &spec).unwrap();
    let cache = dir.path().join("cache");
    let args: Vec<&str> = DEV
        .iter()
        .copied()
        .chain([
            spec.to_str().unwrap(),
            "--cache-dir",
            cache.to_str().unwrap(),
        ])
        .collect();
    let (mut dev, url) =
        Proc::spawn_with_env("dev", &args, &[("APIGATE_RANKER", "")], "apigate dev:").await;
    let base = url.trim_end_matches("/mcp").to_string();
    let ranker =
        || async { crate::support::get_json(format!("{base}/health")).await["ranker"].clone() };
    for _ in 0..600 {
        if ranker().await == "hybrid" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(ranker().await, "hybrid", "{}", dev.stderr());

    // One operation more; the others' texts are as they were.
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&spec).unwrap()).unwrap();
    doc["paths"]["/me/player/silence"] = json!({"put": {
        "operationId": "silence-playback",
        "summary": "Silence the user's playback",
        "responses": {"204": {"description": "silenced"}}
    }});
    std::fs::write(&spec, serde_json::to_vec(&doc).unwrap()).unwrap();
    let reloaded = reqwest::Client::new()
        .post(format!("{base}/admin/v1/reload"))
        .header("x-api-key", crate::support::KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(reloaded.status(), 200);
    // Hybrid as soon as the new version serves: its vectors were ready before the swap.
    assert_eq!(ranker().await, "hybrid");
    let log = dev.stderr();
    assert!(
        log.contains("ranker: hybrid (the previous version's vectors reused)")
            && log.contains("embedded=1"),
        "{log}"
    );
    assert!(dev.terminate().await, "{}", dev.stderr());
}

/// Hostile model folders given with `--embedding-model` (an operator's typo or a planted
/// folder) are refused before they cost anything: a table that is not one before its tokenizer
/// is parsed, an oversized tokenizer before it is read, a table that is a device, not a file.
#[test]
fn a_hostile_model_folder_is_refused_before_it_is_read() {
    let load = |dir: &Path| Embedder::load(dir).unwrap_err().to_string();
    // A bad table beside a 20 MB tokenizer: the table's header is checked first.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("static.bin"), vec![0u8; 4096]).unwrap();
    let big = std::fs::File::create(dir.path().join("tokenizer.json")).unwrap();
    big.set_len(20 << 20).unwrap();
    let e = load(dir.path());
    assert!(e.contains("wrong magic"), "{e}");
    assert_eq!(e.matches("wrong magic").count(), 1, "said once: {e}");
    // A real table beside that tokenizer: refused by size, unread.
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("models/static-api/static.bin"),
        dir.path().join("static.bin"),
    )
    .unwrap();
    let e = load(dir.path());
    assert!(e.contains("tokenizer.json is over 16777216 bytes"), "{e}");
    // A table that is a device: named as such, not "model.safetensors is missing".
    let dev = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/dev/zero", dev.path().join("static.bin")).unwrap();
    let e = load(dev.path());
    assert!(e.contains("static.bin is not a regular file"), "{e}");
}

/// The peak RSS of `apigate ARGS` (VmHWM, read every 10 ms until it exits), in MiB.
async fn peak_mib(args: &[&str]) -> u64 {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_apigate"))
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("APIGATE_RANKER")
        .env_remove("APIGATE_EMBEDDING_MODEL")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id().unwrap());
    let mut peak = 0;
    loop {
        if let Ok(text) = std::fs::read_to_string(&status)
            && let Some(kib) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak = peak.max(kib);
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    peak / 1024
}

/// The red team's spec: one operation whose summary is 4 million CJK characters (12 MB, under
/// the 32 MiB spec cap). Embedding it at start-up cost ~115 bytes of memory per character
/// (1.3 GiB for 10 million) until a text was cut to 8 KiB before it is tokenised; now hybrid
/// costs about what words alone cost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_with_megabytes_of_text_costs_the_embedding_no_memory() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("huge.json");
    let summary = "漢".repeat(4_000_000);
    let doc = json!({
        "openapi": "3.0.3",
        "info": {"title": "huge", "version": "1"},
        "servers": [{"url": "https://api.example.com"}],
        "paths": {"/things": {"get": {"operationId": "listThings", "summary": summary,
            "responses": {"200": {"description": "ok"}}}}}
    });
    std::fs::write(&spec, serde_json::to_vec(&doc).unwrap()).unwrap();
    let spec = path(&spec);
    let lexical = peak_mib(&["search", "--spec", spec, "--ranker", "lexical", "things"]).await;
    let hybrid = peak_mib(&["search", "--spec", spec, "things"]).await;
    assert!(
        hybrid < lexical + 150,
        "hybrid peaked at {hybrid} MiB, words alone at {lexical} MiB"
    );
}
