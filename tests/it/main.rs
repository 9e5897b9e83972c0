//! The one integration-test binary.

mod spec;
mod upstream;
