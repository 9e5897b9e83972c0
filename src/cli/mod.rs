//! clap commands; each calls core functions and prints a table or `--json`.

pub mod admin;
pub mod args;
mod config;
pub mod dev;
pub mod eval;
pub mod help;
pub mod identity;
pub mod index;
mod load;
pub mod monitor;
pub mod oauth;
mod progress;
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
    // Global: every subcommand shows it, always last before --help.
    #[arg(long, global = true, default_value = "text", value_parser = ["text", "json"],
          display_order = 10_000)]
    pub log_format: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load OpenAPI documents and report version, operation count and warnings.
    Check(specs::SpecCheckArgs),
    /// Rank a spec's operations for a query written in plain words.
    Search(specs::SearchArgs),
    /// Print one operation's resolved schema, as `api_schema` returns it.
    Schema(specs::SchemaCommandArgs),
    /// Measure retrieval quality on a query file (recall@1, recall@5, MRR@10, all@5).
    Eval(specs::EvalArgs),
    /// Precompute what semantic ranking needs (the operation vectors) for deployments.
    Index(index::IndexArgs),
    /// Run the MCP server in development mode: one API key, no database.
    Dev(Box<dev::DevArgs>),
    /// Run the MCP server in production mode: keys and sessions in Postgres (DATABASE_URL).
    Serve(Box<serve::ServeArgs>),
    /// Serve MCP over stdin/stdout, for clients that spawn the server.
    Stdio(Box<dev::StdioArgs>),
    /// Print client configuration for Claude Code (`.mcp.json`) or OpenCode (`opencode.json`).
    Config(config::ConfigArgs),
    /// Run the reference agent monitor: rules, human approval, live web page.
    Monitor(monitor::MonitorArgs),
    /// Apply the database migrations (DATABASE_URL).
    Migrate(admin::MigrateArgs),
    /// Create, list and revoke server API keys (DATABASE_URL).
    Keys(admin::KeysArgs),
    /// Create, list and revoke user sessions (DATABASE_URL).
    Sessions(admin::SessionsArgs),
    /// Read the audit log: what the agent did, for whom, when (DATABASE_URL).
    Audit(admin::AuditArgs),
    /// Define roles: named sets of features (DATABASE_URL).
    Roles(admin::RolesArgs),
    /// Make the keys that sign identity assertions (`serve --identity-header`).
    SigningKey(identity::SigningKeyArgs),
    /// Check an OAuth issuer for `serve --oauth-issuer`: its metadata, keys and what its
    /// tokens would map to.
    Oauth(oauth::OAuthCommand),
}

/// The command line as `apigate` parses it: [`Cli`], with every environment variable a flag
/// reads shown by name only (`[env: APIGATE_MONITOR_URL]`: clap would print an unset one as
/// `=` and a set one's value, a secret perhaps).
pub fn command() -> clap::Command {
    fn tidy(cmd: clap::Command) -> clap::Command {
        cmd.mut_args(|a| {
            if a.get_env().is_some() {
                a.hide_env_values(true)
            } else {
                a
            }
        })
        .mut_subcommands(tidy)
    }
    tidy(<Cli as clap::CommandFactory>::command())
}

/// Parses the process's arguments with [`command`] (exits with clap's message, and
/// [`with_tips`], on an error).
pub fn parse() -> Cli {
    use clap::FromArgMatches;
    let matches = command()
        .try_get_matches()
        .unwrap_or_else(|e| with_tips(e).exit());
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// Parses `args` as [`parse`] does, returning the error (with its tips) instead of exiting.
pub fn try_parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::FromArgMatches;
    let matches = command().try_get_matches_from(args).map_err(with_tips)?;
    Cli::from_arg_matches(&matches)
}

