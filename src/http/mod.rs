//! Thin axum adapter: `/mcp`, legacy `/sse` + `/message`, `/health`, `/metrics`, `/admin/v1/*`,
//! and the middleware in front of them.

pub mod admin;
