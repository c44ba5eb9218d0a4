//! capdeck: a terminal operations console and an embedded reconcile engine for SAP CAP Operator
//! workloads on Kubernetes. The binary is thin; everything lives here.
// No function in src/ is longer than 150 lines (clippy.toml); the tests under tests/ may be.
#![deny(clippy::too_many_lines)]

pub mod actions;
pub mod bench;
pub mod cli;
pub mod cluster;
pub mod commands;
pub mod console;
pub mod daemon;
pub mod demo;
pub mod engine;
pub mod fleet;
pub mod freezes;
pub mod judging;
pub mod leadership;
pub mod logging;
pub mod process;
pub mod readmodel;

// The pure core and the embedded API server are crates of their own (crates/core,
// crates/sandbox); their modules keep their paths here.
pub use capdeck_core::{api, credentials, deps, lookup, manifest, output, plan, safe_eprintln, vcap};
pub use capdeck_sandbox as sandbox;
