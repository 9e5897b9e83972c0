//! `serve`'s OAuth flags (apigate as a protected resource: bearer tokens from the company's
//! identity provider are user sessions) and `apigate oauth check`, which shows an operator
//! what a token from an issuer would map to before anyone signs in; `apigate oauth users` (in
//! `admin/users.rs`) lists who signed in and stores their upstream credentials.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::ExitCode;

use crate::apis::config::SignInFile;
use crate::auth::oauth::{IntrospectionSettings, OAuthSettings, ResourceServer};
use crate::types::AuthMode;

/// Where the introspection client's secret is read from.
const INTROSPECTION_SECRET_ENV: &str = "APIGATE_OAUTH_INTROSPECTION_SECRET";
use crate::http::OAuthGate;

/// The OAuth flags of `serve`.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = super::help::heading::SIGN_IN)]
pub struct SignInArgs {
    /// Accept bearer tokens from this issuer (its `iss`; repeatable). Its keys come from its
    /// metadata (RFC 8414 or OpenID discovery) unless --oauth-jwks-url says.
    #[arg(
        long = "oauth-issuer",
        value_name = "URL",
        env = "APIGATE_OAUTH_ISSUER",
        value_delimiter = ','
    )]
    pub issuers: Vec<String>,
    /// This server's resource identifier, which tokens must name in `aud` (RFC 8707); also
    /// where clients learn to sign in. Default: the server's /mcp URL (http://LISTEN/mcp); set
    /// the public URL behind a proxy.
    #[arg(
        long = "oauth-audience",
        value_name = "URL",
        env = "APIGATE_OAUTH_AUDIENCE"
    )]
    pub audience: Option<String>,
    /// The issuer's JWK set URL, when its metadata does not give it (one issuer only).
    #[arg(long = "oauth-jwks-url", value_name = "URL")]
    pub jwks_url: Option<String>,
    /// What a scope grants: SCOPE=feature,feature (repeatable). Without any:
    /// apigate:read=apigate.discover,apigate.schema; apigate:write=the same and
    /// apigate.execute; apigate:admin=apigate.admin.
    #[arg(long = "oauth-scope-features", value_name = "SCOPE=FEATURES")]
    pub scope_features: Vec<String>,
    /// The claim read as the user's tenant (default: tenant).
    #[arg(long = "oauth-tenant-claim", value_name = "CLAIM")]
    pub tenant_claim: Option<String>,
    /// The claim read as the user's organization (default: org).
    #[arg(long = "oauth-organization-claim", value_name = "CLAIM")]
    pub organization_claim: Option<String>,
    /// The claim read as the user's roles, an array or a space-separated string (default: roles).
    #[arg(long = "oauth-roles-claim", value_name = "CLAIM")]
    pub roles_claim: Option<String>,
    /// Which credentials open the server: keys (x-api-key, then a session token per call),
    /// oauth (bearer tokens only) or both. Default: keys without an issuer, both with one.
    #[arg(long = "auth", value_name = "MODE", value_enum)]
    pub auth: Option<AuthMode>,
    /// Check opaque (non-JWT) tokens by asking the issuer (RFC 7662 token introspection) at
    /// this URL, as the client --oauth-introspection-client-id whose secret is in
    /// APIGATE_OAUTH_INTROSPECTION_SECRET or --oauth-introspection-secret-file.
    #[arg(long = "oauth-introspection-url", value_name = "URL")]
    pub introspection_url: Option<String>,
    /// The client apigate introspects as (HTTP Basic; a confidential client of the issuer).
    #[arg(long = "oauth-introspection-client-id", value_name = "ID")]
    pub introspection_client_id: Option<String>,
    /// A file holding the introspection client's secret (one line).
    #[arg(long = "oauth-introspection-secret-file", value_name = "FILE")]
    pub introspection_secret_file: Option<std::path::PathBuf>,
    /// `[oauth.scopes]` of the config file, used when no --oauth-scope-features is given.
    #[arg(skip)]
    pub file_scopes: BTreeMap<String, Vec<String>>,
}

impl SignInArgs {
    /// These flags over the config file's `[oauth]` table: a flag given wins.
    pub fn over(mut self, file: SignInFile) -> SignInArgs {
        if self.issuers.is_empty() {
            self.issuers = file.issuers;
        }
        self.audience = self.audience.or(file.audience);
        self.jwks_url = self.jwks_url.or(file.jwks_url);
        self.tenant_claim = self.tenant_claim.or(file.tenant_claim);
        self.organization_claim = self.organization_claim.or(file.organization_claim);
        self.roles_claim = self.roles_claim.or(file.roles_claim);
        self.auth = self.auth.or(file.auth);
        self.introspection_url = self.introspection_url.or(file.introspection_url);
        self.introspection_client_id = self
            .introspection_client_id
            .or(file.introspection_client_id);
        self.file_scopes = file.scopes;
        self
    }

