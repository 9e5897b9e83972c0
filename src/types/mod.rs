//! The shared words: the types every layer writes and matches, in a leaf any module may use
//! (as meilisearch keeps its one `Code` table where every layer can reach it). The stable
//! codes with their HTTP status and kind ([`Code`]), the three tools with their features
//! ([`Tool`]), where an upstream call's credentials came from ([`CredentialSource`]), which
//! credentials open the server ([`AuthMode`]), and how every duration flag and message is
//! written ([`duration`]). Imports nothing of the crate.

mod auth_mode;
mod code;
mod credential;
pub mod duration;
mod tool;

pub use auth_mode::AuthMode;
pub use code::{Code, Kind};
pub use credential::CredentialSource;
pub use tool::{Tool, UnknownTool};
