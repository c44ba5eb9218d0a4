//! The reconcile engine: planning, batching, approvals and rolling.

pub mod plan;
