//! MCMC diagnostics as pure functions on samples: effective sample size (Geyer's initial
//! monotone sequence; rank-normalised bulk and tail ESS of Vehtari et al. 2021), split-R̂,
//! autocorrelation, squared MMD, quantile-region coverage, norm of the mean, and the symmetric
//! KL divergence of a histogram against exact reference bin masses with an iid floor.
//!
//! # Data layout
//! - A scalar chain is a `&[f64]` series; several chains are `&[&[f64]]` of equal length.
//! - Multivariate draws are **row-major**: n rows of d values in one `&[f64]` of length n·d
//!   (row t is `samples[t*d..(t+1)*d]`). [`column()`] and [`per_dimension`] turn them into
//!   scalar series.
//!
//! # Example
//! ```
//! use kameleon_diagnostics::{ess_bulk, ess_geyer, mmd2, rhat_rank, MmdEstimator, PolynomialKernel};
//!
//! // An AR(1) chain x_t = 0.5 x_{t-1} + e_t with uniform-ish innovations from a simple LCG.
//! let mut state = 12345u64;
//! let mut next = || {
//!     state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
//!     (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
//! };
//! let mut x = vec![0.0; 20_000];
//! for t in 1..x.len() {
//!     x[t] = 0.5 * x[t - 1] + next();
//! }
//! // ESS/n ≈ (1 − 0.5)/(1 + 0.5) = 1/3.
//! let ess = ess_geyer(&x).unwrap();
//! assert!((ess / x.len() as f64 - 1.0 / 3.0).abs() < 0.05);
//! let (a, b) = x.split_at(10_000);
//! assert!(ess_bulk(&[a, b]).unwrap() > 3000.0);
//! assert!(rhat_rank(&[a, b]).unwrap() < 1.05);
//!
//! // Squared MMD between two 2-d samples (rows (x, y)), with the papers' kernel (1 + ⟨x, y⟩)³.
//! let p = [0.0, 0.1, 0.5, -0.2, -0.3, 0.4];
//! let q = [1.0, 1.1, 1.5, 0.8];
//! let m = mmd2(&p, &q, 2, &PolynomialKernel::paper(), MmdEstimator::Biased).unwrap();
//! assert!(m > 0.0);
//! ```

mod autocov;
mod coverage;
mod error;
mod ess;
pub mod kl;
mod mmd;
mod normal;
mod quantile;
mod scale;

pub use autocov::{autocorrelation, autocovariance, autocovariance_direct};
pub use coverage::{mean_norm, quantile_coverage_errors};
pub use error::{DiagnosticsError, Result};
pub use ess::{
    EssSummary, MIN_DRAWS, column, ess_bulk, ess_geyer, ess_geyer_per_dim, ess_multi_chain,
    ess_per_second, ess_summary, ess_tail, per_dimension, rank_normalize, rhat_rank,
    rhat_rank_and_ess_bulk, rhat_split, split_chains,
};
pub use kl::{Axis, Grid, IidFloor, KT_PSEUDO_COUNT, KlEstimate, MAX_BINS, ReferenceHistogram};
pub use mmd::{MmdEstimator, MmdKernel, PolynomialKernel, mmd2, mmd2_polynomial};
pub use normal::{normal_cdf, normal_quantile};
pub use quantile::quantile_sorted;
