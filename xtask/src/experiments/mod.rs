//! Every experiment of the papers, by its fixed name (issue 8).

mod abc;
mod fkamh;
mod fkamh_covariance;
mod glass;
mod kamh;
mod kmc;
mod proposals;

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
        glass::kamh(),
        fkamh::ess(),
        fkamh_covariance::covariance(),
        kmc::banana(),
        planned(
            "kmc-trajectories",
            "KMC, Fig. 2",
            "acceptance along kernel-induced trajectories on the rotated Gamma-eigenvalue Gaussian vs n = m and d",
            "KMC sizes",
            "needs the KMC trajectory study (no MCMC: acceptance along surrogate trajectories)",
        ),
        glass::kmc(),
        abc::kmc(),
        planned(
            "ckam-bimodal",
            "Li et al. 2022 (cKAM), Figs. 3–14, Table 1",
            "RW, AM, RBAM, GAM, KAM, cKAM on the bimodal mixture: symmetric KL vs time, marginals, ESS",
            "cKAM Table 1",
            "protocol not written yet: needs KL-vs-time checkpoints, the tables' constant-step AM/RBAM, and KAM/cKAM wiring",
        ),
        planned(
            "ckam-gmm2d",
            "cKAM, Figs. 3–14, Table 2",
            "RW, AM, RBAM, GAM, KAM, cKAM on the five-component mixture",
            "cKAM Table 2",
            "protocol not written yet: needs KL-vs-time checkpoints, the tables' constant-step AM/RBAM, and KAM/cKAM wiring",
        ),
        planned(
            "ckam-gmm32",
            "cKAM, Figs. 3–14, Table 3",
            "RW, AM, RBAM, GAM, KAM, cKAM on the 32-d grid mixture",
            "cKAM Table 3",
            "protocol not written yet: needs KL-vs-time checkpoints, the tables' constant-step AM/RBAM, and KAM/cKAM wiring",
        ),
    ]
}

/// The experiment called `name`.
pub fn find(name: &str) -> Option<Experiment> {
    all().into_iter().find(|e| e.name == name)
}
