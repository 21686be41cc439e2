//! Where a result came from: every `reproduce` run of an experiment leaves
//! one record in `DIR/<name>/runs/` (the command, the commit, the machine,
//! when it started and how long it took), so a results directory built over
//! several sittings or shards still says how it was made. The record is
//! written when the run starts, marked unfinished, and rewritten whole when
//! it ends, so a run that was stopped still says that it started.

use crate::files::write_atomic;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One `reproduce` run of one experiment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// The command line, from `xtask` on.
    pub command: String,
    /// `git rev-parse HEAD`, with `-dirty` if tracked files had changes
    /// (`unknown` outside a git checkout).
    pub commit: String,
    /// CPU model, SIMD width and cores.
    pub machine: String,
    /// Start, in seconds since the Unix epoch.
    pub started_unix: u64,
    /// Wall time of the run.
    pub wall_time_secs: f64,
    /// Whether it ran at the reduced (`--quick`) size.
    pub quick: bool,
    /// The shard `i/N` it ran, if any.
    pub shard: Option<String>,
    /// The 1-, 5- and 15-minute load averages when it started (absent from
    /// records made before they were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_start: Option<[f64; 3]>,
    /// The same when it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_end: Option<[f64; 3]>,
    /// The worker threads the run used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// The settings it was restricted to (`--setting`): it ran only the
    /// cells with these settings; empty: every cell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<String>,
    /// Cells made by earlier runs that this run's records reproduced bit
    /// for bit in every value that does not depend on the clock, checked
    /// when its cells were folded into their summary (`target sampler
    /// setting`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reproduced: Vec<String>,
    /// Set when the run computed metrics from stored chains instead of
    /// running any (`recompute`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recomputed: Option<Recomputation>,
    /// Whether the run ended. A run writes its record when it starts, with
    /// this `false` (and no wall time or end load), and again whole when it
    /// ends: a run that was killed, failed or is still running leaves it
    /// `false`. Records made before runs recorded their start have no such
    /// field: they ended.
    #[serde(default = "ended", skip_serializing_if = "is_ended")]
    pub finished: bool,
}

/// A record without `finished` is one of a run that ended.
fn ended() -> bool {
    true
}

/// Whether `finished` is left out of a record (as in the records made
/// before it existed).
fn is_ended(finished: &bool) -> bool {
    *finished
}

/// What a `recompute` run added to a summary, and from which chains.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recomputation {
    /// The directory the chains were read from.
    pub chains: String,
    /// The metrics added (each a function of the stored draws alone).
    pub metrics: Vec<String>,
    /// The metrics the summary held whose every per-chain value the stored
    /// chains reproduced bit for bit before anything was added.
    pub checked: Vec<String>,
    /// The cells the metrics were added to (`target sampler setting`).
    pub cells: Vec<String>,
}

/// Whether a run's timings can be trusted, from its load averages.
#[derive(Debug, Clone, PartialEq)]
pub enum Load {
    /// The record predates load averages.
    NotRecorded,
    /// Nothing else ran: the 1-minute load was at most [`SPARE_LOAD`] when
    /// the run started, and at most its threads + [`SPARE_LOAD`] when it ended.
    Idle,
    /// Other work ran beside it (the reason in words).
    Loaded(String),
}

/// The load beyond the run's own threads that still counts as idle.
pub const SPARE_LOAD: f64 = 0.5;

impl RunRecord {
    /// Whether the run ran chains (or replicates): all but a `recompute`,
    /// which only read stored ones, so its commit and load say nothing of
    /// how the samplers ran or were timed.
    pub fn ran_chains(&self) -> bool {
        self.recomputed.is_none()
    }

    /// Whether the machine was loaded by other work during the run.
    pub fn load(&self) -> Load {
        let (Some(start), Some(end)) = (self.load_start, self.load_end) else {
            return Load::NotRecorded;
        };
        let threads = self.threads.unwrap_or(1) as f64;
        let mut why = Vec::new();
        if start[0] > SPARE_LOAD {
            why.push(format!("1-min load {:.2} at the start", start[0]));
        }
        if end[0] > threads + SPARE_LOAD {
            why.push(format!(
                "1-min load {:.2} at the end with {threads} threads of its own",
                end[0]
            ));
        }
        if why.is_empty() {
            Load::Idle
        } else {
            Load::Loaded(why.join(", "))
        }
    }
}

