//! The experiment framework: an experiment is a named protocol from one
//! figure of a paper — either a grid of cells (target × sampler × setting),
//! each run for a number of chains ([`Protocol`]), or a study that is not a
//! chain grid, run as independent replicates ([`Study`]) — plus the paper's
//! claims checked against our summary, and the figures.

use crate::size::Size;
use crate::spec::{BuiltTarget, Metric, SamplerSpec, TargetSpec};
use crate::summary::{Measurement, Summary};
use crate::verdict::ClaimCheck;

/// Where a cell's chains start.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Start {
    /// The target's own start ([`TargetSpec::start`]): the paper's fixed
    /// point where it has one, else an exact draw per chain.
    #[default]
    Target,
    /// A fixed point (its length must be the target's dimension).
    At(&'static [f64]),
    /// The origin.
    Origin,
}

impl Start {
    /// Chain starting point on `built` (of `target`); `rng` is the chain's
    /// setup stream, used by the target's own start only.
    pub fn point(
        self,
        target: &TargetSpec,
        built: &BuiltTarget,
        rng: &mut dyn rand::Rng,
    ) -> anyhow::Result<Vec<f64>> {
        let d = built.target().dim();
        match self {
            Self::Target => target.start(built, rng),
            Self::Origin => Ok(vec![0.0; d]),
            Self::At(x) if x.len() == d => Ok(x.to_vec()),
            Self::At(x) => anyhow::bail!(
                "a start of {} coordinates for the {d}-d target {}",
                x.len(),
                target.label()
            ),
        }
    }
}

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
    /// Where the chains start (a start other than the target's is named in
    /// `setting`, which is part of the cell's key).
    pub start: Start,
}

impl Cell {
    /// One cell per sampler on `target`, each with `iterations` post-burn-in
    /// steps after `burn_in` and no setting: most experiments' grid.
    pub fn per_sampler(
        target: TargetSpec,
        samplers: impl IntoIterator<Item = SamplerSpec>,
        iterations: u64,
        burn_in: u64,
    ) -> Vec<Cell> {
        samplers
            .into_iter()
            .map(|sampler| Cell {
                target,
                sampler,
                setting: String::new(),
                iterations,
                burn_in,
                start: Start::Target,
            })
            .collect()
    }

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
    /// The chain grid, for experiments that are one (`None` otherwise).
    pub protocol: Option<Protocol>,
    /// The study, for experiments that are not a chain grid (`None`
    /// otherwise). At most one of `protocol` and `study` is set; with
    /// neither the experiment is not implemented yet (reason in `missing`).
    pub study: Option<Study>,
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
    /// The papers' grid where the full size is smaller than the papers', in
    /// its grid or in its reference sample (`kmc-glass` runs the papers' grid
    /// at full size against a smaller benchmark); `None`: full is the papers'.
    pub paper: Option<PaperGrid>,
    /// The metric families computed on every chain.
    pub metrics: &'static [Metric],
    /// How the starting point and other fixed choices are made, for summary.md.
    pub notes: &'static str,
    /// The paper's claims, checked against a summary.
    pub claims: fn(&Summary) -> Vec<ClaimCheck>,
    /// The figures drawn from a summary (file name, SVG writer).
    pub figures: fn(&Summary, &std::path::Path) -> anyhow::Result<Vec<String>>,
}

/// The papers' grid of an experiment whose full size is reduced.
pub struct PaperGrid {
    /// Chains per cell.
    pub chains: usize,
    /// The cells.
    pub cells: fn() -> Vec<Cell>,
}

impl Protocol {
    /// Chains per cell at `size`.
    pub fn chains_at(&self, size: Size) -> usize {
        match (size, &self.paper) {
            (Size::Quick, _) => self.quick_chains,
            (Size::Paper, Some(paper)) => paper.chains,
            (Size::Full | Size::Paper, _) => self.chains,
        }
    }

    /// The grid at `size`.
    pub fn cells_at(&self, size: Size) -> Vec<Cell> {
        match (size, &self.paper) {
            (Size::Quick, _) => (self.cells)(true),
            (Size::Paper, Some(paper)) => (paper.cells)(),
            (Size::Full | Size::Paper, _) => (self.cells)(false),
        }
    }
}

/// A study: an experiment that is not a grid of MCMC chains (proposal
/// covariances at given points, trajectories from exact draws, …). It runs
/// as independent replicates (the papers' "runs" or "trials"), each with its
/// own seed; a replicate measures every row (target × method × setting) once,
/// and the summary aggregates every metric of a row over the replicates
/// exactly as a grid aggregates over chains (`summary.json` has the same
/// schema, with `chains` = replicates and `iterations` = `burn_in` = 0).
/// Shards split the replicates round robin (a study with one replicate runs
/// whole in shard 1/N, and the other shards have nothing to do).
pub struct Study {
    /// Replicates at full size.
    pub replicates: usize,
    /// Replicates with `--quick` (a study's full size is the papers').
    pub quick_replicates: usize,
    /// One replicate's size in words, at full (`false`) or quick size.
    pub size: fn(quick: bool) -> String,
    /// Runs one replicate: its rows, in a fixed order (every replicate must
    /// give the same rows).
    pub run: fn(&Replicate) -> anyhow::Result<Vec<Measurement>>,
    /// Fixed choices and deviations from the paper, for summary.md.
    pub notes: &'static str,
    /// The paper's claims, checked against a summary.
    pub claims: fn(&Summary) -> Vec<ClaimCheck>,
    /// The figures drawn from a summary (file names).
    pub figures: fn(&Summary, &std::path::Path) -> anyhow::Result<Vec<String>>,
}

/// What one replicate of a study gets.
pub struct Replicate<'a> {
    /// `--quick`.
    pub quick: bool,
    /// The replicate's own seed (from the master seed, the experiment's name
    /// and the index; independent of the shard and the thread count).
    pub seed: u64,
    /// Reports progress as (units done, units in total).
    pub progress: &'a (dyn Fn(u64, u64) + Sync),
}

impl Experiment {
    /// Whether the experiment can run (a grid or a study).
    pub fn is_runnable(&self) -> bool {
        self.protocol.is_some() || self.study.is_some()
    }

    /// Whether every cell of the grid can run now, some, or none.
    pub fn status(&self) -> String {
        if self.study.is_some() {
            return "implemented (study)".into();
        }
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

    /// Whether `Full` is smaller than the papers' size.
    pub fn full_is_reduced(&self) -> bool {
        self.protocol.as_ref().is_some_and(|p| p.paper.is_some())
    }

    /// A one-line description of a size of the runnable grid.
    pub fn size_description(&self, size: Size) -> String {
        let quick = size.is_quick();
        if let Some(study) = &self.study {
            let replicates = if quick {
                study.quick_replicates
            } else {
                study.replicates
            };
            return format!("{replicates} replicate(s) of {}", (study.size)(quick));
        }
        let Some(protocol) = &self.protocol else {
            return if quick {
                "-".into()
            } else {
                self.paper_size.into()
            };
        };
        let mut runs: Vec<String> = protocol
            .cells_at(size)
            .iter()
            .map(|c| {
                // `iterations` counts kept states: a thinned chain steps `thin` times per state
                let thin = c.sampler.thin();
                let kept = if thin > 1 {
                    format!(", every {thin}th state kept")
                } else {
                    String::new()
                };
                format!(
                    "{} {} it ({} burn-in{kept})",
                    c.target.label(),
                    c.iterations * thin + c.burn_in,
                    c.burn_in
                )
            })
            .collect();
        runs.dedup();
        format!("{} chains; {}", protocol.chains_at(size), runs.join(", "))
    }
}
