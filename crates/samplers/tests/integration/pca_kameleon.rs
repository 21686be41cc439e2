//! PCA-Kameleon against its hierarchical definition (arXiv Appendix C):
//! j ~ ω ∝ λ_j, ρ ~ N(0, 1), x* ~ N(y + ρ ν M H α⁽ʲ⁾, γ²I), with the
//! eigenvectors of an explicitly built HKH. The closed-form mixture density
//! (ρ integrated out) is checked against numerical integration over ρ, and
//! the sampler's draws against the mixture's covariance. Invariance on the
//! 8-d banana B(0.1, 100) and a correlated Gaussian, with the reverse
//! density at the wrong point failing the same checks.

use crate::common;

use common::{Invariance, adaptive_scale, subsample_config};
use faer::{Mat, Side};
use kameleon_kernels::{Gaussian, Kernel};
use kameleon_samplers::{
    AdaptProbability, FnTarget, PcaKameleon, PcaKameleonConfig, Proposal, Refresh, RunningMoments,
    Scale,
};
use rand::{RngExt, SeedableRng};
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;

const GAMMA: f64 = 0.3;
const NU: f64 = 0.9;
const COMPONENTS: usize = 3;

fn setup(seed: u64) -> (PcaKameleon<Gaussian>, Mat<f64>, Gaussian) {
    let (n, d) = (25, 2);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let z = Mat::<f64>::from_fn(n, d, |_, j| {
        (1.0 + 2.0 * j as f64) * rng.sample::<f64, _>(StandardNormal)
    });
    let kernel = Gaussian::new(1.5).unwrap();
    let config = PcaKameleonConfig::default()
        .with_subsample(subsample_config(n, GAMMA, Refresh::Never))
        .unwrap()
        .with_components(COMPONENTS)
        .unwrap()
        .with_scale(Scale::fixed(NU).unwrap())
        .unwrap();
    let mut pca = PcaKameleon::new(d, kernel, config).unwrap();
    pca.set_subsample(z.as_ref()).unwrap();
    (pca, z, kernel)
}

/// The top eigenpairs of an explicit H K H and the directions u_j(y) = M H α⁽ʲ⁾
/// with M from `grad_x` point by point: returns (ω_j, u_j).
fn brute_force_components(kernel: &Gaussian, z: &Mat<f64>, y: &[f64]) -> Vec<(f64, Vec<f64>)> {
    let (n, d) = (z.nrows(), z.ncols());
    let row = |i: usize| (0..d).map(|l| z[(i, l)]).collect::<Vec<f64>>();
    let k = Mat::<f64>::from_fn(n, n, |i, j| kernel.eval(&row(i), &row(j)));
    let h = Mat::<f64>::from_fn(n, n, |a, b| f64::from(u8::from(a == b)) - 1.0 / n as f64);
    let hkh = &h * &k * &h;
    let evd = hkh.self_adjoint_eigen(Side::Lower).unwrap();
    let (s, u) = (evd.S().column_vector(), evd.U());
    let mut m = Mat::<f64>::zeros(d, n);
    let mut g = vec![0.0; d];
    for i in 0..n {
        kernel.grad_x(y, &row(i), &mut g);
        for l in 0..d {
            m[(l, i)] = 2.0 * g[l];
        }
    }
    let top: Vec<usize> = (0..COMPONENTS).map(|k| n - 1 - k).collect();
    let total: f64 = top.iter().map(|&i| s[i]).sum();
    top.iter()
        .map(|&idx| {
            let alpha = Mat::<f64>::from_fn(n, 1, |i, _| u[(i, idx)]);
            let mha = &m * &h * &alpha;
            (s[idx] / total, (0..d).map(|l| mha[(l, 0)]).collect())
        })
        .collect()
}

/// q(x | y) = Σ_j ω_j ∫ φ(ρ) N(x; y + ρ ν u_j, γ²I) dρ by the trapezoidal
/// rule on [−12, 12] (the integrand is smooth and Gaussian-tailed, so the
/// rule's error is far below the tolerance).
fn quadrature_density(components: &[(f64, Vec<f64>)], y: &[f64], x: &[f64]) -> f64 {
    let d = y.len() as f64;
    let steps = 24_000;
    let h = 24.0 / steps as f64;
    components
        .iter()
        .map(|(w, u)| {
            let mut integral = 0.0;
            for k in 0..=steps {
                let rho = -12.0 + k as f64 * h;
                let r2: f64 = (0..y.len())
                    .map(|l| (x[l] - y[l] - rho * NU * u[l]).powi(2))
                    .sum();
                let f = (-0.5 * rho * rho).exp() / (2.0 * std::f64::consts::PI).sqrt()
                    * (-0.5 * r2 / (GAMMA * GAMMA)).exp()
                    / (2.0 * std::f64::consts::PI * GAMMA * GAMMA).powf(0.5 * d);
                integral += if k == 0 || k == steps { 0.5 * f } else { f };
            }
            w * integral * h
        })
        .sum()
}

