//! The one integration-test binary.

mod admin_http;
mod auth;
mod cli_admin;
mod db;
mod monitor;
mod monitor_browser;
mod spec;
mod upstream;
