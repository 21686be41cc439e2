//! The README's library example: KAMH on a user's own log density, with the
//! Python package's default settings (scale-free, in the coordinates a pilot
//! random walk whitens), so that it works whatever the target's scale.
//! Run with `cargo run --release -p kameleon-samplers --example quickstart`.

use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    FnTarget, Kamh, KamhConfig, RunConfig, Whitened, WhiteningConfig, run_chain,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let target = FnTarget::new(2, |x: &[f64]| -0.5 * (x[0] * x[0] + 4.0 * x[1] * x[1]));
    let kamh = Kamh::new(2, Gaussian::new(1.0)?, KamhConfig::scale_free(2))?;
    let sampler = Whitened::new(kamh, 2, WhiteningConfig::default())?;
    let chain = run_chain(
        &target,
        sampler,
        &[1.0, 1.0],
        RunConfig::new(2_000, 10_000),
        42,
    )?;
    println!(
        "mean {:?}, acceptance {:.2}",
        chain.mean(),
        chain.acceptance_rate()
    );
    Ok(())
}
