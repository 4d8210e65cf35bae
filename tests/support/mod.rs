//! Shared test support: starting the real server in-process on ephemeral ports, HTTPS
//! clients that trust its development CA, and the recorded apiserver fixtures.
// Each test binary compiles this tree and uses a part of it, so rustc would call every helper
// that one binary does not use dead. Helpers that NO test uses are found by
// hack/unused-test-support.sh, which builds every target without this allow.
#![cfg_attr(not(nm_unused_support), allow(dead_code))]

pub mod apiserver;
pub mod cli;
pub mod cluster;
pub mod controller;
pub mod envtest;
pub mod fixtures;
pub mod prometheus;
pub mod tls;
pub mod webhook;