    /// The settings the flags give, for a server listening at `listen`; `None` without an
    /// issuer.
    pub fn settings(&self, listen: SocketAddr) -> anyhow::Result<Option<OAuthSettings>> {
        if self.issuers.is_empty() {
            if let Some(mode) = self.auth.filter(|&m| m != AuthMode::Keys) {
                anyhow::bail!("--auth {} needs --oauth-issuer", mode.as_str());
            }
            return Ok(None);
        }
        if self.jwks_url.is_some() && self.issuers.len() > 1 {
            anyhow::bail!(
                "--oauth-jwks-url goes with one --oauth-issuer; several issuers publish their own"
            );
        }
        let mut issuers = Vec::new();
        for issuer in &self.issuers {
            let url = url::Url::parse(issuer)
                .map_err(|e| anyhow::anyhow!("--oauth-issuer {issuer:?}: {e}"))?;
            if !matches!(url.scheme(), "https" | "http") || url.query().is_some() {
                anyhow::bail!("--oauth-issuer {issuer:?}: an http(s) URL without a query");
            }
            let jwks = match &self.jwks_url {
                Some(j) => {
                    Some(url::Url::parse(j).map_err(|e| anyhow::anyhow!("--oauth-jwks-url: {e}"))?)
                }
                None => None,
            };
            issuers.push((issuer.trim_end_matches('/').to_string(), jwks));
        }
        let mut scopes = BTreeMap::new();
        for text in &self.scope_features {
            let (scope, features) = OAuthSettings::parse_scope(text)
                .map_err(|e| anyhow::anyhow!("--oauth-scope-features {e}"))?;
            scopes.insert(scope, features);
        }
        if scopes.is_empty() {
            for (scope, features) in &self.file_scopes {
                let (scope, features) =
                    OAuthSettings::scope_entry(scope, features.iter().map(String::as_str))
                        .map_err(|e| anyhow::anyhow!("[oauth.scopes] {scope:?}: {e}"))?;
                scopes.insert(scope, features);
            }
        }
        if scopes.is_empty() {
            scopes = OAuthSettings::default_scopes();
        }
        let audience = match &self.audience {
            Some(a) => {
                url::Url::parse(a).map_err(|e| anyhow::anyhow!("--oauth-audience {a:?}: {e}"))?;
                a.clone()
            }
            None => format!("http://{listen}/mcp"),
        };
        let introspection = self.introspection()?;
        Ok(Some(OAuthSettings {
            issuers,
            audience,
            scopes,
            tenant_claim: claim(&self.tenant_claim, "tenant"),
            organization_claim: claim(&self.organization_claim, "org"),
            roles_claim: claim(&self.roles_claim, "roles"),
            introspection,
        }))
    }

    /// Where and as whom opaque tokens are introspected; `None` without a URL.
    fn introspection(&self) -> anyhow::Result<Option<IntrospectionSettings>> {
        let Some(url) = &self.introspection_url else {
            return Ok(None);
        };
        let url = url::Url::parse(url)
            .map_err(|e| anyhow::anyhow!("--oauth-introspection-url {url:?}: {e}"))?;
        if !matches!(url.scheme(), "https" | "http") {
            anyhow::bail!("--oauth-introspection-url: an http(s) URL");
        }
        let Some(client_id) = self.introspection_client_id.clone() else {
            anyhow::bail!("--oauth-introspection-url needs --oauth-introspection-client-id");
        };
        let secret = match &self.introspection_secret_file {
            Some(path) => std::fs::read_to_string(path).map_err(|e| {
                anyhow::anyhow!("--oauth-introspection-secret-file {}: {e}", path.display())
            })?,
            None => std::env::var(INTROSPECTION_SECRET_ENV).map_err(|_| {
                anyhow::anyhow!(
                    "--oauth-introspection-url needs the client's secret: set \
                     {INTROSPECTION_SECRET_ENV} or --oauth-introspection-secret-file"
                )
            })?,
        };
        let secret = secret.trim().to_string();
        if secret.is_empty() {
            anyhow::bail!("the introspection client's secret is empty");
        }
        Ok(Some(IntrospectionSettings {
            url,
            client_id,
            client_secret: std::sync::Arc::new(zeroize::Zeroizing::new(secret)),
        }))
    }

    /// The gate `serve` puts in front of `/mcp`: the issuers' keys fetched now.
    pub async fn gate(&self, listen: SocketAddr) -> anyhow::Result<Option<OAuthGate>> {
        let Some(settings) = self.settings(listen)? else {
            return Ok(None);
        };
        let mode = self.auth.unwrap_or(AuthMode::Both);
        let server = ResourceServer::start(settings).await?;
        let s = server.settings();
        tracing::info!(
            issuers = %s.issuers.iter().map(|(i, _)| i.as_str()).collect::<Vec<_>>().join(", "),
            audience = %s.audience,
            mode = ?mode,
            "bearer tokens from these issuers are user sessions"
        );
        Ok(Some(OAuthGate { server, mode }))
    }
}

fn claim(given: &Option<String>, default: &str) -> String {
    given.clone().unwrap_or_else(|| default.to_string())
}

/// `apigate oauth …`.
#[derive(Debug, clap::Args)]
pub struct OAuthCommand {
    #[command(subcommand)]
    pub command: OAuthSub,
}

