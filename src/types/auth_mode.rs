//! [`AuthMode`]: which credentials open the server (`--auth`, `[oauth] auth`).

/// Which credentials open the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// Server keys only (`x-api-key`), as without OAuth.
    Keys,
    /// Bearer tokens only.
    #[value(name = "oauth")]
    #[serde(rename = "oauth")]
    OAuth,
    /// Either; a request with both gets what the key and the token both grant.
    Both,
}

impl AuthMode {
    /// As the flag and the config file write it.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMode::Keys => "keys",
            AuthMode::OAuth => "oauth",
            AuthMode::Both => "both",
        }
    }
}
