//! A fast local stand-in for the petstore API, the upstream of `scripts/load.sh` and
//! `scripts/soak.sh` when they measure `api_execute`: fixed JSON answers of about 1 KB for the
//! petstore's read operations under the spec's `/v2` base path, and for GitHub's `issues/get`,
//! so the upstream is never the bottleneck.
//! `cargo run --release --example load_upstream -- [--listen 127.0.0.1:0]`; prints
//! `load_upstream listening on http://ADDR` once it accepts connections. Loopback only.

use std::net::SocketAddr;

use axum::Router;
use axum::extract::Path;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;

/// `GET /v2/pet/{petId}`: a pet of about 1 KB with the requested id.
async fn pet(Path(id): Path<String>) -> impl IntoResponse {
    let id = id.parse::<i64>().unwrap_or(0);
    let body = format!(
        r#"{{"id":{id},"category":{{"id":1,"name":"Dogs"}},"name":"doggie-{id}","photoUrls":["https://images.example.com/pets/{id}/front.jpg","https://images.example.com/pets/{id}/side.jpg","https://images.example.com/pets/{id}/back.jpg"],"tags":[{{"id":1,"name":"friendly"}},{{"id":2,"name":"vaccinated"}},{{"id":3,"name":"house-trained"}},{{"id":4,"name":"good-with-children"}}],"status":"available","description":"A calm, friendly dog that enjoys long walks, fetch in the park and quiet evenings. Vaccinated and microchipped; neutered; house-trained; walks well on a leash. Gets along with children, other dogs and cats. Needs a home with a garden and daily exercise; no apartments. Adoption fee includes the first veterinary check-up, a bag of food, a collar and a leash.","birthDate":"2021-04-17","weightKg":23.5,"location":{{"store":"Downtown","shelf":"B-12"}},"createdAt":"2025-01-09T10:11:12Z","updatedAt":"2025-06-30T08:00:00Z"}}"#
    );
    ([(CONTENT_TYPE, "application/json")], body)
}

/// `GET /v2/store/inventory`: a small fixed map of status → count.
async fn inventory() -> impl IntoResponse {
    (
        [(CONTENT_TYPE, "application/json")],
        r#"{"available":412,"pending":17,"sold":1290}"#,
    )
}

/// `GET /v2/store/order/{orderId}`: a fixed order with the requested id.
async fn order(Path(id): Path<String>) -> impl IntoResponse {
    let id = id.parse::<i64>().unwrap_or(0);
    let body = format!(
        r#"{{"id":{id},"petId":42,"quantity":1,"shipDate":"2025-07-01T12:00:00Z","status":"placed","complete":false}}"#
    );
    ([(CONTENT_TYPE, "application/json")], body)
}

/// `GET /repos/{owner}/{repo}/issues/{issue_number}` (GitHub `issues/get`): an issue of
/// about 1 KB.
async fn issue(Path((owner, repo, number)): Path<(String, String, u64)>) -> impl IntoResponse {
    let body = format!(
        r#"{{"id":{id},"number":{number},"state":"open","title":"Crash when the spec has a recursive schema","user":{{"login":"octocat","id":1,"type":"User"}},"labels":[{{"id":208045946,"name":"bug","color":"f29513"}},{{"id":208045947,"name":"good first issue","color":"7057ff"}}],"assignees":[],"comments":3,"locked":false,"created_at":"2025-04-14T16:00:49Z","updated_at":"2025-04-15T09:12:03Z","closed_at":null,"author_association":"CONTRIBUTOR","url":"https://api.github.com/repos/{owner}/{repo}/issues/{number}","html_url":"https://github.com/{owner}/{repo}/issues/{number}","body":"Loading a spec whose schema refers to itself through an array of items makes the server loop at start-up. Steps: save the attached document, run the check command on it, and watch the CPU. Expected: the recursive reference is shown once and the load finishes."}}"#,
        id = 1_000_000 + number
    );
    ([(CONTENT_TYPE, "application/json")], body)
}

fn listen_addr() -> anyhow::Result<SocketAddr> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = match args.iter().position(|a| a == "--listen") {
        Some(i) => args
            .get(i + 1)
            .ok_or_else(|| anyhow::anyhow!("--listen needs an address such as 127.0.0.1:0"))?
            .clone(),
        None => "127.0.0.1:0".to_string(),
    };
    let addr: SocketAddr = value
        .parse()
        .map_err(|e| anyhow::anyhow!("--listen {value:?} is not an address: {e}"))?;
    anyhow::ensure!(
        addr.ip().is_loopback(),
        "--listen {addr}: load_upstream serves loopback only"
    );
    Ok(addr)
}

// One thread: fixed answers need little CPU, and the load runs share two cores with wrk and
// apigate, so a second worker would only add contention.
#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let app = Router::new()
        .route("/v2/pet/{petId}", get(pet))
        .route("/v2/store/inventory", get(inventory))
        .route("/v2/store/order/{orderId}", get(order))
        .route("/repos/{owner}/{repo}/issues/{issue_number}", get(issue));
    let listener = tokio::net::TcpListener::bind(listen_addr()?).await?;
    println!(
        "load_upstream listening on http://{}",
        listener.local_addr()?
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
