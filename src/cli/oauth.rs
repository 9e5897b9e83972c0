//! `serve`'s OAuth flags (apigate as a protected resource: bearer tokens from the company's
//! identity provider are user sessions) and `apigate oauth check`, which shows an operator
//! what a token from an issuer would map to before anyone signs in.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::ExitCode;

use crate::auth::oauth::{AuthMode, OAuthSettings, ResourceServer};
use crate::http::OAuthGate;

/// The OAuth flags of `serve`.
#[derive(Debug, Clone, Default, clap::Args)]
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
    /// The claim read as the user's tenant.
    #[arg(
        long = "oauth-tenant-claim",
        value_name = "CLAIM",
        default_value = "tenant"
    )]
    pub tenant_claim: String,
    /// The claim read as the user's organization.
    #[arg(
        long = "oauth-organization-claim",
        value_name = "CLAIM",
        default_value = "org"
    )]
    pub organization_claim: String,
    /// The claim read as the user's roles (an array or a space-separated string).
    #[arg(
        long = "oauth-roles-claim",
        value_name = "CLAIM",
        default_value = "roles"
    )]
    pub roles_claim: String,
    /// Which credentials open the server: keys (x-api-key, then a session token per call),
    /// oauth (bearer tokens only) or both. Default: keys without an issuer, both with one.
    #[arg(long = "auth", value_name = "MODE", value_parser = ["keys", "oauth", "both"])]
    pub auth: Option<String>,
}

impl SignInArgs {
    /// The settings the flags give, for a server listening at `listen`; `None` without an
    /// issuer.
    pub fn settings(&self, listen: SocketAddr) -> anyhow::Result<Option<OAuthSettings>> {
        if self.issuers.is_empty() {
            if self.auth.as_deref().is_some_and(|m| m != "keys") {
                anyhow::bail!(
                    "--auth {} needs --oauth-issuer",
                    self.auth.as_deref().unwrap_or_default()
                );
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
            scopes = OAuthSettings::default_scopes();
        }
        let audience = match &self.audience {
            Some(a) => {
                url::Url::parse(a).map_err(|e| anyhow::anyhow!("--oauth-audience {a:?}: {e}"))?;
                a.clone()
            }
            None => format!("http://{listen}/mcp"),
        };
        Ok(Some(OAuthSettings {
            issuers,
            audience,
            scopes,
            tenant_claim: self.tenant_claim.clone(),
            organization_claim: self.organization_claim.clone(),
            roles_claim: self.roles_claim.clone(),
        }))
    }

    /// The gate `serve` puts in front of `/mcp`: the issuers' keys fetched now.
    pub async fn gate(&self, listen: SocketAddr) -> anyhow::Result<Option<OAuthGate>> {
        let Some(settings) = self.settings(listen)? else {
            return Ok(None);
        };
        let mode: AuthMode = self
            .auth
            .as_deref()
            .unwrap_or("both")
            .parse()
            .map_err(|e: String| anyhow::anyhow!("--auth {e}"))?;
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

/// `apigate oauth …`.
#[derive(Debug, clap::Args)]
pub struct OAuthCommand {
    #[command(subcommand)]
    pub command: OAuthSub,
}

#[derive(Debug, clap::Subcommand)]
pub enum OAuthSub {
    /// Fetch an issuer's metadata and keys, and print what its tokens would map to.
    Check(CheckArgs),
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub oauth: SignInArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(command: OAuthCommand) -> anyhow::Result<ExitCode> {
    let OAuthSub::Check(args) = command.command;
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
