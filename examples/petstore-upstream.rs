//! A tiny Swagger Petstore to call through apigate without a real API: the operations of
//! `openapi/petstore.json` under its `/v2` base path, pets and orders kept in memory (three
//! pets to start with), answers shaped as the spec says.
//!
//! ```sh
//! cargo run --example petstore-upstream                  # listens on 127.0.0.1:4010
//! apigate dev --spec openapi/petstore.json --upstream http://127.0.0.1:4010
//! ```
//!
//! `--listen ADDR` picks another address (`127.0.0.1:0`: any free port). It prints
//! `petstore-upstream listening on http://ADDR` once it accepts connections. Loopback only
//! unless told otherwise; nothing is stored on disk. The integration tests serve the same
//! [`app`] (tests/it/first_hour.rs).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

/// The address used without `--listen`.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:4010";

/// Pets and orders by id.
#[derive(Default)]
struct Store {
    pets: BTreeMap<i64, Value>,
    orders: BTreeMap<i64, Value>,
}

type Shared = Arc<Mutex<Store>>;

fn lock(store: &Shared) -> std::sync::MutexGuard<'_, Store> {
    store
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn pet(id: i64, name: &str, category: &str, status: &str) -> Value {
    json!({
        "id": id,
        "category": {"id": 1, "name": category},
        "name": name,
        "photoUrls": [format!("https://images.example.com/pets/{id}.jpg")],
        "tags": [{"id": 1, "name": "friendly"}],
        "status": status,
    })
}

/// The Petstore's routes under `/v2`, with three pets.
pub fn app() -> Router {
    let mut store = Store::default();
    for p in [
        pet(1, "doggie", "Dogs", "available"),
        pet(2, "kitty", "Cats", "pending"),
        pet(3, "goldie", "Fish", "sold"),
    ] {
        if let Some(id) = p["id"].as_i64() {
            store.pets.insert(id, p);
        }
    }
    let routes = Router::new()
        .route("/pet", axum::routing::post(save_pet).put(save_pet))
        .route("/pet/findByStatus", get(find_by_status))
        .route("/pet/{petId}", get(get_pet).delete(delete_pet))
        .route("/store/inventory", get(inventory))
        .route("/store/order", axum::routing::post(place_order))
        .route(
            "/store/order/{orderId}",
            get(get_order).delete(delete_order),
        )
        .with_state(Arc::new(Mutex::new(store)));
    Router::new()
        .nest("/v2", routes)
        .fallback(|| async { not_found("no such operation in this example Petstore") })
}

fn not_found(message: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({"code": 404, "type": "error", "message": message})),
    )
        .into_response()
}

fn bad_id() -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"code": 400, "type": "error", "message": "Invalid ID supplied"})),
    )
        .into_response()
}

async fn get_pet(State(store): State<Shared>, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<i64>() else {
        return bad_id();
    };
    match lock(&store).pets.get(&id) {
        Some(p) => Json(p.clone()).into_response(),
        None => not_found("Pet not found"),
    }
}

async fn delete_pet(State(store): State<Shared>, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<i64>() else {
        return bad_id();
    };
    match lock(&store).pets.remove(&id) {
        Some(_) => StatusCode::OK.into_response(),
        None => not_found("Pet not found"),
    }
}

/// `POST /pet` and `PUT /pet`: stores the pet (a new id when it has none).
async fn save_pet(State(store): State<Shared>, Json(mut body): Json<Value>) -> Response {
    let mut store = lock(&store);
    let id = match body.get("id").and_then(Value::as_i64) {
        Some(id) => id,
        None => store.pets.keys().next_back().map_or(1, |last| last + 1),
    };
    let Some(fields) = body.as_object_mut() else {
        return (StatusCode::METHOD_NOT_ALLOWED, "Invalid input").into_response();
    };
    fields.insert("id".into(), id.into());
    store.pets.insert(id, body.clone());
    Json(body).into_response()
}

async fn find_by_status(
    State(store): State<Shared>,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    let wanted: Vec<&str> = query
        .iter()
        .filter(|(k, _)| k == "status")
        .flat_map(|(_, v)| v.split(','))
        .collect();
    let pets: Vec<Value> = lock(&store)
        .pets
        .values()
        .filter(|p| wanted.is_empty() || p["status"].as_str().is_some_and(|s| wanted.contains(&s)))
        .cloned()
        .collect();
    Json(pets).into_response()
}

async fn inventory(State(store): State<Shared>) -> Response {
    let mut counts: BTreeMap<String, i64> = BTreeMap::new();
    for p in lock(&store).pets.values() {
        let status = p["status"].as_str().unwrap_or("unknown").to_string();
        *counts.entry(status).or_default() += 1;
    }
    Json(counts).into_response()
}

async fn place_order(State(store): State<Shared>, Json(mut body): Json<Value>) -> Response {
    let mut store = lock(&store);
    let id = store.orders.keys().next_back().map_or(1, |last| last + 1);
    let Some(fields) = body.as_object_mut() else {
        return (StatusCode::BAD_REQUEST, "Invalid Order").into_response();
    };
    fields.insert("id".into(), id.into());
    fields
        .entry("status")
        .or_insert_with(|| Value::String("placed".into()));
    store.orders.insert(id, body.clone());
    Json(body).into_response()
}

async fn get_order(State(store): State<Shared>, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<i64>() else {
        return bad_id();
    };
    match lock(&store).orders.get(&id) {
        Some(o) => Json(o.clone()).into_response(),
        None => not_found("Order not found"),
    }
}

async fn delete_order(State(store): State<Shared>, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<i64>() else {
        return bad_id();
    };
    match lock(&store).orders.remove(&id) {
        Some(_) => StatusCode::OK.into_response(),
        None => not_found("Order not found"),
    }
}

/// `--listen ADDR`, else [`DEFAULT_LISTEN`].
fn listen_addr() -> anyhow::Result<SocketAddr> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = match args.iter().position(|a| a == "--listen") {
        Some(i) => args
            .get(i + 1)
            .ok_or_else(|| anyhow::anyhow!("--listen needs an address such as 127.0.0.1:4010"))?
            .clone(),
        None => DEFAULT_LISTEN.to_string(),
    };
    value
        .parse()
        .map_err(|e| anyhow::anyhow!("--listen {value:?}: {e}"))
}

#[allow(dead_code)] // the tests include this file for `app` only
#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let addr = listen_addr()?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    let addr = listener.local_addr()?;
    eprintln!("petstore-upstream listening on http://{addr}");
    eprintln!(
        "  apigate dev --spec openapi/petstore.json --upstream http://{addr}   # calls go to http://{addr}/v2"
    );
    axum::serve(listener, app()).await?;
    Ok(())
}
