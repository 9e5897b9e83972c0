//! The one integration-test binary (ripgrep's `autotests = false` pattern): each module is a
//! suite that drives apigate through its real parts.

mod admin_http;
mod agent_tasks;
mod attacks;
mod auth;
mod binary_in;
mod binary_out;
mod cli_admin;
mod conform;
mod db;
mod dense;
mod drain;
mod faults;
mod first_hour;
mod five_apis;
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
mod paging;
/// The example upstream (`cargo run --example petstore-upstream`), its `app` served by the
/// tests as it is by the example.
#[allow(dead_code)]
#[path = "../../examples/petstore-upstream.rs"]
mod petstore_upstream;
mod pg_cluster;
mod production;
mod readme;
mod real_bodies;
mod reload;
mod replicas;
mod responses;
mod scheme_credentials;
mod session_credentials;
mod several;
mod shared_limits;
mod signin;
mod signin_users;
mod spec;
mod step_up;
mod support;
mod tasks;
mod typed_args;
mod upstream;