/// A missing required flag's error with where else its value may come from: `--database-url`
/// is also DATABASE_URL, `--spec` has `--config` beside it.
fn with_tips(mut e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::MissingRequiredArgument {
        return e;
    }
    let Some(ContextValue::Strings(missing)) = e.get(ContextKind::InvalidArg) else {
        return e;
    };
    let mut tips = Vec::new();
    if missing.iter().any(|a| a.starts_with("--database-url")) {
        tips.push(
            "set DATABASE_URL (postgres://user:password@host:5432/apigate) or pass \
             --database-url; `createdb apigate` makes the database, `apigate dev` needs none",
        );
    }
    if missing.iter().any(|a| a.starts_with("--spec")) {
        tips.push(
            "give the API with --spec FILE|URL (one OpenAPI document), or several with \
             --config apigate.toml",
        );
    }
    if !tips.is_empty() {
        let tips = tips
            .into_iter()
            .map(clap::builder::StyledStr::from)
            .collect();
        e.insert(ContextKind::Suggested, ContextValue::StyledStrs(tips));
    }
    e
}

/// Runs the parsed command; errors are printed with their whole cause chain.
pub async fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Check(a) => specs::check(a).await,
        Command::Search(a) => specs::search(a).await,
        Command::Schema(a) => specs::schema(a).await,
        Command::Eval(a) => specs::eval(a).await,
        Command::Index(a) => index::run(a).await,
        Command::Dev(a) => dev::run_dev(*a).await,
        Command::Serve(a) => serve::run(*a).await,
        Command::Stdio(a) => dev::run_stdio(*a).await,
        Command::Config(a) => config::run(a),
        Command::Monitor(a) => monitor::run(a).await.map(|()| ExitCode::SUCCESS),
        Command::Migrate(a) => admin::run_migrate(a).await.map(|()| ExitCode::SUCCESS),
        Command::Keys(a) => admin::run_keys(a).await.map(|()| ExitCode::SUCCESS),
        Command::Sessions(a) => admin::run_sessions(a).await.map(|()| ExitCode::SUCCESS),
        Command::Roles(a) => admin::run_roles(a).await.map(|()| ExitCode::SUCCESS),
        Command::Audit(a) => admin::run_audit(a).await.map(|()| ExitCode::SUCCESS),
        Command::SigningKey(a) => identity::run(a),
        Command::Oauth(a) => oauth::run(a).await,
    };
    match result {
        Ok(code) => code,
        // The reader went away (`apigate schema … | head -1`): nothing left to say.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Writes a command's output to stdout. A closed pipe is an error that `run` turns into a
/// quiet exit (`println!` would panic).
pub(crate) fn print(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The log filter without RUST_LOG: apigate at INFO; rmcp (which logs every session's full
/// initialize parameters) and sqlx (which logs Postgres notices such as "relation
/// _sqlx_migrations already exists") only from WARN.
const DEFAULT_LOG_FILTER: &str = "info,rmcp=warn,sqlx=warn";

/// Added to any filter, RUST_LOG included: rmcp logs each new session's id at INFO, and an id
/// with its key is enough to join the session.
const NO_SESSION_IDS: &str = "rmcp::transport::streamable_http_server::session=warn";

/// Sets up `tracing` on stderr (stdout stays clean for `--json` and stdio MCP); colours only
/// when stderr is a terminal.
pub fn init_logging(format: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER))
        .add_directive(NO_SESSION_IDS.parse().expect("a valid directive"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = if format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Every subcommand and every flag says what it is for in `--help`.
    #[test]
    fn every_flag_and_subcommand_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} --{id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                let sub_path = format!("{path} {}", sub.get_name());
                if sub.get_about().is_none() && sub.get_long_about().is_none() {
                    missing.push(sub_path.clone());
                }
                walk(sub, &sub_path, missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "apigate", &mut missing);
        assert!(missing.is_empty(), "no help text: {missing:#?}");
    }

    #[test]
    fn a_broken_pipe_is_recognised_through_context() {
        use anyhow::Context;
        let e = Err::<(), _>(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("printing")
            .unwrap_err();
        assert!(is_broken_pipe(&e));
        assert!(!is_broken_pipe(&anyhow::anyhow!("other")));
    }
}
