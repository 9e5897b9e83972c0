use super::*;

fn refused(text: &str) -> String {
    match parse(text, "apigate.toml", Path::new("/etc/apigate")) {
        Ok(apis) => panic!("accepted: {apis:?}"),
        Err(e) => e.to_string(),
    }
}

/// The public text of each refusal names the file, the place and the kind of problem;
/// the whole message keeps the rest for the operator.
#[test]
fn public_text_names_no_line_variable_or_path() {
    let api = "[[api]]\nname = \"gh\"\nspec = \"gh.json\"\n";
    for (text, hidden, public_has) in [
        (
            format!(
                "{api}upstream-headers = {{ Authorization = \"Bearer ghp_0123456789abcdef }}\n"
            ),
            "ghp_0123456789abcdef",
            "apigate.toml, line 4, column",
        ),
        (
            format!("{api}upstream-headers = {{ Authorization = \"env:NOT_SET_GH_TOKEN_VAR\" }}\n"),
            "NOT_SET_GH_TOKEN_VAR",
            "environment variable",
        ),
        (
            format!("{api}upstream-headers = {{ Authorization = \"file:/nowhere/gh-token\" }}\n"),
            "/nowhere",
            "the file its file: reference names",
        ),
    ] {
        let e = parse(
            &text,
            "/etc/apigate/apigate.toml",
            Path::new("/etc/apigate"),
        )
        .err()
        .unwrap_or_else(|| panic!("accepted: {text}"));
        let public = e.public();
        assert!(e.to_string().contains(hidden), "{e}");
        assert!(!public.contains(hidden), "{public}");
        assert!(!public.contains("/etc/apigate"), "{public}");
        assert!(public.contains(public_has), "{public}");
    }
}

#[test]
fn the_oauth_table_reads_beside_the_apis_and_names_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("apigate.toml");
    let text = "[[api]]\nname = \"pets\"\nspec = \"pets.json\"\n\n[oauth]\n\
        issuers = [\"https://login.example.com/realms/acme\"]\n\
        audience = \"https://apigate.example.com/mcp\"\nroles-claim = \"groups\"\n\
        [oauth.scopes]\n\"apigate:read\" = [\"apigate.discover\", \"apigate.schema\"]\n";
    std::fs::write(&path, text).unwrap();
    let oauth = sign_in(&path).unwrap().unwrap();
    assert_eq!(oauth.issuers, ["https://login.example.com/realms/acme"]);
    assert_eq!(oauth.roles_claim.as_deref(), Some("groups"));
    assert_eq!(
        oauth.scopes["apigate:read"],
        ["apigate.discover", "apigate.schema"]
    );
    // The APIs read as before; a file without the table has none.
    assert_eq!(parse(text, "apigate.toml", dir.path()).unwrap().len(), 1);
    std::fs::write(&path, "[[api]]\nname = \"pets\"\nspec = \"p.json\"\n").unwrap();
    assert_eq!(sign_in(&path).unwrap(), None);
    let e = refused("[[api]]\nname = \"a\"\nspec = \"a.json\"\n[oauth]\nissuer = \"x\"\n");
    assert!(e.contains("issuer"), "{e}");
}

#[test]
fn a_file_with_every_setting_reads_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("stripe.key");
    std::fs::write(&secret, "sk_test_123\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let text = r#"
[[api]]
name = "stripe"
spec = "specs/stripe.json"
upstream = "https://api.stripe.com"
upstream-credentials = { bearerAuth = "file:stripe.key" }
upstream-headers = { "Stripe-Version" = "env:PATH" }
upstream-timeout = "20s"
connect-timeout = "2s"
max-response-bytes = 20000
max-read-bytes = 4000000
[[api.rule]]
method = "POST"
path = "/v1/refunds"
features = ["stripe.refunds"]

[[api]]
name = "github"
spec = "https://example.com/github.json"
poll = "5m"
ref-origins = ["https://schemas.example.com:443"]
[api.oauth]
token-url = "https://auth.example.com/token"
client-id = "apigate"
client-secret = "file:stripe.key"
"#;
    let apis = parse(text, "apigate.toml", dir.path()).unwrap();
    let [stripe, github] = apis.as_slice() else {
        panic!("{apis:?}")
    };
    assert_eq!(stripe.name, "stripe");
    assert_eq!(
        stripe.spec,
        dir.path().join("specs/stripe.json").display().to_string()
    );
    assert_eq!(stripe.upstream_credentials, ["bearerAuth=sk_test_123"]);
    let path = std::env::var("PATH").unwrap();
    assert_eq!(stripe.upstream_headers, [format!("Stripe-Version: {path}")]);
    assert_eq!(stripe.upstream_timeout, Some(Duration::from_secs(20)));
    assert_eq!(stripe.connect_timeout, Some(Duration::from_secs(2)));
    assert_eq!(stripe.max_response_bytes, Some(20000));
    assert_eq!(stripe.max_read_bytes, Some(4_000_000));
    assert_eq!(stripe.rules.len(), 1);
    assert_eq!(github.spec, "https://example.com/github.json");
    assert_eq!(github.poll, Some(Duration::from_secs(300)));
    assert_eq!(
        github.ref_origins,
        [crate::spec::parse_origin("https://schemas.example.com").unwrap()]
    );
    let oauth = github.oauth.as_ref().unwrap();
    assert_eq!(oauth.client_secret, "sk_test_123");
    // Debug shows no secret.
    assert!(!format!("{apis:?}").contains("sk_test_123"));
}

