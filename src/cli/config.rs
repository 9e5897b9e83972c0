//! `apigate config claude|opencode`: ready-to-paste client configuration.

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
    #[arg(long)]
    pub key: Option<String>,
    /// Production: also send the user's session in an `x-session-token` header, so the token
    /// never enters the model's context. Without a value, the snippet reads it from the
    /// APIGATE_SESSION_TOKEN environment variable when the client starts.
    #[arg(long, value_name = "TOKEN", num_args = 0..=1, default_missing_value = "")]
    pub session_token: Option<String>,
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

pub fn run(args: ConfigArgs) -> anyhow::Result<ExitCode> {
    let creds = Credentials {
        key: args.key.as_deref(),
        session_token: args
            .session_token
            .as_deref()
            .map(|t| Some(t.trim()).filter(|t| !t.is_empty())),
    };
    let doc = match args.client {
        Client::Claude => claude(&args.name, &args.url, creds),
        Client::Opencode => opencode(&args.name, &args.url, creds),
    };
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
