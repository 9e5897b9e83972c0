//! Issue 41, the red team's first break: `resources/read` of a held response had no budget.
//! Each read of a 16 MiB answer holds its bytes, their base64 and the JSON-RPC message
//! carrying it (~25 MB on a debug build); 80 at once took an `apigate dev` under a 3 GB
//! address-space limit to "memory allocation … failed" and the process aborted. Now a read
//! takes its answer's memory from `--max-bytes-in-flight` and holds it until the answer is
//! sent: reads beyond it wait their turn (or are refused after 30 s), the process goes on.
//!
//! Performed for real: `apigate dev` as a child process under that limit, an axum upstream
//! serving a 16 MiB binary file, 80 raw `resources/read` requests at once over stateless HTTP.

use axum::Router;
use axum::extract::Path;
use axum::http::header;
use axum::response::IntoResponse;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

use super::select::peak_kib;
use crate::support::{KEY, mcp_client, spawn_dev, spec_path};

/// The most address space the server child may take (as the red team ran it).
const ADDRESS_SPACE: &str = "3000000000";

/// The binary answer: just under the default `--max-read-bytes`.
const FILE_BYTES: usize = 16 * 1024 * 1024 - 4096;

/// Reads at once.
const READS: usize = 80;

async fn start_upstream() -> String {
    let bytes = bytes::Bytes::from(
        (0..FILE_BYTES)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect::<Vec<u8>>(),
    );
    let app =
        Router::new().route(
            "/v1/files/{name}",
            axum::routing::get(move |Path(_name): Path<String>| {
                let bytes = bytes.clone();
                async move {
                    ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response()
                }
            }),
        );
    let addr = crate::support::serve_app(app).await;
    format!("http://{addr}/v1")
}

/// A raw `resources/read` of `uri` over stateless HTTP, as an attacker sends it (rmcp's own
/// client refuses answers over 16 MiB): the blob's length, or the error's message.
async fn read(url: &str, uri: &str, id: usize) -> Result<usize, String> {
    let response = reqwest::Client::new()
        .post(url)
        .header("x-api-key", KEY)
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": id, "method": "resources/read",
            "params": {"uri": uri}}),
        )
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let answer: serde_json::Value = response.json().await.map_err(|e| e.to_string())?;
    match answer["result"]["contents"][0]["blob"].as_str() {
        Some(blob) => Ok(blob.len()),
        None => Err(answer["error"]["message"].to_string()),
    }
}

#[tokio::test]
async fn many_reads_of_a_big_held_response_wait_their_turn_instead_of_aborting_the_server() {
    let upstream = start_upstream().await;
    let spec = spec_path("downloads.json");
    let (mut dev, url) = spawn_dev(&spec, Some(&upstream), &["--stateless"], &[]).await;
    let pid = dev.child.id().expect("the server runs");
    let limited = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--as={ADDRESS_SPACE}")])
        .status()
        .expect("prlimit runs");
    assert!(limited.success(), "prlimit --pid {pid} failed");

    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;
    let Some(args) = json!({"operationId": "getFile", "pathParams": {"name": "big.bin"}})
        .as_object()
        .cloned()
    else {
        unreachable!()
    };
    let r = client
        .call_tool(CallToolRequestParams::new("api_execute").with_arguments(args))
        .await
        .expect("api_execute");
    let body = r.structured_content.unwrap_or_default();
    let uri = body["body"]["uri"]
        .as_str()
        .unwrap_or_else(|| panic!("a held response: {body}"))
        .to_string();

    let reads = (0..READS).map(|n| read(&url, &uri, n));
    let results = futures::future::join_all(reads).await;
    let (mut whole, mut waited_too_long) = (0, 0);
    for r in &results {
        match r {
            // base64 of FILE_BYTES bytes.
            Ok(len) => {
                assert_eq!(*len, FILE_BYTES.div_ceil(3) * 4);
                whole += 1;
            }
            Err(e) => {
                assert!(e.contains("--max-bytes-in-flight"), "{e}\n{}", dev.log());
                waited_too_long += 1;
            }
        }
    }
    eprintln!(
        "{READS} reads of a {FILE_BYTES}-byte held response at once: {whole} whole, \
         {waited_too_long} refused after waiting; server peak RSS {} KiB",
        peak_kib(pid)
    );
    assert!(dev.is_running(), "the server died:\n{}", dev.log());
    assert!(whole > 0, "no read went through");
    // And it keeps answering.
    let again = read(&url, &uri, READS).await;
    assert_eq!(
        again,
        Ok(FILE_BYTES.div_ceil(3) * 4),
        "a read after the flood"
    );
    assert!(dev.terminate().await, "{}", dev.log());
}
