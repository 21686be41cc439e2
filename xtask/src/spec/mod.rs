//! What a grid cell runs: a target, a sampler with its settings, and the
//! per-chain metrics computed on its post-burn-in draws.
//!
//! - [`targets`]: the targets and their reference samples;
//! - [`samplers`]: the samplers and their settings;
//! - [`runs`]: running them into timed chains;
//! - [`metrics`]: what is measured on each chain.

pub mod metrics;
pub mod runs;
pub mod samplers;
pub mod targets;

pub use metrics::*;
pub use runs::*;
pub use samplers::*;
pub use targets::*;
