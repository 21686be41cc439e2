//! cKAM on the bimodal mixture ½N((−8, 0), 0.5·I) + ½N((8, 0), 2·I): each
//! cycle starts with exploration steps of a large fixed scale that jump
//! between the modes, then samples with an adapted kernel proposal, and only
//! the sampling steps' states are kept. A plain adaptive random walk started
//! in one mode never sees the other.
//! Run with `cargo run --release -p kameleon-samplers --example ckam_mixture`.

use kameleon_kernels::Gaussian;
use kameleon_samplers::{Ckam, CkamConfig, RobbinsMonro, StepSchedule, run_ckam};
use kameleon_targets::GaussianMixture;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let target = GaussianMixture::ckam_bimodal(false);
    let nu = RobbinsMonro::new(3.4, 0.234, StepSchedule::Power { kappa: 0.75 })?;
    // Gaussian kernel ℓ = 2, d = 2, exploration scale 8, subsample n = 50,
    // cycles of L = 200 steps of which the first 40% explore
    let ckam = Ckam::new(
        2,
        Gaussian::new(2.0)?,
        CkamConfig::default()
            .with_gamma(8.0)?
            .with_subsample_size(50)?
            .with_nu(nu)
            .with_cycle_length(200)?
            .with_exploration_fraction(0.4)?,
    )?;
    let chain = run_ckam(&target, ckam, &[-8.0, 0.0], 200, 1)?;
    let right = (0..chain.len())
        .filter(|&i| chain.sample(i)[0] > 0.0)
        .count();
    println!(
        "cKAM: {} kept states, {:.0}% in the right-hand mode (exact 50%), acceptance {:.2}",
        chain.len(),
        100.0 * right as f64 / chain.len() as f64,
        chain.acceptance_rate()
    );
    Ok(())
}
