//! Every experiment of the papers, by its fixed name.

pub mod abc;
pub mod ckam;
pub mod fkamh;
pub mod fkamh_covariance;
pub mod glass;
pub mod kamh;
pub mod kmc;
pub mod proposals;
pub mod trajectories;

use crate::experiment::Experiment;

/// All experiments, in the order `list` shows them.
pub fn all() -> Vec<Experiment> {
    vec![
        kamh::banana(),
        kamh::flower(),
        proposals::proposals(),
        glass::kamh(),
        fkamh::ess(),
        fkamh_covariance::covariance(),
        kmc::banana(),
        trajectories::trajectories(),
        glass::kmc(),
        abc::kmc(),
        ckam::bimodal(),
        ckam::gmm2d(),
        ckam::gmm32(),
    ]
}

/// The experiment called `name`.
pub fn find(name: &str) -> Option<Experiment> {
    all().into_iter().find(|e| e.name == name)
}
