//! Issue 41, item 9: what anyone may read without a key names no secret, no secret's
//! whereabouts and no internal URL, attacked for real: `apigate dev --config` (the binary)
//! reloading a config file it watches, and `apigate serve` (Postgres) trusting the real
//! `oidc-provider` whose keys or introspection endpoint are down. Before the fix `/health`
//! quoted the broken config line (a `Bearer ghp_…` header included), the environment
//! variable and the absolute secret-file path a reload could not resolve, and a 503 named the
//! introspection and JWKS URLs.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use crate::db::TestDb;
use crate::signin::{initialize, introspection_flags, serve, serve_with};
use crate::support::{KEY, Proc, Upstream, dev_config, free_port, get_json, spec_path};

/// A GitHub-shaped token: what must never show.
const GHP: &str = "ghp_R3aLlYs3cr3tT0k3nV4lu3xYz0123456789";
const UNSET_VAR: &str = "APIGATE_ATTACK_GITHUB_TOKEN_VAR";

/// Writes `text` as the config file in one step (mode 600).
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Writes `text` as the config file and returns the `lastError` `/health` shows once it is no
/// longer `before`. The file is written again every 4 s until then: a write in the moment the
/// server started may come before its watch took the file's first stamp.
async fn broken_reload(base: &str, config: &Path, text: &str, before: Option<&str>) -> String {
    for _ in 0..10 {
        replace(config, text);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(4);
        while tokio::time::Instant::now() < deadline {
            let health = get_json(format!("{base}/health")).await;
            if let Some(error) = health["specs"][0]["lastError"]
                .as_str()
                .filter(|e| Some(*e) != before)
            {
                return error.to_string();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    panic!("/health never showed the failed reload of:\n{text}");
}

#[tokio::test]
async fn a_failed_reload_shows_the_public_no_secret_nor_where_one_is() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let secrets = tempfile::tempdir().unwrap();
    let config = dir.path().join("apigate.toml");
    let api = format!(
        "[[api]]\nname = \"github\"\nspec = {:?}\nupstream = {:?}\n",
        spec_path("petstore-3.0.json"),
        upstream.url()
    );
    replace(&config, &api);
    let (mut proc, url) =
        Proc::spawn_with_env("dev", &dev_config(&config), &[], "apigate dev:").await;
    let base = url.trim_end_matches("/mcp").to_string();

    // A header line with its closing quote missing: TOML quotes the line in its message.
    let broken = format!("{api}upstream-headers = {{ Authorization = \"Bearer {GHP} }}\n");
    let shown = broken_reload(&base, &config, &broken, None).await;
    for piece in [
        GHP,
        &GHP[4..20],
        "Bearer",
        "Authorization",
        "upstream-headers",
    ] {
        assert!(!shown.contains(piece), "/health shows {piece:?}: {shown}");
    }
    assert!(shown.contains("apigate.toml"), "{shown}");
    assert!(shown.contains("line 5"), "{shown}");
    // The operator's route says it all.
    let answer = reqwest::Client::new()
        .post(format!("{base}/admin/v1/reload"))
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 422);
    let answer = answer.text().await.unwrap();
    assert!(answer.contains("line 5"), "{answer}");

    // An environment variable that is not set.
    let unset = format!("{api}upstream-headers = {{ Authorization = \"env:{UNSET_VAR}\" }}\n");
    let shown = broken_reload(&base, &config, &unset, Some(&shown)).await;
    assert!(
        !shown.contains(UNSET_VAR),
        "/health names the variable: {shown}"
    );
    assert!(shown.contains("apigate.toml"), "{shown}");

    // A secret file in another folder that is not there.
    let missing = secrets.path().join("github-token.txt");
    let absent = format!(
        "{api}upstream-headers = {{ Authorization = \"file:{}\" }}\n",
        missing.display()
    );
    let shown = broken_reload(&base, &config, &absent, Some(&shown)).await;
    let folder = secrets.path().display().to_string();
    assert!(
        !shown.contains(&folder),
        "/health names the folder: {shown}"
    );
    assert!(
        !shown.contains("github-token"),
        "/health names the file: {shown}"
    );
    // The operator hears everything: the log names the variable and the path.
    let log = proc.log();
    assert!(log.contains(UNSET_VAR), "{log}");
    assert!(log.contains(&folder), "{log}");
    assert!(proc.terminate().await, "{}", proc.log());
}

#[tokio::test]
async fn a_refused_bearer_token_names_no_introspection_or_jwks_url() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;

    // The issuer's keys cannot be had: a JWT it signed gets 503.
    let dead_jwks = format!("http://127.0.0.1:{}/private-jwks-path", free_port());
    let (idp, mut proc, url) = serve(&db, &upstream, &["--oauth-jwks-url", &dead_jwks]).await;
    let jwt = idp
        .sign_in("apigate-rs", "piet", "apigate:read", &url)
        .await;
    let (status, challenge, body) =
        initialize(&url, &[("authorization", &format!("Bearer {jwt}"))]).await;
    assert_eq!(status, 503, "{body}");
    let shown = format!("{challenge} {body}");
    assert!(!shown.contains("private-jwks-path"), "{shown}");
    assert!(!shown.contains(&dead_jwks), "{shown}");
    assert!(proc.terminate().await, "{}", proc.log());

    // The introspection endpoint does not answer: an opaque token gets 503.
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("introspection.secret");
    std::fs::write(&secret_file, "apigate-rs-secret\n").unwrap();
    let dead = format!("http://127.0.0.1:{}/private-introspect", free_port());
    let (_idp, mut proc, url) =
        serve_with(&db, &upstream, |_| introspection_flags(&dead, &secret_file)).await;
    let (status, challenge, body) =
        initialize(&url, &[("authorization", "Bearer opaque-0123456789")]).await;
    assert_eq!(status, 503, "{body}");
    let shown = format!("{challenge} {body}");
    assert!(!shown.contains("private-introspect"), "{shown}");
    assert!(!shown.contains(&dead), "{shown}");
    // The operator's log says where.
    assert!(proc.log().contains("private-introspect"), "{}", proc.log());
    assert!(proc.terminate().await, "{}", proc.log());
}
