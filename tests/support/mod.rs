//! Shared test support: starting the real server in-process on ephemeral ports, HTTPS
//! clients that trust its development CA, and the recorded apiserver fixtures.
#![allow(dead_code)]

pub mod apiserver;
pub mod cluster;
pub mod controller;
pub mod envtest;
pub mod fixtures;
pub mod tls;
pub mod webhook;
