//! KMC lite on the 2-d banana: Hamiltonian moves along the gradient of a
//! kernel surrogate of the log density, fitted by score matching to the
//! chain's own history, so the target itself needs no gradient.
//! Run with `cargo run --release -p kameleon-samplers --example kmc_surrogate`.

use kameleon_diagnostics::{ess_bulk, per_dimension};
use kameleon_samplers::{
    AdaptProbability, KmcConfig, KmcLite, LiteSurrogate, LiteSurrogateConfig, RunConfig, Target,
    run_chain,
};
use kameleon_score_matching::LiteEstimator;
use kameleon_targets::Banana;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let target = Banana::new(2, 0.03, 100.0)?;
    // f̂(x) = Σᵢ αᵢ exp(−‖zᵢ − x‖²/σ) on n = 500 history points, refitted
    // with probability t^(−1/2); random-walk steps until 500 points are seen.
    let surrogate = LiteSurrogate::new(
        LiteEstimator::new(50.0, 1e-3)?,
        2,
        LiteSurrogateConfig::default()
            .with_subsample_size(500)?
            .with_refit(AdaptProbability::Power { kappa: 0.5 })?,
    )?;
    // ε ~ U[0.6, 1.3), L ~ U{10, …, 100} leapfrog steps (the KMC code's banana settings)
    let kmc = KmcLite::new(
        surrogate,
        KmcConfig::default()
            .with_step_size((0.6, 1.3))?
            .with_steps((10, 100))?,
    )?;
    let chain = run_chain(&target, kmc, &[0.0, 0.0], RunConfig::new(2_000, 10_000), 7)?;
    let mut exact = vec![0.0; 2];
    target.exact_mean(&mut exact)?;
    // the bulk ESS of each coordinate says how many independent draws the
    // chain is worth (the banana's curved tail makes the mean converge slowly)
    let ess = per_dimension(&[chain.samples.as_slice()], 2, ess_bulk)?;
    for (k, (m, e)) in chain.mean().iter().zip(&ess).enumerate() {
        println!("x{k}: mean {m:.2} (exact {:.2}), bulk ESS {e:.0}", exact[k]);
    }
    println!(
        "KMC lite on B(0.03, 100): acceptance {:.2}",
        chain.acceptance_rate()
    );
    Ok(())
}
