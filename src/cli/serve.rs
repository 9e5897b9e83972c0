//! `apigate serve`: production mode. Server keys and user sessions in Postgres, migrations at
//! start-up, `/admin/v1/*`, an audit row per tool call.

use std::process::ExitCode;
use std::sync::Arc;

use super::args::{AccessArgs, EngineArgs, HttpArgs, banner};
use crate::auth::Auth;
use crate::http::{self, HttpOptions, KeyCheck};
use crate::tools::Access;

#[derive(Debug, clap::Args)]
#[command(after_help = SERVE_HELP)]
// The flags' order is the help's: the essentials (the database, the API, where to listen),
// then the groups of `args::heading` in their order.
pub struct ServeArgs {
    /// Postgres connection URL (postgres://user:password@host:5432/apigate); the database
    /// must exist (`createdb apigate`), migrations run at start-up.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, value_name = "URL")]
    pub database_url: String,
    #[command(flatten)]
    pub access: AccessArgs,
    #[command(flatten)]
    pub oauth: super::oauth::SignInArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub http: HttpArgs,
    #[command(flatten)]
    pub identity: super::identity::IdentityArgs,
}

/// What `serve --help` says after the flags: how clients get in, and how long sessions live.
const SERVE_HELP: &str = "\
Clients need a server key in x-api-key: `apigate keys create --name agent \
--features apigate.discover,apigate.schema,apigate.execute` (or MCP_SERVER_API_KEY as a bootstrap key). Every tool call then names \
a user session (`_sessionToken` or the x-session-token header). A call gets the features its key \
and its session both hold: add the API's features (`billing.*`) to the key when operations need them. \
With several APIs (--config), an API's operations also need a feature naming it (`NAME.execute`, \
e.g. `--features apigate.discover,apigate.schema,apigate.execute,petstore.execute,stripe.execute`).

Sessions live 120 minutes unless created with another lifetime: \
`apigate sessions create --user U --ttl-minutes N`, or `ttlMinutes` in POST /admin/v1/sessions \
(at most 43200, 30 days). `apigate sessions list` shows them; `apigate audit` what they did.

A session may carry its user's own upstream credentials for one API (`apigate sessions create \
--api NAME --upstream-header \"Authorization: Bearer …\"`, or `upstream.api` and \
`upstream.headers` in POST /admin/v1/sessions; `--api` is needed when several APIs are served): \
they are stored encrypted under the secret key (APIGATE_SECRET_KEY or --secret-key-file; \
`openssl rand -base64 32`) and replace --upstream-headers of the same name on that session's \
calls to that API, and go to no other.";

pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let auth = args.access.auth(&args.database_url).await?;
    let super::load::Started {
        mut engine,
        loader,
        sign_in: sign_in_file,
    } = args.engine.start(args.access.rules()?).await?;
    warn_if_no_key_can_connect(&auth, &engine.apis().names()).await;
    engine.access = Access::Sessions;
    engine.auth = Some(auth.clone());
    // Replicas share one database: a session's monitor statistics are counted there.
    if let Some(monitor) = &engine.monitor {
        let fail_closed = args.access.limits_unavailable == super::args::LimitsWhenDown::Closed;
        monitor.share_stats(auth.store().clone(), fail_closed);
    }
    // What `sessions create` and the admin API check a credential's API against.
    auth.record_served_apis(&engine.apis().names()).await;
    // Replicas share one database: a response held by one is read through any.
    engine.held = engine.held.in_database(auth.store().clone());
    let (listener, addr) = args.http.bind().await?;
    engine.identity = args.identity.build(&format!("http://{addr}"))?;
    // `[oauth]` of the config file, under the flags (read at start-up; a reload does not
    // change who may sign in).
    let sign_in = match sign_in_file {
        Some(file) => args.oauth.clone().over(file),
        None => args.oauth.clone(),
    };
    let oauth = sign_in.gate(addr).await?;
    let engine = Arc::new(engine);
    let engine_running = engine.clone();
    let url = format!("http://{addr}/mcp");
    eprintln!(
        "{}; admin API at /admin/v1",
        banner("serve", &engine, &url, args.http.stateless)
    );
    let options = HttpOptions {
        admin: Some(http::admin::router(auth.clone())),
        oauth,
        ..args
            .http
            .options(KeyCheck::Database(auth.clone()), "production")
    };
    args.http.run(engine, loader, listener, options).await?;
    // A call the drain cut queues its audit row as rmcp drops it, a moment after its answer.
    engine_running
        .passes_ended(std::time::Duration::from_secs(2))
        .await;
    let lost = auth.drain_audit(std::time::Duration::from_secs(5)).await;
    if lost > 0 {
        tracing::error!(
            rows = lost,
            "shutting down with audit rows the database never took; they are lost"
        );
    }
    // A database that takes connections and never answers would hold the pool's close (its
    // `UNLISTEN`) for ever: the drain has ended, so exit after a bounded wait.
    if tokio::time::timeout(std::time::Duration::from_secs(3), auth.store().close())
        .await
        .is_err()
    {
        tracing::warn!("the database did not answer while its connections closed; exiting anyway");
    }
    Ok(ExitCode::SUCCESS)
}

/// With no active server key in the database and no MCP_SERVER_API_KEY, every request gets
/// 401: say so at start-up, with the command that fixes it for the APIs served (`names`).
async fn warn_if_no_key_can_connect(auth: &Auth, names: &[String]) {
    if std::env::var("MCP_SERVER_API_KEY").is_ok_and(|k| !k.trim().is_empty()) {
        return;
    }
    let keys = match auth.list_keys().await {
        Ok(keys) => keys,
        Err(e) => {
            tracing::warn!(error = %e, "could not count the server keys");
            return;
        }
    };
    let now = chrono::Utc::now();
    let active = keys
        .iter()
        .filter(|k| k.revoked_at.is_none() && k.expires_at.is_none_or(|t| t > now))
        .count();
    if active == 0 {
        let features = crate::apis::features_for(names);
        let sessions = if names.len() > 1 {
            " Sessions need the same features: each API's NAME.execute shows that API's operations"
        } else {
            ""
        };
        tracing::warn!(
            "no client can connect: the database has no active server key and MCP_SERVER_API_KEY \
             is not set. Create a key with `apigate keys create --name agent \
             --features {features}` (same DATABASE_URL) and give it to the agent as x-api-key.{sessions}"
        );
    }
}