#[derive(Debug, clap::Subcommand)]
pub enum OAuthSub {
    /// Fetch an issuer's metadata and keys, and print what its tokens would map to.
    Check(OAuthCheckArgs),
    /// People who signed in with a bearer token, and their own upstream credentials.
    Users(super::admin::UsersArgs),
}

#[derive(Debug, clap::Args)]
pub struct OAuthCheckArgs {
    #[command(flatten)]
    pub oauth: SignInArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(command: OAuthCommand) -> anyhow::Result<ExitCode> {
    let args = match command.command {
        OAuthSub::Check(args) => args,
        OAuthSub::Users(args) => {
            super::admin::run_users(args).await?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    let listen: SocketAddr = ([127, 0, 0, 1], 3001).into();
    let Some(settings) = args.oauth.settings(listen)? else {
        anyhow::bail!("give --oauth-issuer URL");
    };
    let server = ResourceServer::start(settings.clone()).await?;
    let issuers = server.describe();
    let ok = issuers
        .iter()
        .all(|i| i["keys"].as_array().is_some_and(|k| !k.is_empty()));
    let report = serde_json::json!({
        "issuers": issuers,
        "audience": settings.audience,
        "scopes": settings.scopes,
        "claims": {"user": "sub", "tenant": settings.tenant_claim,
            "organization": settings.organization_claim, "roles": settings.roles_claim,
            "client": "client_id, else azp"},
        "metadata": server.metadata(),
        "introspection": settings.introspection.as_ref().map(|i| i.url.as_str()),
    });
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        let mut out = String::new();
        for i in &issuers {
            out += &format!(
                "issuer    {}\njwks      {}\n",
                i["issuer"].as_str().unwrap_or(""),
                i["jwksUrl"].as_str().unwrap_or("(not found)")
            );
            match i["keys"].as_array() {
                Some(keys) if !keys.is_empty() => {
                    for k in keys {
                        out += &format!(
                            "key       {} {}\n",
                            k["kid"].as_str().unwrap_or(""),
                            k["algorithms"]
                        );
                    }
                }
                _ => {
                    out += &format!(
                        "keys      none: {}\n",
                        i["lastError"].as_str().unwrap_or("")
                    )
                }
            }
        }
        out += &format!(
            "audience  {} (tokens must name it in aud)\n",
            settings.audience
        );
        for (scope, features) in &settings.scopes {
            out += &format!("scope     {scope} -> {}\n", features.join(", "));
        }
        out += &format!(
            "claims    user=sub tenant={} organization={} roles={} client=client_id|azp\n",
            settings.tenant_claim, settings.organization_claim, settings.roles_claim
        );
        out
    };
    super::print(&text)?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_the_config_file_and_its_scope_table_is_used() {
        let file = SignInFile {
            issuers: vec!["https://idp.example.com".into()],
            audience: Some("https://apigate.example.com/mcp".into()),
            roles_claim: Some("groups".into()),
            scopes: BTreeMap::from([("team:read".into(), vec!["apigate.discover".into()])]),
            ..SignInFile::default()
        };
        let flags = SignInArgs {
            audience: Some("https://other.example.com/mcp".into()),
            ..SignInArgs::default()
        };
        let listen: SocketAddr = ([127, 0, 0, 1], 3001).into();
        let s = flags.over(file.clone()).settings(listen).unwrap().unwrap();
        assert_eq!(s.issuers[0].0, "https://idp.example.com");
        assert_eq!(s.audience, "https://other.example.com/mcp");
        assert_eq!(s.roles_claim, "groups");
        assert_eq!(s.tenant_claim, "tenant");
        assert_eq!(
            s.scopes,
            BTreeMap::from([("team:read".into(), vec!["apigate.discover".into()])])
        );
        // A file's scope is taken as written, `=` and all.
        let odd = SignInFile {
            issuers: vec!["https://idp.example.com".into()],
            scopes: BTreeMap::from([("api=read".into(), vec![" apigate.discover ".into()])]),
            ..SignInFile::default()
        };
        let s = SignInArgs::default()
            .over(odd)
            .settings(listen)
            .unwrap()
            .unwrap();
        assert_eq!(
            s.scopes,
            BTreeMap::from([("api=read".into(), vec!["apigate.discover".into()])])
        );
        // --oauth-scope-features replaces the file's whole table.
        let flags = SignInArgs {
            scope_features: vec!["x=apigate.schema".into()],
            ..SignInArgs::default()
        };
        let s = flags.over(file).settings(listen).unwrap().unwrap();
        assert_eq!(s.scopes.keys().collect::<Vec<_>>(), ["x"]);
        // Introspection without its client is refused at start-up, and says what is missing.
        let flags = SignInArgs {
            issuers: vec!["https://idp.example.com".into()],
            introspection_url: Some("https://idp.example.com/introspect".into()),
            ..SignInArgs::default()
        };
        let e = flags.settings(listen).unwrap_err().to_string();
        assert!(e.contains("--oauth-introspection-client-id"), "{e}");
    }
}
