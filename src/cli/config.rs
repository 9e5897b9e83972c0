//! `apigate config claude|opencode`: ready-to-paste client configuration.

use std::process::ExitCode;

use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Client {
    /// Claude Code: `.mcp.json` in the project folder.
    Claude,
    /// OpenCode: `opencode.json` in the project folder.
    Opencode,
}

#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    pub client: Client,
    /// The server's MCP endpoint.
    #[arg(long, default_value = "http://127.0.0.1:3001/mcp")]
    pub url: String,
    /// The API key to put in the snippet; without it, the snippet reads the key from the
    /// APIGATE_API_KEY environment variable when the client starts.
    #[arg(long)]
    pub key: Option<String>,
    /// The server's name in the client.
    #[arg(long, default_value = "apigate")]
    pub name: String,
}

/// The `.mcp.json` document for Claude Code.
pub fn claude(name: &str, url: &str, key: Option<&str>) -> Value {
    let key = key.map_or_else(|| "${APIGATE_API_KEY}".to_string(), str::to_string);
    json!({"mcpServers": {name: {"type": "http", "url": url, "headers": {"x-api-key": key}}}})
}

/// The `opencode.json` document for OpenCode.
pub fn opencode(name: &str, url: &str, key: Option<&str>) -> Value {
    let key = key.map_or_else(|| "{env:APIGATE_API_KEY}".to_string(), str::to_string);
    json!({
        "$schema": "https://opencode.ai/config.json",
        "mcp": {name: {"type": "remote", "url": url, "headers": {"x-api-key": key}, "enabled": true}}
    })
}

pub fn run(args: ConfigArgs) -> anyhow::Result<ExitCode> {
    let doc = match args.client {
        Client::Claude => claude(&args.name, &args.url, args.key.as_deref()),
        Client::Opencode => opencode(&args.name, &args.url, args.key.as_deref()),
    };
    println!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(ExitCode::SUCCESS)
}
