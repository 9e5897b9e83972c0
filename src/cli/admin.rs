//! `apigate migrate`, `apigate keys …`, `apigate sessions …`, `apigate roles …`, `apigate audit`,
//! `apigate oauth users …` (in `admin/users.rs`):
//! the same admin operations as `/admin/v1/*`, printed as a table or, with `--json`, as JSON.
//! All read `DATABASE_URL` (or `--database-url`). The command names and flags are a contract.
//! Here: the commands and their flags, and what each asks of [`Admin`]; how the answers print
//! is in `admin/print.rs`.

mod print;
mod users;

pub(crate) use users::run_users;
pub use users::{UsersArgs, UsersCommand, users};

use anyhow::Context;
use clap::{Args, Subcommand};

use chrono::{DateTime, Utc};

use crate::auth::session_upstream::{HeaderArg, UpstreamInput};
use crate::auth::{
    Admin, AuditPage, AuditQuery, NewKey, NewSession, OAuthUserQuery, SessionQuery, SessionRef,
};
use crate::store::{Store, describe_target};
use print::{audit_table, created, keys_table, list_or_dash, roles_table, sessions_table, shown};

/// Where the database is.
#[derive(Debug, Clone, Args)]
pub struct DbArgs {
    /// Postgres URL, e.g. postgres://user:pass@host:5432/apigate
    #[arg(
        long = "database-url",
        env = "DATABASE_URL",
        hide_env_values = true,
        global = true
    )]
    pub database_url: Option<String>,
}

impl DbArgs {
    fn url(&self) -> anyhow::Result<&str> {
        self.database_url
            .as_deref()
            .filter(|u| !u.trim().is_empty())
            .context("DATABASE_URL is not set: export it (postgres://user:pass@host:5432/db) or pass --database-url")
    }

    async fn store(&self) -> anyhow::Result<Store> {
        Ok(Store::connect(self.url()?).await?)
    }
}

/// `apigate migrate`
#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub db: DbArgs,
}

