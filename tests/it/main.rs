//! One integration test binary; each file is a module.

mod auth;
mod db;
