//! clap commands; each calls core functions and prints a table or `--json`.

pub mod admin;
mod config;
pub mod dev;
pub mod index;
pub mod serve;
mod specs;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// apigate: any OpenAPI-described HTTP API as three MCP tools (api_discover, api_schema,
/// api_execute) for AI agents.
#[derive(Debug, Parser)]
#[command(name = "apigate", version, about, long_about = None)]
pub struct Cli {
    /// Log format on stderr: `text` or `json`. Levels come from RUST_LOG (default `info`).
    #[arg(long, global = true, default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load OpenAPI documents and report version, operation count and warnings.
    Check(specs::CheckArgs),
    /// Rank a spec's operations for a query written in plain words.
    Search(specs::SearchArgs),
    /// Print one operation's resolved schema, as `api_schema` returns it.
    Schema(specs::SchemaArgs),
    /// Measure retrieval quality on a query file (recall@1, recall@5, MRR@10, all@5).
    Eval(specs::EvalArgs),
    /// Precompute what semantic ranking needs (the operation vectors) for deployments.
    Index(index::IndexArgs),
    /// Run the MCP server in development mode: one API key, no database.
    Dev(dev::DevArgs),
    /// Run the MCP server in production mode: keys and sessions in Postgres (DATABASE_URL).
    Serve(serve::ServeArgs),
    /// Serve MCP over stdin/stdout, for clients that spawn the server.
    Stdio(dev::StdioArgs),
    /// Print client configuration for Claude Code (`.mcp.json`) or OpenCode (`opencode.json`).
    Config(config::ConfigArgs),
    /// Run the reference agent monitor: rules, human approval, live web page.
    Monitor(crate::monitor::MonitorArgs),
    /// Apply the database migrations (DATABASE_URL).
    Migrate(admin::MigrateArgs),
    /// Create, list and revoke server API keys (DATABASE_URL).
    Keys(admin::KeysArgs),
    /// Create and revoke user session tokens (DATABASE_URL).
    Sessions(admin::SessionsArgs),
    /// Define roles: named sets of features (DATABASE_URL).
    Roles(admin::RolesArgs),
}

/// Runs the parsed command; errors are printed with their whole cause chain.
pub async fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Check(a) => specs::check(a).await,
        Command::Search(a) => specs::search(a).await,
        Command::Schema(a) => specs::schema(a).await,
        Command::Eval(a) => specs::eval(a).await,
        Command::Index(a) => index::run(a).await,
        Command::Dev(a) => dev::run_dev(a).await,
        Command::Serve(a) => serve::run(a).await,
        Command::Stdio(a) => dev::run_stdio(a).await,
        Command::Config(a) => config::run(a),
        Command::Monitor(a) => crate::monitor::run(a).await.map(|()| ExitCode::SUCCESS),
        Command::Migrate(a) => admin::run_migrate(a).await.map(|()| ExitCode::SUCCESS),
        Command::Keys(a) => admin::run_keys(a).await.map(|()| ExitCode::SUCCESS),
        Command::Sessions(a) => admin::run_sessions(a).await.map(|()| ExitCode::SUCCESS),
        Command::Roles(a) => admin::run_roles(a).await.map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Sets up `tracing` on stderr (stdout stays clean for `--json` and stdio MCP).
pub fn init_logging(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
