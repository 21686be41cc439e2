//! Where a result came from: every `reproduce` run of an experiment leaves
//! one record in `DIR/<name>/runs/` (the command, the commit, the machine,
//! when it started and how long it took), so a results directory built over
//! several sittings or shards still says how it was made.

use crate::files::write_atomic;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;
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
}

impl RunRecord {
    /// The record of a run of this process that started from `commit` (see
    /// [`commit`]) at `started` and took `wall`.
    pub fn of_this_process(
        commit: String,
        started: SystemTime,
        wall: Duration,
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
        }
    }

    /// Writes the record to `dir/runs/` under a name no other run uses.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let runs = dir.join("runs");
        std::fs::create_dir_all(&runs).with_context(|| format!("creating {}", runs.display()))?;
        let path = runs.join(format!("{}-{}.json", self.started_unix, std::process::id()));
        write_atomic(&path, |w| {
            serde_json::to_writer_pretty(&mut *w, self)?;
            Ok(writeln!(w)?)
        })
    }

    /// Every record in `dir/runs/`, oldest first; an unreadable one is an
    /// error naming the file.
    pub fn read_all(dir: &Path) -> Result<Vec<Self>> {
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
                out.push(
                    serde_json::from_str(&text)
                        .with_context(|| format!("parsing {}", path.display()))?,
                );
            }
        }
        out.sort_by_key(|r: &Self| r.started_unix);
        Ok(out)
    }
}

/// The checked-out commit, `-dirty` if tracked files that go into the
/// build (everything but the committed results) differ from it.
pub fn commit() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_match_known_days() {
        // independent values: `date -u -d @T +%F`
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(951_782_400), "2000-02-29");
        assert_eq!(date(951_868_800), "2000-03-01");
        assert_eq!(date(1_798_761_599), "2026-12-31");
        assert_eq!(date(4_107_542_400), "2100-03-01");
    }

    #[test]
    fn records_round_trip_through_the_runs_folder() {
        let dir = std::env::temp_dir().join(format!("xtask-provenance-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let record = RunRecord {
            command: "xtask reproduce kamh-banana".into(),
            commit: "abc".into(),
            machine: "cpu".into(),
            started_unix: 5,
            wall_time_secs: 1.5,
            quick: false,
            shard: Some("1/2".into()),
        };
        record.write(&dir).unwrap();
        let read = RunRecord::read_all(&dir).unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].command, record.command);
        assert_eq!(read[0].shard.as_deref(), Some("1/2"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