/// `apigate keys …`
#[derive(Debug, Clone, Args)]
pub struct KeysArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(subcommand)]
    pub command: KeysCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum KeysCommand {
    /// Create a server key; the full key is printed once and never again
    Create {
        /// What the key is for, shown in listings and audit labels (1 to 100 characters)
        #[arg(long)]
        name: String,
        /// Comma-separated features, e.g. apigate.discover,apigate.schema,billing.*
        #[arg(long, value_delimiter = ',')]
        features: Vec<String>,
        /// Comma-separated role names (roles must exist)
        #[arg(long, value_delimiter = ',')]
        roles: Vec<String>,
        /// Sessions over this key may only call GET, HEAD and OPTIONS
        #[arg(long)]
        read_only: bool,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// List server keys (never their secrets)
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Revoke a server key by id or public id; running servers refuse it at once
    Revoke {
        /// The key's id (UUID) or public id (the 8 characters after `agk_`)
        id: String,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
}

/// `apigate sessions …`
#[derive(Debug, Clone, Args)]
pub struct SessionsArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(subcommand)]
    pub command: SessionsCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum SessionsCommand {
    /// Create a session for a user; the token is printed once and never again
    Create {
        /// The user the agent acts for (your backend's user id)
        #[arg(long)]
        user: String,
        /// The user's tenant, recorded with every call
        #[arg(long)]
        tenant: Option<String>,
        /// The user's organization
        #[arg(long)]
        organization: Option<String>,
        /// Comma-separated role names (roles must exist)
        #[arg(long, value_delimiter = ',')]
        roles: Vec<String>,
        /// Comma-separated features
        #[arg(long, value_delimiter = ',')]
        features: Vec<String>,
        /// The session may only execute GET, HEAD and OPTIONS operations
        #[arg(long)]
        read_only: bool,
        /// Lifetime in minutes (default 120, at most 43200 = 30 days)
        #[arg(long)]
        ttl_minutes: Option<u32>,
        /// An upstream header the session's calls send, "Name: value" (repeatable; e.g. the
        /// user's own API token). Stored encrypted (needs APIGATE_SECRET_KEY or
        /// --secret-key-file); replaces a server-wide --upstream-header of the same name
        #[arg(long = "upstream-header", value_name = "NAME: VALUE")]
        upstream_headers: Vec<HeaderArg>,
        /// The API (an [[api]] name of the config file) the --upstream-headers are for: sent on
        /// calls to that API only. Required when the server serves several APIs; with one, the
        /// headers go to it
        #[arg(long, value_name = "NAME", requires = "upstream_headers")]
        api: Option<String>,
        /// The key that seals --upstream-header values (the server's): only a session with
        /// upstream headers needs it
        #[command(flatten)]
        secret_key: super::args::SecretKeyArgs,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// List sessions, newest first: who each is for, its features and status (never tokens)
    List {
        /// Only this user's sessions
        #[arg(long)]
        user: Option<String>,
        /// Revoked and expired sessions too (default: active ones only)
        #[arg(long)]
        all: bool,
        /// Rows per page (1 to 1000)
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// Continue after a previous page (the cursor it printed)
        #[arg(long)]
        cursor: Option<String>,
        /// Print JSON ({"sessions": [...], "nextCursor": ..., "oauthUsers": [...]}) instead of a
        /// table. People signed in with a bearer token follow the first page
        #[arg(long)]
        json: bool,
    },
    /// Revoke a session by token (sess_…) or id
    Revoke {
        /// The session token (sess_…) or the session id (UUID)
        #[arg(value_name = "TOKEN|ID")]
        token_or_id: String,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
}

/// `apigate roles …`
#[derive(Debug, Clone, Args)]
pub struct RolesArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(subcommand)]
    pub command: RolesCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum RolesCommand {
    /// Create or replace a role's features (`--features ""` empties it)
    Set {
        /// The role's name (letters, digits, `._:-`)
        name: String,
        /// Comma-separated features the role grants, e.g. apigate.discover,billing.*
        #[arg(long, value_delimiter = ',', required = true)]
        features: Vec<String>,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// List roles
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
}

/// `apigate audit`
#[derive(Debug, Clone, Args)]
pub struct AuditArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Only calls since this long ago (30m, 1h, 7d) or since a time (RFC 3339)
    #[arg(long, value_parser = parse_since)]
    pub since: Option<DateTime<Utc>>,
    /// Only this user's calls
    #[arg(long)]
    pub user: Option<String>,
    /// Only this tool's calls (api_discover, api_schema, api_execute), or `admin` for admin
    /// actions (keys, sessions and roles created, revoked or changed)
    #[arg(long)]
    pub tool: Option<String>,
    /// Only this session's calls (its id)
    #[arg(long)]
    pub session: Option<uuid::Uuid>,
    /// Rows per page (1 to 1000)
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
    /// Continue with older rows (the cursor a previous page printed)
    #[arg(long)]
    pub cursor: Option<String>,
    /// Print JSON ({"entries": [...], "nextCursor": ...}) instead of a table
    #[arg(long)]
    pub json: bool,
}

/// `1h`, `30m`, `7d` ago, or an RFC 3339 time.
fn parse_since(s: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s.trim()) {
        return Ok(t.with_timezone(&Utc));
    }
    let d = crate::types::duration::parse_duration(s).map_err(|e| {
        format!("{e}; --since takes a duration (30m, 1h, 7d) or a time (2026-11-24T09:00:00Z)")
    })?;
    let d = chrono::Duration::from_std(d).map_err(|_| format!("{s:?} is too long ago"))?;
    Utc::now()
        .checked_sub_signed(d)
        .ok_or_else(|| format!("{s:?} is too long ago"))
}

/// Applies the embedded migrations.
pub async fn run_migrate(args: MigrateArgs) -> anyhow::Result<()> {
    let store = args.db.store().await?;
    store.migrate().await?;
    super::print(&format!(
        "migrations applied to {}\n",
        describe_target(args.db.url()?)
    ))?;
    Ok(())
}

pub(crate) async fn run_keys(args: KeysArgs) -> anyhow::Result<()> {
    let admin = Admin::new(args.db.store().await?);
    super::print(&keys(&admin, args.command).await?)?;
    Ok(())
}

pub(crate) async fn run_sessions(args: SessionsArgs) -> anyhow::Result<()> {
    // Only `create` seals anything (a session's upstream headers).
    let keys = match &args.command {
        SessionsCommand::Create { secret_key, .. } => secret_key.load()?,
        _ => None,
    };
    let admin = Admin::new(args.db.store().await?).with_secret_keys(keys);
    super::print(&sessions(&admin, args.command).await?)?;
    Ok(())
}

pub(crate) async fn run_audit(args: AuditArgs) -> anyhow::Result<()> {
    let admin = Admin::new(args.db.store().await?);
    super::print(&audit(&admin, args).await?)?;
    Ok(())
}

pub(crate) async fn run_roles(args: RolesArgs) -> anyhow::Result<()> {
    let admin = Admin::new(args.db.store().await?);
    super::print(&roles(&admin, args.command).await?)?;
    Ok(())
}

const CREATED_BY: &str = "cli";

/// Runs a `keys` command and returns what it prints.
pub async fn keys(admin: &Admin, cmd: KeysCommand) -> anyhow::Result<String> {
    match cmd {
        KeysCommand::Create {
            name,
            features,
            roles,
            read_only,
            json,
        } => {
            let k = admin
                .create_key(NewKey {
                    name,
                    features,
                    roles,
                    read_only,
                    created_by: Some(CREATED_BY.into()),
                })
                .await
                .context("cannot create the key")?;
            shown(json, &k, |k| {
                created(
                    format!(
                        "Created server key {:?} (id {}, public id {}).",
                        k.name, k.id, k.public_id
                    ),
                    "Key — shown only now, store it safely:",
                    &k.key,
                    &[
                        ("features", list_or_dash(&k.features)),
                        ("roles", list_or_dash(&k.roles)),
                        ("read-only", k.read_only.to_string()),
                    ],
                )
            })
        }
        KeysCommand::List { json } => {
            let keys = admin.list_keys().await.context("cannot list keys")?;
            shown(json, &keys, |keys| keys_table(keys))
        }
        KeysCommand::Revoke { id, json } => {
            let r = admin
                .revoke_key(&id)
                .await
                .context("cannot revoke the key")?;
            shown(json, &r, |r| {
                format!("Revoked server key {} at {}.\n", r.id, r.revoked_at)
            })
        }
    }
}

/// Why `sessions create` without `--features` or `--roles` is refused, and the command that
/// works: such a session could call no tool at all (every tool needs a feature, and a call's
/// features are the key's intersected with the session's).
fn no_grants(user: &str, served: &[String]) -> String {
    let user = if user
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
    {
        user.to_string()
    } else {
        format!("'{}'", user.replace('\'', "'\\''"))
    };
    format!(
        "a session with no --features and no --roles could call no tool (every tool needs a \
         feature, e.g. apigate.discover); say what the user may do, for example:\n  \
         apigate sessions create --user {user} --features {features}\n\
         (add the API's own features, e.g. billing.*, or --roles NAME from `apigate roles list`)",
        features = crate::apis::features_for(served)
    )
}

/// Runs a `sessions` command and returns what it prints.
pub async fn sessions(admin: &Admin, cmd: SessionsCommand) -> anyhow::Result<String> {
    match cmd {
        SessionsCommand::Create {
            user,
            tenant,
            organization,
            roles,
            features,
            read_only,
            ttl_minutes,
            upstream_headers,
            api,
            json,
            secret_key: _,
        } => {
            let blank = |list: &[String]| list.iter().all(|v| v.trim().is_empty());
            if blank(&features) && blank(&roles) {
                let served = admin.served_api_names().await.unwrap_or_default();
                anyhow::bail!("{}", no_grants(&user, &served));
            }
            let upstream = match upstream_headers.is_empty() {
                true => Vec::new(),
                false => vec![UpstreamInput::from_args(api, &upstream_headers)],
            };
            let s = admin
                .create_session(NewSession {
                    user_id: user,
                    tenant_id: tenant,
                    organization_id: organization,
                    roles,
                    features,
                    read_only,
                    ttl_minutes,
                    upstream,
                    created_by: Some(CREATED_BY.into()),
                })
                .await
                .context("cannot create the session")?;
            shown(json, &s, |s| {
                created(
                    format!(
                        "Created session {} for user {:?}, expires {}.",
                        s.id, s.user_id, s.expires_at
                    ),
                    "Token — shown only now:",
                    &s.token,
                    &[
                        ("features", list_or_dash(&s.features)),
                        ("roles", list_or_dash(&s.roles)),
                        ("read-only", s.read_only.to_string()),
                        ("upstream headers", list_or_dash(&s.upstream_headers)),
                        ("for the API", list_or_dash(&s.upstream_apis)),
                    ],
                )
            })
        }
        SessionsCommand::List {
            user,
            all,
            limit,
            cursor,
            json,
        } => {
            let first = cursor.is_none();
            let page = admin
                .list_sessions(&SessionQuery {
                    user: user.clone(),
                    all,
                    limit: Some(limit),
                    cursor,
                })
                .await
                .context("cannot list sessions")?;
            // People signed in with a bearer token are sessions too (without a row of their
            // own): shown after the first page.
            let people = match first {
                true => Some(
                    admin
                        .list_oauth_users(&OAuthUserQuery {
                            subject: user,
                            limit: Some(limit),
                            cursor: None,
                        })
                        .await
                        .context("cannot list signed-in people")?,
                ),
                false => None,
            };
            match (json, people) {
                (true, Some(people)) => {
                    let mut v = serde_json::to_value(&page)?;
                    v["oauthUsers"] = serde_json::to_value(&people.users)?;
                    Ok(format!("{}\n", serde_json::to_string_pretty(&v)?))
                }
                (false, Some(people)) if !people.users.is_empty() => Ok(format!(
                    "{}\nSigned in with a bearer token (apigate oauth users list):\n{}",
                    sessions_table(&page),
                    print::oauth_users_table(&people)
                )),
                (json, _) => shown(json, &page, sessions_table),
            }
        }
        SessionsCommand::Revoke { token_or_id, json } => {
            let which = SessionRef::parse(&token_or_id)?;
            let r = admin
                .revoke_session(&which)
                .await
                .context("cannot revoke the session")?;
            shown(json, &r, |r| {
                format!("Revoked session {} at {}.\n", r.id, r.revoked_at)
            })
        }
    }
}

/// Runs `apigate audit` and returns what it prints.
pub async fn audit(admin: &Admin, args: AuditArgs) -> anyhow::Result<String> {
    let page: AuditPage = admin
        .audit(&AuditQuery {
            since: args.since,
            user: args.user,
            tool: args.tool,
            session: args.session,
            limit: Some(args.limit),
            cursor: args.cursor,
        })
        .await
        .context("cannot read the audit log")?;
    shown(args.json, &page, audit_table)
}

/// Runs a `roles` command and returns what it prints.
pub async fn roles(admin: &Admin, cmd: RolesCommand) -> anyhow::Result<String> {
    match cmd {
        RolesCommand::Set {
            name,
            features,
            json,
        } => {
            let r = admin
                .set_role(&name, &features)
                .await
                .context("cannot set the role")?;
            shown(json, &r, |r| {
                format!("Role {:?}: {}\n", r.name, list_or_dash(&r.features))
            })
        }
        RolesCommand::List { json } => {
            let roles = admin.list_roles().await.context("cannot list roles")?;
            shown(json, &roles, |roles| roles_table(roles))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        command: Cmd,
    }

    #[derive(Subcommand, Debug)]
    enum Cmd {
        Migrate(MigrateArgs),
        Keys(KeysArgs),
        Sessions(SessionsArgs),
        Roles(RolesArgs),
    }

    fn parse(args: &[&str]) -> Cmd {
        let mut full = vec!["apigate"];
        full.extend(args);
        full.extend(["--database-url", "postgres://x@h/db"]);
        match Cli::try_parse_from(full) {
            Ok(c) => c.command,
            Err(e) => panic!("{args:?}: {e}"),
        }
    }

    #[test]
    fn the_documented_command_lines_parse() {
        match parse(&[
            "keys",
            "create",
            "--name",
            "ci",
            "--features",
            "a.b,c.*",
            "--roles",
            "r1,r2",
            "--read-only",
            "--json",
        ]) {
            Cmd::Keys(KeysArgs {
                command:
                    KeysCommand::Create {
                        name,
                        features,
                        roles,
                        read_only,
                        json,
                    },
                ..
            }) => {
                assert_eq!(name, "ci");
                assert_eq!(features, ["a.b", "c.*"]);
                assert_eq!(roles, ["r1", "r2"]);
                assert!(read_only && json);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse(&["keys", "list", "--json"]), Cmd::Keys(_)));
        assert!(matches!(parse(&["keys", "revoke", "abc"]), Cmd::Keys(_)));
        match parse(&[
            "sessions",
            "create",
            "--user",
            "u1",
            "--tenant",
            "t",
            "--organization",
            "o",
            "--roles",
            "r",
            "--features",
            "f",
            "--read-only",
            "--ttl-minutes",
            "30",
            "--json",
        ]) {
            Cmd::Sessions(SessionsArgs {
                command:
                    SessionsCommand::Create {
                        user,
                        tenant,
                        organization,
                        ttl_minutes,
                        read_only,
                        ..
                    },
                ..
            }) => {
                assert_eq!(user, "u1");
                assert_eq!(tenant.as_deref(), Some("t"));
                assert_eq!(organization.as_deref(), Some("o"));
                assert_eq!(ttl_minutes, Some(30));
                assert!(read_only);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(&["sessions", "revoke", "sess_x"]),
            Cmd::Sessions(_)
        ));
        match parse(&["roles", "set", "viewer", "--features", "a,b"]) {
            Cmd::Roles(RolesArgs {
                command: RolesCommand::Set { name, features, .. },
                ..
            }) => {
                assert_eq!(name, "viewer");
                assert_eq!(features, ["a", "b"]);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse(&["roles", "list"]), Cmd::Roles(_)));
        assert!(matches!(parse(&["migrate"]), Cmd::Migrate(_)));
    }
}
