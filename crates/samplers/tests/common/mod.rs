//! Shared helpers for the statistical tests.
//!
//! Tolerance derivation. Every checked quantity is a chain average
//! f̄ = (1/n) Σ f(x_t) of some f (a coordinate, a centred product, a
//! quantile-region indicator). By the Markov-chain CLT, f̄ ≈ N(E_π f, σ_f²/ESS_f),
//! so its Monte Carlo standard error is se_f = σ_f/√ESS_f. We estimate se_f by
//! batch means (b = ⌊√n⌋ batches of ⌊n/b⌋ states: se_f = sd(batch means)/√b,
//! which is σ_f/√ESS_f with ESS_f = n σ_f² / (batch size · var(batch means)))
//! and require |f̄ − E_π f| ≤ Z_TOL · se_f. With Z_TOL = 5 a correct sampler
//! fails a single check with probability ≈ 6·10⁻⁷ under the normal
//! approximation (the batch-means se is itself noisy with ~√n batches, which
//! the generous 5 absorbs); tests use fixed seeds, so they are deterministic.
#![allow(dead_code)]

use kameleon_samplers::Chain;

/// Standard errors allowed for a chain average.
pub const Z_TOL: f64 = 5.0;

/// The batch-means standard error of the mean of `series`.
pub fn batch_means_se(series: &[f64]) -> f64 {
    let n = series.len();
    let b = (n as f64).sqrt().floor() as usize;
    let size = n / b;
    let means: Vec<f64> = (0..b)
        .map(|k| series[k * size..(k + 1) * size].iter().sum::<f64>() / size as f64)
        .collect();
    let m = means.iter().sum::<f64>() / b as f64;
    let var = means.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (b - 1) as f64;
    (var / b as f64).sqrt()
}

/// The largest |f̄ − expected| / se_f over the chain averages of `f`.
fn z_score(chain: &Chain, expected: f64, f: impl Fn(&[f64]) -> f64) -> f64 {
    let series: Vec<f64> = (0..chain.len()).map(|i| f(chain.sample(i))).collect();
    let mean = series.iter().sum::<f64>() / series.len() as f64;
    (mean - expected).abs() / batch_means_se(&series)
}

/// The worst z-score of the chain's mean and covariance entries against the
/// exact `mean` and `cov` (d × d row-major). The covariance entry (i, j) is the
/// chain average of (x_i − μ_i)(x_j − μ_j) with the exact μ.
pub fn worst_moment_z(chain: &Chain, mean: &[f64], cov: &[f64]) -> f64 {
    let d = chain.dim;
    let mut worst: f64 = 0.0;
    for i in 0..d {
        worst = worst.max(z_score(chain, mean[i], |x| x[i]));
        for j in 0..=i {
            let z = z_score(chain, cov[i * d + j], |x| {
                (x[i] - mean[i]) * (x[j] - mean[j])
            });
            worst = worst.max(z);
        }
    }
    worst
}
