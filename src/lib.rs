//! capdeck: a terminal operations console and an embedded reconcile engine for SAP CAP Operator
//! workloads on Kubernetes. The binary is thin; everything lives here.
// No function in src/ is longer than 80 lines (clippy.toml) but table-like code, which says why;
// the unit tests may be.
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

pub mod actions;
#[cfg(feature = "sandbox")]
pub mod bench;
pub mod cli;
pub mod cluster;
pub mod commands;
pub mod console;
pub mod daemon;
#[cfg(feature = "sandbox")]
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
#[cfg(feature = "sandbox")]
pub use capdeck_sandbox as sandbox;
