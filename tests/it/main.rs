//! The one integration-test binary (ripgrep's `autotests = false` pattern): each module is a
//! suite that drives apigate through its real parts.

mod admin_http;
mod attacks;
mod auth;
mod binary_in;
mod binary_out;
mod cli_admin;
mod conform;
mod db;
mod dense;
mod faults;
mod fixture_api;
mod fuzz;
mod identity;
mod index;
mod mcp;
mod monitor;
mod monitor_browser;
mod monitor_e2e;
mod oauth;
mod operator;
mod pg_cluster;
mod production;
mod reload;
mod responses;
mod scheme_credentials;
mod session_credentials;
mod several;
mod signin;
mod signin_users;
mod spec;
mod step_up;
mod support;
mod tasks;
mod typed_args;
mod upstream;
