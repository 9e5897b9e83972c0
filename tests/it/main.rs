//! The one integration-test binary.

mod monitor;
mod monitor_browser;
mod spec;
mod upstream;
