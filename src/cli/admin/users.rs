//! `apigate oauth users …`: who signed in with a bearer token, and their own upstream
//! credentials (stored under the token's issuer and `sub`).

use anyhow::Context;
use clap::{Args, Subcommand};

use super::DbArgs;
use super::print::{oauth_users_table, shown};
use crate::auth::session_upstream::{HeaderArg, UpstreamInput};
use crate::auth::{Admin, OAuthUserQuery, OAuthUserRef, OAuthUserUpstream};

/// `apigate oauth users …`
#[derive(Debug, Clone, Args)]
pub struct UsersArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub secret_key: crate::cli::args::SecretKeyArgs,
    #[command(subcommand)]
    pub command: UsersCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum UsersCommand {
    /// List people who signed in with a bearer token, the most recently seen first
    List {
        /// Only this `sub`
        #[arg(long)]
        subject: Option<String>,
        /// Rows per page (1 to 1000)
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// Continue after a previous page (the cursor it printed)
        #[arg(long)]
        cursor: Option<String>,
        /// Print JSON ({"users": [...], "nextCursor": ...}) instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Store a person's own upstream credentials for one API: sent on the calls they make to it
    /// with their tokens, in place of server-wide headers of the same name; their other APIs'
    /// are kept. Stored encrypted (needs APIGATE_SECRET_KEY or --secret-key-file); the person
    /// may not have signed in yet
    SetUpstream {
        /// The issuer of the person's tokens (their `iss`, as given to serve --oauth-issuer)
        #[arg(long)]
        issuer: String,
        /// The person's `sub`
        #[arg(long)]
        subject: String,
        /// A header, "Name: value" (repeatable)
        #[arg(long = "upstream-header", value_name = "NAME: VALUE", required = true)]
        upstream_headers: Vec<HeaderArg>,
        /// The API (an [[api]] name of the config file) the headers are for: sent on calls to
        /// that API only. Required when the server serves several APIs; with one, the headers
        /// go to it
        #[arg(long, value_name = "NAME")]
        api: Option<String>,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Delete a person's upstream credentials: all of them, or with --api those for one API
    ClearUpstream {
        /// The issuer of the person's tokens (their `iss`)
        #[arg(long)]
        issuer: String,
        /// The person's `sub`
        #[arg(long)]
        subject: String,
        /// Only the credentials for this API (needs the secret key, which opens the others)
        #[arg(long, value_name = "NAME")]
        api: Option<String>,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
}

pub(crate) async fn run_users(args: UsersArgs) -> anyhow::Result<()> {
    let keys = args.secret_key.load()?;
    let admin = Admin::new(args.db.store().await?).with_secret_keys(keys);
    crate::cli::print(&users(admin, args.command).await?)?;
    Ok(())
}

/// Runs a `users` command and returns what it prints.
pub async fn users(admin: Admin, cmd: UsersCommand) -> anyhow::Result<String> {
    match cmd {
        UsersCommand::List {
            subject,
            limit,
            cursor,
            json,
        } => {
            let page = admin
                .list_oauth_users(&OAuthUserQuery {
                    subject,
                    limit: Some(limit),
                    cursor,
                })
                .await
                .context("cannot list signed-in people")?;
            shown(json, &page, oauth_users_table)
        }
        UsersCommand::SetUpstream {
            issuer,
            subject,
            upstream_headers,
            api,
            json,
        } => {
            let given = upstream_headers.len();
            let for_api = for_api(api.as_deref());
            let user = admin
                .set_oauth_user_upstream(OAuthUserUpstream {
                    issuer,
                    subject,
                    upstream: UpstreamInput::from_args(api, &upstream_headers),
                })
                .await
                .context("cannot store the person's upstream credentials")?;
            shown(json, &user, |u| {
                format!(
                    "stored {given} upstream header(s) for {} of {}{for_api}; they hold: {}{}\n",
                    u.subject,
                    u.issuer,
                    u.upstream_headers.join(", "),
                    apis_held(&u.upstream_apis),
                )
            })
        }
        UsersCommand::ClearUpstream {
            issuer,
            subject,
            api,
            json,
        } => {
            let for_api = for_api(api.as_deref());
            let user = admin
                .clear_oauth_user_upstream(&OAuthUserRef {
                    issuer,
                    subject,
                    api,
                })
                .await
                .context("cannot delete the person's upstream credentials")?;
            shown(json, &user, |u| {
                format!(
                    "deleted the upstream credentials of {} of {}{for_api}\n",
                    u.subject, u.issuer
                )
            })
        }
    }
}

/// " for the API NAME", or nothing.
fn for_api(api: Option<&str>) -> String {
    api.map(|a| format!(" for the API {}", a.trim()))
        .unwrap_or_default()
}

/// " (for the APIs a, b)", or nothing when the headers name no API.
fn apis_held(apis: &[String]) -> String {
    match apis {
        [] => String::new(),
        apis => format!(" (for the APIs {})", apis.join(", ")),
    }
}
