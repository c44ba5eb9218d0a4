//! The sandbox world: the engine, the console, the CLI and the daemon over capdeck's embedded
//! API server (in process or over HTTP), with paused or wall-clock time — plus the pure
//! property tests of the VCAP format. One test binary (one link of the crate) for all of them;
//! `cargo test --test sandbox` runs them, `cargo test --test sandbox engine::` one module.

#[allow(unused_imports, unused_macros)]
#[macro_use]
mod common;

#[path = "sandbox/bad_input.rs"]
mod bad_input;
#[path = "sandbox/bounded_input.rs"]
mod bounded_input;
#[path = "sandbox/chart.rs"]
mod chart;
#[path = "sandbox/cli_batches.rs"]
mod cli_batches;
#[path = "sandbox/cli_credentials.rs"]
mod cli_credentials;
#[path = "sandbox/cli_deps.rs"]
mod cli_deps;
#[path = "sandbox/cli_freeze.rs"]
mod cli_freeze;
#[path = "sandbox/cli_plan.rs"]
mod cli_plan;
#[path = "sandbox/cli_sandbox.rs"]
mod cli_sandbox;
#[path = "sandbox/cli_windows.rs"]
mod cli_windows;
#[path = "sandbox/console_runtime.rs"]
mod console_runtime;
#[path = "sandbox/console_views.rs"]
mod console_views;
#[path = "sandbox/crds.rs"]
mod crds;
#[path = "sandbox/daemon.rs"]
mod daemon;
#[path = "sandbox/engine.rs"]
mod engine;
#[path = "sandbox/faults.rs"]
mod faults;
#[path = "sandbox/fuzz_props.rs"]
mod fuzz_props;
#[path = "sandbox/gojson_oracle.rs"]
mod gojson_oracle;
#[path = "sandbox/gojson_props.rs"]
mod gojson_props;
#[path = "sandbox/hostile_output.rs"]
mod hostile_output;
#[path = "sandbox/nothing_hangs.rs"]
mod nothing_hangs;
#[path = "sandbox/promises.rs"]
mod promises;
#[path = "sandbox/rotation_invariants.rs"]
mod rotation_invariants;
#[path = "sandbox/sandbox_api.rs"]
mod sandbox_api;
#[path = "sandbox/sandbox_gaps.rs"]
mod sandbox_gaps;
#[path = "sandbox/security.rs"]
mod security;
#[path = "sandbox/small_breaks.rs"]
mod small_breaks;
