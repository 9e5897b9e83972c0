//! apigate: an MCP server that turns any OpenAPI document into three meta-tools
//! (`api_discover`, `api_schema`, `api_execute`). See `docs/design.md` for the
//! architecture; each module's own docs say what it owns and what it may import.

pub mod auth;
pub mod cli;
pub mod http;
pub mod identity;
pub mod index;
pub mod mcp;
pub mod monitor;
pub mod spec;
pub mod store;
pub mod tools;
pub mod upstream;
