//! The red team's fifth break (issue 41's class "fair shares of shared budgets"): in
//! production, a user session's `initialize`s spent only its key's bucket, which every session
//! of that key shares. Alice opened 150 MCP sessions with her `x-session-token` and Bob's next
//! tool call on the same agent key was `RATE_LIMITED`. Now an `initialize` carrying a valid
//! session token takes from that session's bucket and its key's together, or from neither.
//!
//! Performed for real: `apigate serve` in-process on a real Postgres, raw `initialize`
//! requests over HTTP, and Bob's real MCP client.

use apigate::auth::{AuthConfig, PermissionRules, RateLimit};
use serde_json::json;

use crate::db::TestDb;
use crate::production::{Options, Prod};
use crate::signin::initialize;
use crate::support::{Upstream, call, engine_args, spec_path};

#[tokio::test]
async fn one_sessions_initializes_do_not_drain_its_keys_bucket() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let args = engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url()));
    let cfg = AuthConfig {
        // Buckets that do not refill during the test: what is spent stays spent.
        session_rate: RateLimit {
            per_second: 0.001,
            burst: 5,
        },
        key_rate: RateLimit {
            per_second: 0.001,
            burst: 20,
        },
        ..AuthConfig::default()
    };
    let prod = Prod::launch(
        &db.url,
        args,
        PermissionRules::default(),
        cfg,
        Options::petstore().stateless,
    )
    .await;
    let key = prod.agent_key().await;
    let features = ["apigate.*", "pets.*"];
    let alice = prod.session(&features, false).await;
    let bob = prod.session(&features, false).await;

    let url = prod.url("/mcp");
    let mut refused = 0;
    for _ in 0..40 {
        let (status, _, _) =
            initialize(&url, &[("x-api-key", &key), ("x-session-token", &alice)]).await;
        if status == 429 {
            refused += 1;
        }
    }
    assert!(
        refused >= 30,
        "alice's initializes were not limited: {refused} refused"
    );

    let client = prod.client(&key, Some(&bob)).await;
    for n in 0..3 {
        let (err, v) = call(&client, "api_discover", json!({"query": "pet"})).await;
        assert!(
            !err,
            "bob's call {n} was refused after alice's initializes: {v}"
        );
    }
}
