//! Ranking operations for a natural-language query: the tantivy index, query building and
//! filters. Imports `spec` only; never axum, rmcp or sqlx.
