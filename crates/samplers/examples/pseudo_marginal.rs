//! An exact pseudo-marginal posterior: a latent-variable model whose
//! likelihood is only estimated, sampled by KAMH. The chain keeps the
//! current state's estimate (never recomputed), so it targets the exact
//! posterior however noisy the estimates are.
//!
//! Model: y | z ~ N(z, 1), z | θ ~ N(θ, 1), prior θ ~ N(0, 4). The estimator
//! draws z from its prior and returns N(y; z, 1), unbiased for the marginal
//! likelihood N(y; θ, 2), so the posterior is N(2y/3, 4/3) in closed form.
//! Run with `cargo run --release -p kameleon-samplers --example pseudo_marginal`.

use kameleon_kernels::Gaussian;
use kameleon_samplers::{IsotropicGaussianPrior, Kamh, KamhConfig, RunConfig, run_chain};
use kameleon_targets::{LikelihoodEstimator, PseudoMarginal};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;

struct Latent {
    y: f64,
}

impl LikelihoodEstimator for Latent {
    fn dim(&self) -> usize {
        1
    }

    fn log_likelihood_estimate(&self, theta: &[f64], rng: &mut dyn Rng) -> f64 {
        // the mean of 10 draws of N(y; z, 1), z ~ N(θ, 1)
        let mean: f64 = (0..10)
            .map(|_| {
                let z = theta[0] + rng.sample::<f64, _>(StandardNormal);
                (-0.5 * (self.y - z).powi(2)).exp()
            })
            .sum::<f64>()
            / 10.0;
        mean.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let y = 1.5;
    let target = PseudoMarginal::new(Latent { y }, IsotropicGaussianPrior::new(4.0)?);
    let kamh = Kamh::new(1, Gaussian::new(1.0)?, KamhConfig::paper(200)?)?;
    let chain = run_chain(&target, kamh, &[0.0], RunConfig::new(5_000, 40_000), 11)?;
    let mean = chain.mean()[0];
    let variance = (0..chain.len())
        .map(|i| (chain.sample(i)[0] - mean).powi(2))
        .sum::<f64>()
        / chain.len() as f64;
    println!(
        "posterior mean {mean:.2} (exact {:.2}), variance {variance:.2} (exact {:.2}), acceptance {:.2}",
        2.0 * y / 3.0,
        4.0 / 3.0,
        chain.acceptance_rate()
    );
    Ok(())
}
