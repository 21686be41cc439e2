//! The crate's integration tests in one binary: the modules share one
//! compile and one link.

mod derivatives;
mod matern;
mod serde;
mod spectral;
mod validation;
