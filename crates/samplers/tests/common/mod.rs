//! Shared helpers for the statistical tests.
//!
//! Tolerance derivation. Every checked quantity is a chain average
//! f̄ = (1/n) Σ f(x_t) of some f (a coordinate, a centred product, a
//! quantile-region indicator). By the Markov-chain CLT,
//! f̄ ≈ N(E_π f, σ_f²/ESS_f), so its Monte Carlo standard error is
//! se_f = σ_f/√ESS_f, with σ_f the sample standard deviation of f(x_t) and
//! ESS_f the effective sample size of the series f(x_t) by Geyer's initial
//! monotone sequence estimator (kameleon-diagnostics). We require
//! |f̄ − E_π f| ≤ Z_TOL · se_f. With Z_TOL = 5 a correct sampler fails one
//! check with probability ≈ 6·10⁻⁷ under the normal approximation; the ESS
//! estimate's own error (tens of percent for chains with ESS in the
//! hundreds) shrinks the effective threshold to about 4σ, still negligible
//! over the few thousand checks of the suite. Tests use fixed seeds, so they
//! are deterministic; the broken-ratio tests show the same statistics flag a
//! wrong sampler by a wide margin.
#![allow(dead_code)]

use faer::Mat;
use kameleon_samplers::Chain;
use kameleon_targets::{Banana, GaussianMixture, QuantileRegions};

/// Standard errors allowed for a chain average.
pub const Z_TOL: f64 = 5.0;

/// |f̄ − expected| / se_f for the series f(x_t), and ESS_f.
pub fn z_and_ess(series: &[f64], expected: f64) -> (f64, f64) {
    let n = series.len() as f64;
    let mean = series.iter().sum::<f64>() / n;
    let var = series.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0);
    if var == 0.0 {
        let z = if mean == expected { 0.0 } else { f64::INFINITY };
        return (z, n);
    }
    let ess = kameleon_diagnostics::ess_geyer(series).expect("finite series of positive variance");
    ((mean - expected).abs() / (var / ess).sqrt(), ess)
}

/// The worst z-score of the chain's means and covariance entries against
/// the exact `mean` and `cov` (d × d row-major), and the smallest ESS among
/// the coordinates. The covariance entry (i, j) is the chain average of
/// (x_i − μ_i)(x_j − μ_j) with the exact μ.
pub fn worst_moment_z(chain: &Chain, mean: &[f64], cov: &[f64]) -> (f64, f64) {
    let (z, ess, _) = worst_moment_z_at(chain, mean, cov, &|_, _| true);
    (z, ess)
}

/// Like [`worst_moment_z`], checking only the covariance entries (i, j) with
/// `check_cov(i, j)`, and also returning which statistic was worst.
pub fn worst_moment_z_at(
    chain: &Chain,
    mean: &[f64],
    cov: &[f64],
    check_cov: &dyn Fn(usize, usize) -> bool,
) -> (f64, f64, String) {
    let mut which = String::new();
    let d = chain.dim;
    let mut worst: f64 = 0.0;
    let mut min_ess = f64::INFINITY;
    let column = |f: &dyn Fn(&[f64]) -> f64| -> Vec<f64> {
        (0..chain.len()).map(|t| f(chain.sample(t))).collect()
    };
    for i in 0..d {
        let (z, ess) = z_and_ess(&column(&|x| x[i]), mean[i]);
        if z > worst {
            worst = z;
            which = format!("mean {i}");
        }
        min_ess = min_ess.min(ess);
        for j in (0..=i).filter(|&j| check_cov(i, j)) {
            let (z, _) = z_and_ess(
                &column(&|x| (x[i] - mean[i]) * (x[j] - mean[j])),
                cov[i * d + j],
            );
            if z > worst {
                worst = z;
                which = format!("cov {i},{j}");
            }
        }
    }
    (worst, min_ess, which)
}

/// Σ_ij = s_i s_j ρ^|i−j| with s_i = 1 + i/2 and ρ = 0.8, mean m_i = i − 1.
pub fn correlated_gaussian(d: usize) -> (GaussianMixture, Vec<f64>, Vec<f64>) {
    let s: Vec<f64> = (0..d).map(|i| 1.0 + i as f64 / 2.0).collect();
    let cov: Vec<f64> = (0..d * d)
        .map(|k| {
            let (i, j) = (k / d, k % d);
            s[i] * s[j] * 0.8f64.powi((i as i32 - j as i32).abs())
        })
        .collect();
    let mean: Vec<f64> = (0..d).map(|i| i as f64 - 1.0).collect();
    let c = Mat::from_fn(d, d, |i, j| cov[i * d + j]);
    (GaussianMixture::gaussian(&mean, &c).unwrap(), mean, cov)
}

/// B(b, v) has mean 0 and a diagonal covariance: Var y₁ = v,
/// Var y₂ = b² Var(y₁²) + 1 = 2 b² v² + 1, the rest 1 (y₁ is symmetric, so
/// Cov(y₁, y₂) = b E[y₁³ − v y₁] = 0).
pub fn banana(d: usize) -> (Banana, Vec<f64>, Vec<f64>) {
    let (b, v) = (0.03, 100.0);
    let mut cov = vec![0.0; d * d];
    for i in 0..d {
        cov[i * d + i] = 1.0;
    }
    cov[0] = v;
    cov[d + 1] = 2.0 * b * b * v * v + 1.0;
    (Banana::new(d, b, v).unwrap(), vec![0.0; d], cov)
}

/// The worst coverage z-score over the levels q of the exact quantile regions.
pub fn worst_coverage_z(chain: &Chain, target: &Banana) -> f64 {
    [0.1, 0.5, 0.9]
        .iter()
        .map(|&q| {
            let threshold = target.region_threshold(q).unwrap();
            let inside: Vec<f64> = (0..chain.len())
                .map(|t| {
                    f64::from(u8::from(
                        target.region_statistic(chain.sample(t)) <= threshold,
                    ))
                })
                .collect();
            z_and_ess(&inside, q).0
        })
        .fold(0.0, f64::max)
}
