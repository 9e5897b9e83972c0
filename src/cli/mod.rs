//! clap commands; each calls core functions and prints a table or `--json`.

pub mod admin;
