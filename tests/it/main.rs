//! One integration test binary; each file is a module.

mod admin_http;
mod auth;
mod cli_admin;
mod db;
