//! Bochner check of every spectral sampler: the Monte Carlo mean of
//! cos(ωᵀr) matches k(r) within 4 standard errors.

use kameleon_kernels::{
    Gaussian, InverseMultiquadric, Kernel, Laplacian, Matern, RationalQuadratic, SpectralDensity,
};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

trait Spectral: Kernel + SpectralDensity {}
impl<T: Kernel + SpectralDensity> Spectral for T {}

#[test]
fn monte_carlo_mean_of_cos_matches_the_kernel() {
    let kernels: Vec<(&str, Box<dyn Spectral>)> = vec![
        ("gaussian", Box::new(Gaussian::new(1.3).unwrap())),
        ("laplacian", Box::new(Laplacian::new(0.8).unwrap())),
        ("matern-1/2", Box::new(Matern::new(0.5, 1.2).unwrap())),
        ("matern-3/2", Box::new(Matern::new(1.5, 0.9).unwrap())),
        ("matern-5/2", Box::new(Matern::new(2.5, 1.4).unwrap())),
        ("matern-2.7", Box::new(Matern::new(2.7, 1.0).unwrap())),
        (
            "rational-quadratic",
            Box::new(RationalQuadratic::new(1.1, 0.7).unwrap()),
        ),
        ("imq", Box::new(InverseMultiquadric::new(0.9).unwrap())),
        (
            "imq-1.5",
            Box::new(InverseMultiquadric::with_exponent(1.2, 1.5).unwrap()),
        ),
    ];
    let d = 3;
    // Differences r = t·(0.6, −0.3, 0.74)/‖·‖ at several lengths t, plus an
    // axis-aligned one (the Laplacian is not rotation invariant).
    let direction = [0.6, -0.3, 0.74];
    let norm = direction.iter().map(|v: &f64| v * v).sum::<f64>().sqrt();
    let mut offsets: Vec<Vec<f64>> = [0.2, 0.7, 1.5, 3.0]
        .iter()
        .map(|t| direction.iter().map(|v| t * v / norm).collect())
        .collect();
    offsets.push(vec![0.0, 1.1, 0.0]);
    let draws = 100_000;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let mut omega = vec![0.0; d];
    for (name, kernel) in &kernels {
        // Running sums of cos(ωᵀr) and cos² for each offset.
        let mut sum = vec![0.0; offsets.len()];
        let mut sum_sq = vec![0.0; offsets.len()];
        for _ in 0..draws {
            kernel.sample_frequency(&mut rng, &mut omega);
            for (j, r) in offsets.iter().enumerate() {
                let c = omega.iter().zip(r).map(|(w, v)| w * v).sum::<f64>().cos();
                sum[j] += c;
                sum_sq[j] += c * c;
            }
        }
        let origin = vec![0.0; d];
        let n = draws as f64;
        for (j, r) in offsets.iter().enumerate() {
            let mean = sum[j] / n;
            // Standard error of the mean from the unbiased sample variance.
            let variance = (sum_sq[j] - n * mean * mean) / (n - 1.0);
            let se = (variance.max(0.0) / n).sqrt();
            let want = kernel.eval(r, &origin);
            assert!(
                (mean - want).abs() <= 4.0 * se,
                "{name}: r = {r:?}: MC mean {mean} ± {se} vs k = {want}"
            );
        }
    }
}
