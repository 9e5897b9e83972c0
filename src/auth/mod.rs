//! Server keys (argon2id), session tokens (SHA-256 digests, TTL), roles and features, the
//! `Principal`, rate limits. Imports `store`; never axum or rmcp.
