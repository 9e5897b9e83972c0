//! See `attacks/mod.rs`.
