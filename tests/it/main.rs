//! The one integration-test binary (ripgrep's `autotests = false` pattern): each module is a
//! suite that drives apigate through its real parts.

mod spec;
