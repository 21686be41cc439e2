//! The crate's integration tests in one binary: the modules share one
//! compile and one link.

mod common;
mod fastfood;
mod rff;
