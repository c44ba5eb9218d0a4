//! The command line as a user runs it, one file per command family.

mod batches;
mod credentials;
mod deps;
mod freeze;
mod plan;
mod sandbox;
mod windows;
