//! Every experiment of the papers, by its fixed name (issue 8).

mod ckam;
mod fkamh;
mod fkamh_covariance;
mod kamh;
mod kmc;
mod proposals;
mod trajectories;

use crate::experiment::Experiment;

/// An experiment whose protocol is not implemented yet.
fn planned(
    name: &'static str,
    source: &'static str,
    description: &'static str,
    paper_size: &'static str,
    missing: &'static str,
) -> Experiment {
    Experiment {
        name,
        source,
        description,
        paper_size,
        protocol: None,
        study: None,
        missing,
    }
}

/// All experiments, in the order `list` shows them.
pub fn all() -> Vec<Experiment> {
    vec![
        kamh::banana(),
        kamh::flower(),
        proposals::proposals(),
        planned(
            "kamh-glass",
            "KAMH, Fig. 4",
            "SM, AM-FS, AM-LS, KAMH-LS on the GP Glass posterior: ‖mean − benchmark‖ and MMD² vs iterations",
            "benchmark 30 SM chains × 500000; 30 chains × 100000 (20000 burn-in)",
            "protocol not written yet: needs a benchmark of 30 SM chains × 500000 pseudo-marginal steps (hours)",
        ),
        fkamh::ess(),
        fkamh_covariance::covariance(),
        kmc::banana(),
        trajectories::trajectories(),
        planned(
            "kmc-glass",
            "KMC, Fig. 4 left",
            "KMC lite vs KAMH vs RW: MMD² to the benchmark over 6000 iterations",
            "KMC sizes",
            "needs KMC lite and a Glass benchmark sample (hours of SM chains)",
        ),
        planned(
            "kmc-abc",
            "KMC, Fig. 4 middle/right",
            "RW, HABC, KMC on ABC skew-normal: autocorrelation and the θ₁ marginal",
            "KMC sizes",
            "needs KMC lite and Hamiltonian ABC wiring",
        ),
        ckam::bimodal(),
        ckam::gmm2d(),
        ckam::gmm32(),
    ]
}

/// The experiment called `name`.
pub fn find(name: &str) -> Option<Experiment> {
    all().into_iter().find(|e| e.name == name)
}
