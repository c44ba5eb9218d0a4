//! The sandbox world: the engine, the console, the CLI and the daemon over capdeck's embedded
//! API server (in process or over HTTP), with paused or wall-clock time — plus the pure
//! property tests of the VCAP format. One test binary (one link of the crate) for all of them;
//! `cargo test --test sandbox` runs them, `cargo test --test sandbox engine::` one group (one directory
//! under `tests/sandbox/` per group, its parent file says what the group holds).

// Shared with the real_cluster binary, hence the one path attribute.
#[path = "../common/mod.rs"]
#[allow(unused_imports, unused_macros)]
#[macro_use]
mod common;

/// The sandbox API server itself: as kube sees it, its known gaps, the CRDs.
mod api;
/// The chart, rendered and read.
mod chart;
/// The command line, as a user runs it: `capdeck batches` and its actions, `credentials`,
/// `deps`, `freeze`, `plan`, `sandbox`, the windows.
mod cli;
/// The console: its runtime over the sandbox and its views drawn on a test backend.
mod console;
/// The daemon: health, metrics, logs, signals.
mod daemon;
/// The engine: the stories only the sandbox can tell, the fault matrix and the rotation
/// invariants.
mod engine;
/// capdeck's Go-compatible JSON against Go's: the oracle's cases and properties.
mod gojson;
/// Hostile and broken input: bad objects, bounded values, what output may hold, security, small
/// breaks, fuzzing.
mod hostile;
/// Nothing waits forever: every one-shot command and the daemon against a server that never
/// answers.
mod nothing_hangs;
/// Read-only means no write from any path; every misplaced flag is refused.
mod promises;
