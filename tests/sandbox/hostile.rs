//! Hostile and broken input, and what capdeck may say about it: malformed objects, values at and
//! past their bounds, output that must never hold a credential, RBAC and security promises,
//! small breaks, fuzzing.

mod bad_input;
mod bounded_input;
mod fuzz;
mod output;
mod security;
mod small_breaks;
