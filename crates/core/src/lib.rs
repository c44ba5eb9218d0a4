//! capdeck's pure core: what the engine, the console and the sandbox all read, with no kube client
//! and no tokio (the compiler keeps it so: this crate does not depend on them).
//! - `api`: the CRD types (RotationBatch, Freeze) and the upstream ones (CAP Operator, BTP
//!   ServiceBinding), change windows, the typed batch state;
//! - `vcap`: the VCAP_SERVICES format; `lookup`: point lookups over listed objects;
//! - `plan`: the pure planner; `manifest`: objects from files; `deps`: subscription dependencies;
//! - `credentials`: the credential judgement (verdicts, margins, schedules);
//! - `decide`: the engine's pure decision for a batch (`decide::gate`: windows and freezes;
//!   `decide::status`: the batch status it writes);
//! - `output`: printing for people and scripts.
// No function is longer than 80 lines (clippy.toml) but table-like code, which says why; the
// unit tests may be.
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

pub mod api;
pub mod credentials;
pub mod decide;
pub mod deps;
pub mod lookup;
pub mod manifest;
pub mod output;
pub mod plan;
pub mod vcap;
