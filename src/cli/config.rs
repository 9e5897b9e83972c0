//! `apigate config claude|opencode`: ready-to-paste client configuration: over HTTP with the
//! API key (and, in production, the session token) as headers, over HTTP signing in with the
//! identity provider (`--oauth`: no headers, the client finds the provider itself), or the
//! client spawning `apigate stdio` (`--stdio`).

use std::process::ExitCode;

use serde_json::{Map, Value, json};

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Client {
    /// Claude Code: `.mcp.json` in the project folder.
    Claude,
    /// OpenCode: `opencode.json` in the project folder.
    Opencode,
}

#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    /// Which client's configuration file to print.
    pub client: Client,
    /// The server's MCP endpoint.
    #[arg(long, default_value = "http://127.0.0.1:3001/mcp")]
    pub url: String,
    /// The API key to put in the snippet; without it, the snippet reads the key from the
    /// APIGATE_API_KEY environment variable when the client starts.
    #[arg(long, conflicts_with_all = ["oauth", "stdio"])]
    pub key: Option<String>,
    /// Production: also send the user's session in an `x-session-token` header, so the token
    /// never enters the model's context. Without a value, the snippet reads it from the
    /// APIGATE_SESSION_TOKEN environment variable when the client starts.
    #[arg(long, value_name = "TOKEN", num_args = 0..=1, default_missing_value = "",
          conflicts_with_all = ["oauth", "stdio"])]
    pub session_token: Option<String>,
    /// Production with `serve --oauth-issuer`: no key and no session header; the client finds
    /// the identity provider from the server's 401 and opens a browser for the person to sign
    /// in.
    #[arg(long, conflicts_with = "stdio")]
    pub oauth: bool,
    /// The client starts `apigate stdio` itself (no server to run, no key); give the API with
    /// --spec or --config.
    #[arg(long, requires = "stdio_api")]
    pub stdio: bool,
    /// With --stdio: the OpenAPI document `apigate stdio` serves (a path, best absolute, or an
    /// http(s) URL).
    #[arg(long, value_name = "FILE|URL", group = "stdio_api", requires = "stdio")]
    pub spec: Option<String>,
    /// With --stdio: the `apigate.toml` of several APIs `apigate stdio` serves.
    #[arg(long, value_name = "FILE", group = "stdio_api", requires = "stdio")]
    pub config: Option<String>,
    /// The server's name in the client.
    #[arg(long, default_value = "apigate")]
    pub name: String,
}

/// What a client sends on every request: the API key and, in production, a session token.
/// `None` is a reference to the environment variable the client expands when it starts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Credentials<'a> {
    pub key: Option<&'a str>,
    /// `Some(None)`: the header, read from APIGATE_SESSION_TOKEN.
    pub session_token: Option<Option<&'a str>>,
}

/// The headers, with `env` turning a variable name into the client's reference syntax.
fn headers(creds: Credentials<'_>, env: fn(&str) -> String) -> Value {
    let mut h = Map::new();
    let key = creds
        .key
        .map_or_else(|| env("APIGATE_API_KEY"), str::to_string);
    h.insert("x-api-key".into(), key.into());
    if let Some(token) = creds.session_token {
        let token = token.map_or_else(|| env("APIGATE_SESSION_TOKEN"), str::to_string);
        h.insert("x-session-token".into(), token.into());
    }
    Value::Object(h)
}

/// The `.mcp.json` document for Claude Code.
pub fn claude(name: &str, url: &str, creds: Credentials<'_>) -> Value {
    let headers = headers(creds, |var| format!("${{{var}}}"));
    json!({"mcpServers": {name: {"type": "http", "url": url, "headers": headers}}})
}

/// The `opencode.json` document for OpenCode.
pub fn opencode(name: &str, url: &str, creds: Credentials<'_>) -> Value {
    let headers = headers(creds, |var| format!("{{env:{var}}}"));
    json!({
        "$schema": "https://opencode.ai/config.json",
        "mcp": {name: {"type": "remote", "url": url, "headers": headers, "enabled": true}}
    })
}

/// How the client reaches apigate.
#[derive(Debug, Clone, Copy)]
pub enum Connection<'a> {
    /// Over HTTP at the URL, with these credentials as headers.
    Http(&'a str, Credentials<'a>),
    /// Over HTTP at the URL, signing in with the identity provider (no headers).
    OAuth(&'a str),
    /// The client spawns `apigate` with these arguments.
    Stdio(&'a [String]),
}

/// The client's configuration document for `connection`.
pub fn snippet(client: Client, name: &str, connection: Connection<'_>) -> Value {
    match (client, connection) {
        (Client::Claude, Connection::Http(url, creds)) => claude(name, url, creds),
        (Client::Opencode, Connection::Http(url, creds)) => opencode(name, url, creds),
        (Client::Claude, Connection::OAuth(url)) => {
            json!({"mcpServers": {name: {"type": "http", "url": url}}})
        }
        (Client::Opencode, Connection::OAuth(url)) => json!({
            "$schema": "https://opencode.ai/config.json",
            "mcp": {name: {"type": "remote", "url": url, "enabled": true}}
        }),
        (Client::Claude, Connection::Stdio(args)) => json!({
            "mcpServers": {name: {"type": "stdio", "command": "apigate", "args": args}}
        }),
        (Client::Opencode, Connection::Stdio(args)) => {
            let command: Vec<&str> = std::iter::once("apigate")
                .chain(args.iter().map(String::as_str))
                .collect();
            json!({
                "$schema": "https://opencode.ai/config.json",
                "mcp": {name: {"type": "local", "command": command, "enabled": true}}
            })
        }
    }
}

pub fn run(args: ConfigArgs) -> anyhow::Result<ExitCode> {
    let stdio = match (&args.spec, &args.config) {
        (Some(spec), _) => vec!["stdio".to_string(), "--spec".to_string(), spec.clone()],
        (None, Some(config)) => vec!["stdio".to_string(), "--config".to_string(), config.clone()],
        (None, None) => Vec::new(),
    };
    let creds = Credentials {
        key: args.key.as_deref(),
        session_token: args
            .session_token
            .as_deref()
            .map(|t| Some(t.trim()).filter(|t| !t.is_empty())),
    };
    let connection = if args.stdio {
        Connection::Stdio(&stdio)
    } else if args.oauth {
        Connection::OAuth(&args.url)
    } else {
        Connection::Http(&args.url, creds)
    };
    let doc = snippet(args.client, &args.name, connection);
    super::print(&format!("{}\n", serde_json::to_string_pretty(&doc)?))?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_token_header_uses_each_clients_env_syntax() {
        let creds = Credentials {
            key: None,
            session_token: Some(None),
        };
        let c = claude("apigate", "http://127.0.0.1:3001/mcp", creds);
        let h = &c["mcpServers"]["apigate"]["headers"];
        assert_eq!(h["x-api-key"], "${APIGATE_API_KEY}");
        assert_eq!(h["x-session-token"], "${APIGATE_SESSION_TOKEN}");
        let o = opencode("apigate", "http://127.0.0.1:3001/mcp", creds);
        let h = &o["mcp"]["apigate"]["headers"];
        assert_eq!(h["x-api-key"], "{env:APIGATE_API_KEY}");
        assert_eq!(h["x-session-token"], "{env:APIGATE_SESSION_TOKEN}");
        let plain = claude("a", "u", Credentials::default());
        assert!(
            plain["mcpServers"]["a"]["headers"]
                .get("x-session-token")
                .is_none()
        );
    }
}
