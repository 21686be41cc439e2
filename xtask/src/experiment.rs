//! The experiment framework: an experiment is a named protocol from one
//! figure of a paper — a grid of cells (target × sampler × setting), each run
//! for a number of chains — plus the per-chain metrics, the paper's claims
//! checked against our summary, and the figures.

use crate::spec::{Metric, SamplerSpec, TargetSpec};
use crate::summary::{ClaimCheck, Summary};

/// One cell of an experiment's grid: every chain of it runs the same
/// protocol with its own random stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The target.
    pub target: TargetSpec,
    /// The sampler and its settings.
    pub sampler: SamplerSpec,
    /// A setting that varies along the grid (e.g. `n=1000`), empty if none.
    pub setting: String,
    /// Post-burn-in iterations.
    pub iterations: u64,
    /// Burn-in iterations (adaptation stops after them).
    pub burn_in: u64,
}

impl Cell {
    /// The cell's identity as (target key, sampler label, setting).
    pub fn key(&self) -> (String, String, String) {
        (
            self.target.key(),
            self.sampler.label().to_string(),
            self.setting.clone(),
        )
    }
}

/// An experiment of the papers.
pub struct Experiment {
    /// The fixed name used on the command line.
    pub name: &'static str,
    /// Paper and figure.
    pub source: &'static str,
    /// What it shows.
    pub description: &'static str,
    /// The paper's size (chains, iterations, burn-in) in words.
    pub paper_size: &'static str,
    /// `None` for experiments whose protocol is not implemented yet (with the
    /// reason in `missing`).
    pub protocol: Option<Protocol>,
    /// Why the experiment (or part of it) is not implemented yet.
    pub missing: &'static str,
}

/// The runnable part of an experiment.
pub struct Protocol {
    /// Chains per cell at full size.
    pub chains: usize,
    /// Chains per cell with `--quick`.
    pub quick_chains: usize,
    /// The grid at full (`false`) or quick (`true`) size.
    pub cells: fn(quick: bool) -> Vec<Cell>,
    /// The metric families computed on every chain.
    pub metrics: &'static [Metric],
    /// How the starting point and other fixed choices are made, for summary.md.
    pub notes: &'static str,
    /// The paper's claims, checked against a summary.
    pub claims: fn(&Summary) -> Vec<ClaimCheck>,
    /// The figures drawn from a summary (file name, SVG writer).
    pub figures: fn(&Summary, &std::path::Path) -> anyhow::Result<Vec<String>>,
}

impl Experiment {
    /// Whether every cell of the grid can run now, some, or none.
    pub fn status(&self) -> String {
        let Some(protocol) = &self.protocol else {
            return format!("not implemented ({})", self.missing);
        };
        let cells = (protocol.cells)(false);
        let mut pending: Vec<&str> = cells
            .iter()
            .filter(|c| c.sampler.pending().is_some())
            .map(|c| c.sampler.label())
            .collect();
        pending.sort_unstable();
        pending.dedup();
        if pending.is_empty() {
            "implemented".into()
        } else {
            format!("partial: pending {}", pending.join(", "))
        }
    }

    /// A one-line description of a size of the runnable grid.
    pub fn size_description(&self, quick: bool) -> String {
        let Some(protocol) = &self.protocol else {
            return if quick {
                "-".into()
            } else {
                self.paper_size.into()
            };
        };
        let chains = if quick {
            protocol.quick_chains
        } else {
            protocol.chains
        };
        let mut runs: Vec<String> = (protocol.cells)(quick)
            .iter()
            .map(|c| {
                format!(
                    "{} {} it ({} burn-in)",
                    c.target.label(),
                    c.iterations + c.burn_in,
                    c.burn_in
                )
            })
            .collect();
        runs.dedup();
        format!("{chains} chains; {}", runs.join(", "))
    }
}
