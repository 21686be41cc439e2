//! F-KAMH with Fastfood features on a strongly correlated 4-d Gaussian:
//! KAMH's kernel-informed proposal computed in a finite feature space, so a
//! step costs O(D log d) instead of growing with the history.
//! Run with `cargo run --release -p kameleon-samplers --example fkamh_fastfood`.

use kameleon_features::{Embedding, Fastfood};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    FKamh, FKamhConfig, FnTarget, RobbinsMonro, RunConfig, Scale, StepSchedule, run_chain,
};
use rand::SeedableRng;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // N(0, Σ) with Σ = 0.1·I + 0.9·11ᵀ: every pair of coordinates has correlation ≈ 0.9
    let d = 4;
    let target = FnTarget::new(d, move |x: &[f64]| {
        // Σ⁻¹ = 10·(I − 0.9/(0.1 + 0.9·d)·11ᵀ) by Sherman–Morrison
        let sum: f64 = x.iter().sum();
        let sq: f64 = x.iter().map(|v| v * v).sum();
        -0.5 * 10.0 * (sq - 0.9 / (0.1 + 0.9 * d as f64) * sum * sum)
    });
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
    let features = Fastfood::new(&Gaussian::new(1.0)?, d, 256, Embedding::CosPhase, &mut rng)?;
    let eta = Scale::Adaptive(RobbinsMonro::new(
        1.0,
        0.234,
        StepSchedule::Power { kappa: 0.7 },
    )?);
    let sampler = FKamh::new(
        features,
        FKamhConfig::default().with_gamma(0.2)?.with_eta(eta)?,
    )?;
    let chain = run_chain(
        &target,
        sampler,
        &[0.0; 4],
        RunConfig::new(5_000, 20_000),
        7,
    )?;
    // the sample correlation of the first two coordinates
    let n = chain.len() as f64;
    let (mut s01, mut s00, mut s11) = (0.0, 0.0, 0.0);
    let mean = chain.mean();
    for i in 0..chain.len() {
        let x = chain.sample(i);
        let (a, b) = (x[0] - mean[0], x[1] - mean[1]);
        (s01, s00, s11) = (s01 + a * b / n, s00 + a * a / n, s11 + b * b / n);
    }
    println!(
        "F-KAMH (Fastfood, D = 256): corr(x₀, x₁) {:.2} (exact 0.90), acceptance {:.2}",
        s01 / (s00 * s11).sqrt(),
        chain.acceptance_rate()
    );
    Ok(())
}
