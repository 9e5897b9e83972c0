//! `apigate signing-key create`, and the `--identity-header` flags of `serve` and `dev`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;

use crate::auth::identity::{Identity, create_key_file};

/// Signed identity assertions: the flags `serve` and `dev` share.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = super::help::heading::IDENTITY)]
pub struct IdentityArgs {
    /// Add a signed identity assertion (a 60-second EdDSA JWT naming the user, tenant,
    /// organization, the agent's key and the request) to every upstream call, in this header
    /// (e.g. X-Apigate-Identity; in Authorization it is sent as `Bearer <jwt>`). Needs
    /// --signing-key. See docs/identity.md.
    #[arg(long, value_name = "NAME", requires = "signing_keys")]
    pub identity_header: Option<String>,
    /// An Ed25519 private key (PKCS#8 PEM, from `apigate signing-key create`). Repeatable: the
    /// first signs, all are published at /.well-known/jwks.json (rotation: add the new key
    /// second, then first, then remove the old one).
    #[arg(
        long = "signing-key",
        value_name = "FILE",
        requires = "identity_header"
    )]
    pub signing_keys: Vec<PathBuf>,
    /// The assertion's `iss` (default: the server's URL, http://LISTEN; set it to the public
    /// URL behind a proxy).
    #[arg(long, value_name = "URL", requires = "identity_header")]
    pub identity_issuer: Option<String>,
}

impl IdentityArgs {
    /// The configured assertion, if any; `server_url` is the default issuer.
    pub fn build(&self, server_url: &str) -> anyhow::Result<Option<Arc<Identity>>> {
        let Some(header) = &self.identity_header else {
            return Ok(None);
        };
        let issuer = self.identity_issuer.as_deref().unwrap_or(server_url);
        let identity = Identity::new(header, issuer, &self.signing_keys)
            .context("setting up the identity assertion")?;
        tracing::info!(
            header = %identity.header(),
            issuer = identity.issuer(),
            kid = identity.signing_kid(),
            published = self.signing_keys.len(),
            "every upstream call carries a signed identity assertion; public keys at /.well-known/jwks.json"
        );
        Ok(Some(Arc::new(identity)))
    }
}

#[derive(Debug, clap::Args)]
pub struct SigningKeyArgs {
    #[command(subcommand)]
    pub command: SigningKeyCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum SigningKeyCommand {
    /// Make a new Ed25519 signing key for identity assertions (PKCS#8 PEM, mode 0600; an
    /// existing file is never replaced) and print its kid.
    Create(CreateArgs),
}

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// Where to write the private key.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Print `{"kid", "file", "jwk"}` as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: SigningKeyArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        SigningKeyCommand::Create(a) => {
            let key = create_key_file(&a.out)?;
            let text = if a.json {
                let v = serde_json::json!({
                    "kid": key.kid(),
                    "file": a.out.display().to_string(),
                    "jwk": key.jwk(),
                });
                format!("{v}\n")
            } else {
                format!(
                    "wrote {} (kid {}); start apigate with --identity-header NAME --signing-key {}\n",
                    a.out.display(),
                    key.kid(),
                    a.out.display()
                )
            };
            super::print(&text)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
