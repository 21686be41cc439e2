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
use anyhow::{Result, bail};

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

/// The experiment called `name`, or an error pointing to `list` that
/// suggests the experiments meant: those whose name contains `name`
/// (ignoring case, `_` for `-`), else the closest within two edits (and
/// says that `all`, which only `reproduce` and `regrade` take, is none).
pub fn named(name: &str) -> Result<Experiment> {
    if let Some(e) = find(name) {
        return Ok(e);
    }
    if name == "all" {
        bail!(
            "`all` applies to `reproduce` and `regrade` only: name one experiment here, once \
             for each (`cargo xtask list` names every experiment)"
        );
    }
    let wanted = name.to_lowercase().replace('_', "-");
    let names: Vec<&str> = all().iter().map(|e| e.name).collect();
    let mut meant: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !wanted.is_empty() && n.contains(wanted.as_str()))
        .collect();
    if meant.is_empty() {
        let distance = |n: &str| edit_distance(&wanted, n);
        if let Some(closest) = names.iter().map(|n| distance(n)).min().filter(|&d| d <= 2) {
            meant = names
                .iter()
                .copied()
                .filter(|n| distance(n) == closest)
                .collect();
        }
    }
    if meant.is_empty() {
        bail!("unknown experiment `{name}` (`cargo xtask list` names every experiment)");
    }
    let quoted: Vec<String> = meant.iter().map(|n| format!("`{n}`")).collect();
    bail!(
        "unknown experiment `{name}`: did you mean {}? (`cargo xtask list` names every \
         experiment)",
        quoted.join(", ")
    )
}

/// The number of single-character insertions, deletions and substitutions
/// that turn `a` into `b` (Levenshtein).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}