#[test]
fn mixture_density_equals_the_rho_integral_of_the_hierarchical_proposal() {
    let (mut pca, z, kernel) = setup(1);
    assert_eq!(pca.eigenvalues().len(), COMPONENTS);
    let target = FnTarget::new(2, |_: &[f64]| 0.0);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    let y = vec![0.3, -0.8];
    pca.initialise(&target, &y, true).unwrap();
    let forward_components = brute_force_components(&kernel, &z, &y);
    let mut proposed = vec![0.0; 2];
    for _ in 0..5 {
        let correction = pca.propose(&target, &y, &mut proposed, &mut rng);
        let reverse_components = brute_force_components(&kernel, &z, &proposed);
        let forward = quadrature_density(&forward_components, &y, &proposed).ln();
        let reverse = quadrature_density(&reverse_components, &proposed, &y).ln();
        assert!(
            (correction - (reverse - forward)).abs() < 1e-8,
            "{correction} vs {}",
            reverse - forward
        );
        assert!((pca.log_density(&y, &proposed) - forward).abs() < 1e-8);
        // a point off the proposal's main directions
        let x = [proposed[0] + 0.4, proposed[1] - 0.1];
        let expected = quadrature_density(&forward_components, &y, &x).ln();
        assert!((pca.log_density(&y, &x) - expected).abs() < 1e-8);
    }
}

#[test]
fn draws_have_the_mixture_covariance() {
    // Σ = Σ_j ω_j (γ²I + ν² u_j u_jᵀ); the mixture is not Gaussian, so the
    // sample covariance's standard error is estimated from the draws'
    // fourth moments: se_ab = sd((x_a − y_a)(x_b − y_b))/√N; allow 5.
    let (mut pca, z, kernel) = setup(3);
    let target = FnTarget::new(2, |_: &[f64]| 0.0);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    let y = [0.5, 1.0];
    pca.initialise(&target, &y, true).unwrap();
    let components = brute_force_components(&kernel, &z, &y);
    let mut sigma = [[0.0; 2]; 2];
    for (w, u) in &components {
        for a in 0..2 {
            for b in 0..2 {
                sigma[a][b] +=
                    w * (NU * NU * u[a] * u[b] + if a == b { GAMMA * GAMMA } else { 0.0 });
            }
        }
    }
    assert!(sigma[0][0] > 2.0 * GAMMA * GAMMA || sigma[1][1] > 2.0 * GAMMA * GAMMA);
    let draws = 100_000;
    let mut products = vec![RunningMoments::new(3); 1];
    let mut proposed = vec![0.0; 2];
    for _ in 0..draws {
        pca.propose(&target, &y, &mut proposed, &mut rng);
        let (da, db) = (proposed[0] - y[0], proposed[1] - y[1]);
        products[0].push(&[da * da, da * db, db * db]);
    }
    let mut cov = vec![0.0; 9];
    products[0].covariance_into(&mut cov);
    let means = products[0].mean();
    let expected = [sigma[0][0], sigma[0][1], sigma[1][1]];
    for k in 0..3 {
        let se = (cov[k * 3 + k] / draws as f64).sqrt();
        assert!(
            (means[k] - expected[k]).abs() < 5.0 * se,
            "{k}: {} vs {}",
            means[k],
            expected[k]
        );
    }
}

// ------------------------------------------------------------- invariance
//
// Tolerances: as in `kamh_invariance.rs` (chain averages within Z_TOL = 5
// Geyer-ESS standard errors, see `common/mod.rs`), with the same targets,
// run lengths and seeds.

/// PCA-Kameleon on the 8-d banana B(0.1, 100) with an oracle subsample of
/// n = 300 exact draws, frozen; the top 8 kernel principal directions, each
/// ν_j learned by Robbins–Monro during burn-in.
fn banana_pca(seed: u64) -> PcaKameleon<Gaussian> {
    let n = 300;
    let config = PcaKameleonConfig::default()
        .with_subsample(subsample_config(n, 0.2, Refresh::Never))
        .unwrap()
        .with_components(8)
        .unwrap()
        .with_scale(adaptive_scale())
        .unwrap();
    let mut pca = PcaKameleon::new(8, Gaussian::new(15.0).unwrap(), config).unwrap();
    let z = common::oracle_subsample(&Invariance::banana(), n, seed);
    pca.set_subsample(z.as_ref()).unwrap();
    pca
}

#[test]
fn pca_kameleon_is_invariant_on_the_strongly_twisted_banana() {
    Invariance::Banana.assert("pca", banana_pca, false);
}

#[test]
fn pca_kameleon_with_the_reverse_density_at_the_wrong_point_fails_on_the_banana() {
    Invariance::Banana.assert("pca", banana_pca, true);
}

/// PCA-Kameleon learning from its own history on a correlated 4-d
/// Gaussian: z redrawn with probability t^(−1/2) during burn-in, 3
/// directions, one Robbins–Monro scale per direction.
fn gaussian_pca(_seed: u64) -> PcaKameleon<Gaussian> {
    let refresh = Refresh::Probability(AdaptProbability::Power { kappa: 0.5 });
    let config = PcaKameleonConfig::default()
        .with_subsample(subsample_config(100, 0.2, refresh))
        .unwrap()
        .with_components(3)
        .unwrap()
        .with_scale(adaptive_scale())
        .unwrap();
    PcaKameleon::new(4, Gaussian::new(3.0).unwrap(), config).unwrap()
}

#[test]
fn pca_kameleon_is_invariant_on_a_correlated_gaussian() {
    Invariance::Gaussian.assert("pca", gaussian_pca, false);
}

#[test]
fn pca_kameleon_with_the_reverse_density_at_the_wrong_point_fails_on_a_correlated_gaussian() {
    Invariance::Gaussian.assert("pca", gaussian_pca, true);
}