#[test]
fn names_keys_and_secrets_are_checked() {
    for (text, expected) in [
        ("", "no [[api]] table"),
        ("[[api]]\nname = \"a\"\n", "missing field `spec`"),
        (
            "[[api]]\nname = \"a\"\nspec = \"a.json\"\ntimeout = \"1s\"\n",
            "unknown field `timeout`",
        ),
        ("[server]\nport = 1\n", "unknown field `server`"),
        (
            "[[api]]\nname = \"Git Hub\"\nspec = \"a.json\"\n",
            "a name is 1 to 64 of a-z",
        ),
        (
            "[[api]]\nname = \"a:b\"\nspec = \"a.json\"\n",
            "holds no ':'",
        ),
        (
            "[[api]]\nname = \"\"\nspec = \"a.json\"\n",
            "a name is 1 to 64",
        ),
        (
            "[[api]]\nname = \"a\"\nspec = \"a.json\"\n[[api]]\nname = \"a\"\nspec = \"b.json\"\n",
            "two [[api]] tables have this name",
        ),
        (
            "[[api]]\nname = \"a\"\nspec = \"a.json\"\nupstream-headers = { Authorization = \"Bearer abc\" }\n",
            "never inline",
        ),
        (
            "[[api]]\nname = \"a\"\nspec = \"a.json\"\nupstream = \"https://user:pw@example.com\"\n",
            "user info in the URL",
        ),
        (
            "[[api]]\nname = \"a\"\nspec = \"a.json\"\nupstream-credentials = { k = \"env:APIGATE_NO_SUCH_VARIABLE_1\" }\n",
            "APIGATE_NO_SUCH_VARIABLE_1 is not set",
        ),
        (
            "[[api]]\nname = \"a\"\nspec = \"a.json\"\nupstream-timeout = \"soon\"\n",
            "upstream-timeout",
        ),
        (
            "[[api]]\nname = \"a\"\nspec = \"a.json\"\npoll = \"10ms\"\n",
            "poll: at least 1s",
        ),
        (
            "[[api]]\nname = \"a\"\nspec = \"a.json\"\nref-origins = [\"https://a.example/schemas\"]\n",
            "is not an origin",
        ),
    ] {
        let e = refused(text);
        assert!(e.contains(expected), "{text:?}: {e}");
        assert!(!e.contains("Bearer abc") && !e.contains(":pw@"), "{e}");
    }
    let many: String = (0..=MAX_APIS)
        .map(|i| format!("[[api]]\nname = \"a{i}\"\nspec = \"a.json\"\n"))
        .collect();
    assert!(refused(&many).contains("at most 64"));
}

#[cfg(unix)]
#[test]
fn secrets_others_may_read_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("token");
    std::fs::write(&secret, "t0ken").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = dir.path().join("apigate.toml");
    std::fs::write(
        &config,
        "[[api]]\nname = \"a\"\nspec = \"a.json\"\nupstream-headers = { X-Token = \"file:token\" }\n",
    )
    .unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
    let e = load(&config).unwrap_err().to_string();
    assert!(e.contains("chmod 600") && e.contains("token"), "{e}");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(
        load(&config).unwrap()[0].upstream_headers,
        ["X-Token: t0ken"]
    );
    // The file itself, once others may read it.
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o640)).unwrap();
    let e = load(&config).unwrap_err().to_string();
    assert!(e.contains("chmod 600") && e.contains("640"), "{e}");
    // Without credential settings it may be read by anyone.
    std::fs::write(&config, "[[api]]\nname = \"a\"\nspec = \"a.json\"\n").unwrap();
    assert!(load(&config).is_ok());
}
