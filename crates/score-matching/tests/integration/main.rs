//! The crate's integration tests in one binary: the modules share one
//! compile and one link.

mod common;
mod cross_validation;
mod finite;
mod lite;
mod serde;
