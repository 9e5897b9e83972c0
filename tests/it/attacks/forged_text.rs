//! Issue 26, item 4: text an agent or an admin client chose reached the audit log and the
//! operator's terminal raw. A tool named `"api_execute\n<fake row>\x1b[2J"` was stored as the
//! tool and printed by `apigate audit` as a forged row with the screen cleared; a very long name
//! made `apigate audit` panic; `userId`/`tenantId` with control characters did the same in
//! `sessions list`. Now a name other than the three is stored as `unknown` with its length,
//! ids with control characters are refused at creation, and every CLI table cell is escaped
//! and cut. Performed against a real `apigate serve` wiring and real Postgres, read back with
//! the real `apigate` binary.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::production::{BOOTSTRAP, Prod};
use crate::support::{call, call_err, run_apigate};

/// A row that looks like one `apigate audit` prints, after a line break, then "clear screen".
const FORGED: &str = "api_execute\n2026-01-01 00:00:00  key:admin0001  alice  acme  api_execute  \
                      DELETE /pets  allowed\x1b[2J";

/// Runs the `apigate` binary with `DATABASE_URL`; returns (success, stdout, stderr).
async fn apigate(args: &[&str], database_url: &str) -> (bool, String, String) {
    run_apigate(args, &[("DATABASE_URL", database_url)]).await
}

/// What a terminal would obey rather than show, or a line that does not start like a row.
fn assert_one_row_per_line(output: &str, rows_start: &str) {
    assert!(
        !output.chars().any(|c| c.is_control() && c != '\n'),
        "control characters reach the terminal:\n{output:?}"
    );
    for line in output.lines().skip(1) {
        assert!(
            line.starts_with(rows_start) || line.starts_with("more: "),
            "a line that is not a row of its own (forged?): {line:?}\n{output}"
        );
    }
}

#[tokio::test]
async fn agent_chosen_tool_names_are_not_stored_or_printed_raw() {
    let (db, _upstream, prod) = Prod::petstore().await;
    let key = prod.agent_key().await;
    let token = prod.session(&["*"], false).await;
    let client = prod.client(&key, Some(&token)).await;

    call_err(&client, FORGED, json!({}), "UNKNOWN_TOOL").await;
    // Long enough to overflow a formatting width (65,535), short enough for the body limit.
    let long = "x".repeat(200_000);
    let (is_error, body) = call(&client, &long, json!({})).await;
    assert!(is_error && body["code"] == "UNKNOWN_TOOL", "{body}");

    // Stored as `unknown`, with the name's length only.
    let (ok, stdout, stderr) = apigate(&["audit", "--json"], &db.url).await;
    assert!(ok, "{stderr}");
    let page: Value = serde_json::from_str(&stdout).unwrap();
    let calls: Vec<&Value> = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["tool"] != "admin")
        .collect();
    assert_eq!(calls.len(), 2, "{stdout}");
    let mut operations: Vec<&str> = calls
        .iter()
        .map(|e| {
            assert_eq!(e["tool"], "unknown", "{e}");
            e["operation"].as_str().unwrap()
        })
        .collect();
    operations.sort();
    let forged_len = FORGED.chars().count();
    assert_eq!(
        operations,
        [
            "unknown tool (200000 chars)".to_string(),
            format!("unknown tool ({forged_len} chars)")
        ]
    );
    assert!(!stdout.contains("2026-01-01 00:00:00"), "{stdout}");

    // The table prints, one row per line, without control characters.
    let (ok, stdout, stderr) = apigate(&["audit"], &db.url).await;
    assert!(ok, "apigate audit failed:\n{stderr}");
    assert_one_row_per_line(&stdout, "20");
    assert!(stdout.contains("unknown tool (200000 chars)"), "{stdout}");
}

#[tokio::test]
async fn ids_with_control_characters_are_refused_and_never_printed_raw() {
    let (db, _upstream, prod) = Prod::petstore().await;
    let http = reqwest::Client::new();
    let forged_row = "\n00000000-0000-0000-0000-000000000000  root  -  -  -  *  no\x1b[2J";

    // Over the admin API (the CLI creates through the same core check).
    for body in [
        json!({"userId": format!("alice{forged_row}")}),
        json!({"userId": "alice", "tenantId": format!("acme{forged_row}")}),
        json!({"userId": "alice", "organizationId": "org\u{202e}gro"}),
        json!({"userId": "alice", "tenantId": "t".repeat(100_000)}),
    ] {
        let resp = http
            .post(prod.url("/admin/v1/sessions"))
            .header("x-api-key", BOOTSTRAP)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let answer: Value = resp.json().await.unwrap();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["code"], "INVALID_ARGUMENTS", "{answer}");
    }
    let resp = http
        .post(prod.url("/admin/v1/keys"))
        .header("x-api-key", BOOTSTRAP)
        .json(&json!({"name": format!("agent{forged_row}")}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let (ok, _, stderr) = apigate(
        &[
            "sessions",
            "create",
            "--user",
            "bob\n\x1b[2J",
            "--features",
            "apigate.discover",
            "--json",
        ],
        &db.url,
    )
    .await;
    assert!(
        !ok,
        "the CLI created a session for a user id with control characters"
    );
    assert!(stderr.contains("control character"), "{stderr}");

    // Rows written before this check existed (or by hand) still print as one escaped row.
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    sqlx::query(
        "INSERT INTO api_keys (id, kind, token_digest, user_id, tenant_id, expires_at) \
         VALUES ($1, 'session', $2, $3, $4, now() + interval '1 hour')",
    )
    .bind(uuid::Uuid::new_v4())
    .bind(vec![7u8; 32])
    .bind(format!("alice{forged_row}"))
    .bind("t".repeat(200_000))
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let (ok, stdout, stderr) = apigate(&["sessions", "list"], &db.url).await;
    assert!(ok, "apigate sessions list failed:\n{stderr}");
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    assert_one_row_per_line(&stdout, "");
    assert!(stdout.contains("alice\\n00000000"), "{stdout}");
    assert!(stdout.contains('…'), "{stdout}");
}
