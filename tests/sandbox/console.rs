//! The console: its runtime over the sandbox (tasks, channels, a real client over HTTP) and its
//! views drawn on a test backend (with their snapshots in `console/snapshots/`).

mod runtime;
mod views;