impl RunRecord {
    /// The record of a run of this process with `threads` workers that
    /// started from `commit` (see [`commit`]) at `started` with load
    /// averages `load_start` and took `wall`; the load averages at the end
    /// are read now.
    pub fn of_this_process(
        commit: String,
        started: SystemTime,
        wall: Duration,
        load_start: Option<[f64; 3]>,
        threads: usize,
        quick: bool,
        shard: Option<String>,
    ) -> Self {
        let args: Vec<String> = std::env::args().skip(1).collect();
        Self {
            command: format!("xtask {}", args.join(" ")),
            commit,
            machine: crate::machine::description(),
            started_unix: started
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            wall_time_secs: wall.as_secs_f64(),
            quick,
            shard,
            load_start,
            load_end: crate::machine::load_average(),
            threads: Some(threads),
            settings: Vec::new(),
            reproduced: Vec::new(),
            recomputed: None,
            finished: true,
        }
    }

    /// The record as its run writes it when it starts: not finished, with
    /// no wall time and no load at the end.
    pub fn unfinished(self) -> Self {
        Self {
            finished: false,
            wall_time_secs: 0.0,
            load_end: None,
            ..self
        }
    }

    /// Writes the record to `dir/runs/` under a name no other run uses.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let runs = dir.join("runs");
        std::fs::create_dir_all(&runs).with_context(|| format!("creating {}", runs.display()))?;
        self.write_as(&runs.join(format!("{}-{}.json", self.started_unix, std::process::id())))
    }

    /// Writes the record to `path`, atomically.
    pub fn write_as(&self, path: &Path) -> Result<()> {
        write_atomic(path, |w| {
            serde_json::to_writer_pretty(&mut *w, self)?;
            Ok(writeln!(w)?)
        })
    }

    /// Every record in `dir/runs/`, oldest first; an unreadable one is an
    /// error naming the file.
    pub fn read_all(dir: &Path) -> Result<Vec<Self>> {
        Ok(Self::read_files(dir)?.into_iter().map(|(_, r)| r).collect())
    }

    /// Every record in `dir/runs/` with its file, oldest first (of two
    /// started in the same second, one that did not finish last); an
    /// unreadable one is an error naming the file.
    pub fn read_files(dir: &Path) -> Result<Vec<(PathBuf, Self)>> {
        let runs = dir.join("runs");
        let Ok(entries) = std::fs::read_dir(&runs) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for entry in entries {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "json") {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
                let record: Self = serde_json::from_str(&text)
                    .with_context(|| format!("parsing {}", path.display()))?;
                out.push((path, record));
            }
        }
        // in a tie (seconds), a run that did not finish counts as the later
        // one: it cannot have ended before the other started
        out.sort_by_key(|(_, r)| (r.started_unix, !r.finished));
        Ok(out)
    }
}

/// The commit checked out in the source tree this binary was built from,
/// `-dirty` if tracked files that go into the build (everything but the
/// committed results) differ from it; `unknown` if that tree is gone (a
/// binary copied elsewhere). It is asked of that tree, not of the working
/// directory, which may lie outside it or in another repository.
pub fn commit() -> String {
    let tree = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root");
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(tree)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "HEAD"]) {
        Some(head) => {
            let dirty = git(&[
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                ":(exclude)results",
                ":(exclude)RESULTS.md",
            ])
            .is_some_and(|s| !s.is_empty());
            if dirty { format!("{head}-dirty") } else { head }
        }
        None => "unknown".to_string(),
    }
}

/// `YYYY-MM-DD` of a Unix time (proleptic Gregorian, UTC).
pub fn date(unix: u64) -> String {
    // days since 1970-01-01 to a civil date, by counting 400-year eras
    // from 0000-03-01 (so the leap day ends each era's year)
    let days = (unix / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
