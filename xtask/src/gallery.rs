//! `cargo xtask gallery`: `RESULTS.md` from the experiments' results.
//!
//! For every experiment of `cargo xtask list` it reads
//! `RESULTS/<name>/summary.json` (the paper's claims with our evidence and a
//! verdict each), the run records in `RESULTS/<name>/runs/` (command, commit,
//! machine, wall time) and the figures beside them, and writes one section
//! per experiment: its size (full or reduced, with the exact sizes), how it
//! was run, the figures inline, and the claims with their verdicts. A table
//! at the top counts the verdicts per experiment. An experiment without
//! results gets the commands that would produce them (one machine, or a
//! Slurm array).
//!
//! Text above the [`MARKER`] line of an existing `RESULTS.md` (a
//! hand-written overview) is kept; everything below it is regenerated.

use crate::experiment::Experiment;
use crate::experiments;
use crate::files::write_atomic;
use crate::provenance::{Load, RunRecord, date};
use crate::size::Size;
use crate::verdict::{ClaimCheck, TIMED, Verdict, fmt};
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::Path;

/// What one experiment's results directory holds.
struct Entry {
    experiment: Experiment,
    /// `summary.json`, if the experiment has been run.
    summary: Option<Value>,
    /// Its claims and protocol checks.
    claims: Vec<ClaimCheck>,
    runs: Vec<RunRecord>,
    /// The SVG figures' file names, sorted.
    figures: Vec<String>,
}

impl Entry {
    fn read(experiment: Experiment, results: &Path) -> Result<Self> {
        let dir = results.join(experiment.name);
        let path = dir.join("summary.json");
        let summary: Option<Value> = match std::fs::read_to_string(&path) {
            Ok(text) => Some(
                serde_json::from_str(&text)
                    .with_context(|| format!("parsing {}", path.display()))?,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        if let Some(found) = summary.as_ref().map(|s| &s["experiment"])
            && found != experiment.name
        {
            bail!(
                "{} is not a summary of {} (its experiment: {found}): restore it, or rerun \
                 `cargo xtask reproduce {}`",
                path.display(),
                experiment.name,
                experiment.name
            );
        }
        let mut figures = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries {
                let name = entry?.file_name().to_string_lossy().into_owned();
                if name.ends_with(".svg") {
                    figures.push(name);
                }
            }
        }
        figures.sort();
        let claims = match summary.as_ref().map(|s: &Value| s["claims"].clone()) {
            Some(Value::Null) | None => Vec::new(),
            Some(claims) => serde_json::from_value(claims).with_context(|| {
                format!(
                    "reading the claims of {} (run `cargo xtask regrade {}`)",
                    path.display(),
                    experiment.name
                )
            })?,
        };
        Ok(Self {
            claims,
            runs: RunRecord::read_all(&dir)?,
            experiment,
            summary,
            figures,
        })
    }

    /// The paper's claims with verdict `verdict` (protocol checks aside).
    fn count(&self, verdict: Verdict) -> usize {
        self.claims
            .iter()
            .filter(|c| !c.protocol_check && c.verdict == verdict)
            .count()
    }

    /// How far the run's per-second figures can be trusted, in words.
    fn timing(&self) -> String {
        let loads: Vec<Load> = self
            .runs
            .iter()
            .filter(|r| r.ran_chains())
            .map(RunRecord::load)
            .collect();
        if loads.is_empty() || loads.contains(&Load::NotRecorded) {
            return "load not recorded".into();
        }
        let loaded: Vec<&str> = loads
            .iter()
            .filter_map(|l| match l {
                Load::Loaded(why) => Some(why.as_str()),
                _ => None,
            })
            .collect();
        if loaded.is_empty() {
            "timed on an idle machine".into()
        } else {
            format!("timed under load: {}", loaded.join("; "))
        }
    }

    /// Whether the results are at the papers' size: `--size paper`, or
    /// `full` where that is the papers', and no fewer chains (or
    /// replicates) than the paper's.
    fn is_full_size(&self) -> bool {
        let Some(summary) = &self.summary else {
            return false;
        };
        let paper_chains = match (&self.experiment.protocol, &self.experiment.study) {
            (Some(p), _) => p.chains_at(Size::Paper),
            (None, Some(s)) => s.replicates,
            (None, None) => return false,
        };
        let papers_size = summary["params"]["paper"] == true
            || (summary["params"]["quick"] == false && !self.experiment.full_is_reduced());
        papers_size
            && summary["params"]["chains"]
                .as_u64()
                .is_some_and(|c| c as usize >= paper_chains)
    }
}

/// The line below which `RESULTS.md` is generated.
pub const MARKER: &str =
    "<!-- Generated by `cargo xtask gallery` from here on: edit above this line. -->";

/// Writes `out` (Markdown) from the results under `results`; figure links
/// are relative to `out`'s folder. The part of an existing `out` above
/// [`MARKER`] is kept; an existing `out` without that line is an error
/// (the gallery did not write it).
pub fn main(results: &Path, out: &Path) -> Result<()> {
    let entries = experiments::all()
        .into_iter()
        .filter(Experiment::is_runnable)
        .map(|e| Entry::read(e, results))
        .collect::<Result<Vec<_>>>()?;
    if entries.iter().all(|e| e.summary.is_none()) {
        bail!(
            "{} holds no summary.json of any experiment (<name>/summary.json): give the root \
             that `reproduce --out` wrote to; {} was left as it was",
            results.display(),
            out.display()
        );
    }
    let base = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let link = pathdiff(results, base);
    let kept = match std::fs::read_to_string(out) {
        Ok(old) => match old.find(MARKER) {
            Some(i) => Some(old[..i].to_string()),
            None => bail!(
                "{} exists and holds no line `{MARKER}`, so the gallery did not write it: \
                 give another --out, or add that line where the generated part may start \
                 (the text above it is kept)",
                out.display()
            ),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("reading {}", out.display())),
    };
    let head = kept.unwrap_or_else(|| "# Results\n\n".to_string());
    let text = format!("{head}{MARKER}\n\n{}", render(&entries, &link));
    write_atomic(out, |w| Ok(w.write_all(text.as_bytes())?))?;
    say!("gallery: wrote {}", out.display());
    Ok(())
}

/// `path` relative to `base` when it lies under it (the usual case:
/// `results/` beside `RESULTS.md`), else as given.
fn pathdiff(path: &Path, base: &Path) -> String {
    let rel = path.strip_prefix(base).unwrap_or(path);
    let s = rel.to_string_lossy().replace('\\', "/");
    if s.is_empty() { ".".into() } else { s }
}

fn render(entries: &[Entry], results: &str) -> String {
    let mut md = String::from("## Summary: claims reproduced per experiment\n\n");
    let _ = writeln!(
        md,
        "What the papers claim and what we measured, experiment by experiment. \
         Each section names the run that produced it (command, commit, machine, wall time, \
         load), shows our figures and lists the paper's claims with our numbers, the rule that \
         decided each and a verdict. One rule decides every claim, on the paper's 80% intervals \
         (mean ± 1.2816·sd/√n over chains or replicates): **reproduced** when the claimed order \
         holds with disjoint intervals (a threshold: with the whole interval on the claimed \
         side), **refuted** when the opposite holds with disjoint intervals, **inconclusive** \
         otherwise, and whenever a side has no data (no draws at the compared time, KL = ∞); \
         **pending** when a cell the claim needs has not run. Claims about several rivals are \
         split into one claim per rival, or state their bundle rule. Protocol checks (settings \
         true by construction) are listed apart and not counted. Generated by \
         `cargo xtask gallery` from `{results}/<name>/`; rerun it after `cargo xtask reproduce` \
         or `cargo xtask regrade`.\n"
    );
    let columns: Vec<&str> = Verdict::ALL.iter().map(|v| v.word()).collect();
    let _ = writeln!(
        md,
        "| experiment | source | size | {} |\n| --- | --- | --- |{}",
        columns.join(" | "),
        " --- |".repeat(columns.len())
    );
    let mut totals = [0; Verdict::ALL.len()];
    for e in entries {
        let size = match (&e.summary, e.is_full_size()) {
            (None, _) => "not run yet",
            (Some(_), true) => "full",
            (Some(_), false) => "reduced",
        };
        let counts: Vec<String> = Verdict::ALL
            .iter()
            .zip(&mut totals)
            .map(|(&v, total)| {
                *total += e.count(v);
                e.count(v).to_string()
            })
            .collect();
        let _ = writeln!(
            md,
            "| [{name}](#{name}) | {source} | {size} | {} |",
            counts.join(" | "),
            name = e.experiment.name,
            source = e.experiment.source,
        );
    }
    let totals: Vec<String> = totals.iter().map(|t| format!("**{t}**")).collect();
    let _ = writeln!(md, "| all | | | {} |", totals.join(" | "));
    ensemble_table(&mut md, entries);
    for e in entries {
        render_entry(&mut md, e, results);
    }
    md
}

/// The figures of merit of the table comparing the ensemble with the
/// samplers beside it: (metric or curve, description, whether larger is better).
const MERITS: [(&str, &str, bool); 5] = [
    ("q_avg", "quantile error `q_avg`", false),
    ("mean_norm", "‖mean − exact (or benchmark) mean‖", false),
    ("mmd2", "MMD² to the benchmark", false),
    ("ess_min", "min ESS", true),
    ("ess_min_per_s", "min ESS per second", true),
];

/// A cell's mean of `metric`, or the last point of its mean curve `metric`.
fn final_mean(cell: &Value, metric: &str) -> Option<f64> {
    cell["metrics"][metric]["mean"]
        .as_f64()
        .or_else(|| cell["curves"][metric]["mean"].as_array()?.last()?.as_f64())
}

/// The table of every sampler's mean figures of merit on the targets where
/// emcee's ensemble ran beside them (the cells without a setting), the best
/// in bold.
fn ensemble_table(md: &mut String, entries: &[Entry]) {
    let mut rows = Vec::new();
    for e in entries {
        let Some(cells) = e.summary.as_ref().and_then(|s| s["cells"].as_array()) else {
            continue;
        };
        let mut targets: Vec<(&str, &str)> = Vec::new();
        for c in cells.iter().filter(|c| c["sampler"] == "Ensemble") {
            let key = (
                c["target"].as_str().unwrap_or(""),
                c["target_label"].as_str().unwrap_or(""),
            );
            if !targets.contains(&key) {
                targets.push(key);
            }
        }
        for (key, label) in targets {
            let here: Vec<&Value> = cells
                .iter()
                // the default protocol's cells; variants (a setting) are in the sections
                .filter(|c| {
                    c["target"] == key
                        && c["status"] == "done"
                        && c["setting"].as_str().unwrap_or("").is_empty()
                })
                .collect();
            let evaluations = here
                .iter()
                .find(|c| c["sampler"] == "Ensemble")
                .and_then(|c| Some(c["iterations"].as_u64()? + c["burn_in"].as_u64()?))
                .unwrap_or(0);
            for (metric, what, larger) in MERITS {
                let values: Vec<(&str, f64)> = here
                    .iter()
                    .filter_map(|c| Some((c["sampler"].as_str()?, final_mean(c, metric)?)))
                    .collect();
                if values.len() < 2 {
                    continue;
                }
                let best = values.iter().map(|v| v.1).fold(
                    if larger { f64::MIN } else { f64::MAX },
                    |a, b| {
                        if larger { a.max(b) } else { a.min(b) }
                    },
                );
                let shown: Vec<String> = values
                    .iter()
                    .map(|&(s, v)| {
                        if v == best {
                            format!("**{s} {}**", fmt(v))
                        } else {
                            format!("{s} {}", fmt(v))
                        }
                    })
                    .collect();
                let what = if crate::summary::depends_on_clock(metric) {
                    format!("{what} ({})", e.timing())
                } else {
                    what.to_string()
                };
                rows.push(format!(
                    "| [{name}](#{name}), {label} | {evaluations} | {what} | {} |",
                    shown.join(", "),
                    name = e.experiment.name
                ));
            }
        }
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\n### emcee's ensemble beside the papers' samplers\n\n\
         Means over chains at equal log-density evaluations per chain (the ensemble's walkers \
         share the budget of one chain), the best in bold, for the cells of our protocol (the \
         variants with a setting are in the sections); the sections below give the \
         intervals.\n\n\
         | experiment, target | evaluations per chain | figure of merit | samplers |\n\
         | --- | --- | --- | --- |"
    );
    for row in rows {
        let _ = writeln!(md, "{row}");
    }
}

fn render_entry(md: &mut String, e: &Entry, results: &str) {
    let x = &e.experiment;
    let _ = writeln!(md, "\n## {}\n\n{}: {}.\n", x.name, x.source, x.description);
    // the papers' size in words: the grid's own description where `full` is
    // the papers' size, the papers' (hand-written) sizes otherwise
    let papers = if x.full_is_reduced() {
        x.paper_size.to_string()
    } else {
        x.size_description(Size::Full)
    };
    let size_flag = if x.full_is_reduced() {
        " --size paper"
    } else {
        ""
    };
    let Some(summary) = &e.summary else {
        let _ = writeln!(
            md,
            "Not run yet. The papers' size: {papers}. On one machine: \
             `cargo xtask reproduce {name}{size_flag} --no-chains` (rerun the same command to \
             resume after an interruption). On a Slurm cluster (see the README's \"Sharding a \
             grid\"): `sbatch --array=1-16 --wrap 'target/release/xtask reproduce {name}{size_flag} \
             --no-chains --shard-from-env --out shards/$SLURM_ARRAY_TASK_ID'`, then \
             `target/release/xtask merge {name} shards/*`.",
            name = x.name
        );
        if let Some(note) = latest_unfinished(&e.runs) {
            let _ = writeln!(md, "\n{note}");
        }
        return;
    };
    let chains = &summary["params"]["chains"];
    let size = if e.is_full_size() && x.full_is_reduced() {
        format!("the papers' size ({papers})")
    } else if e.is_full_size() {
        // the grid's own size beside the papers' words, which differ in
        // places (more or fewer runs, longer or shorter chains)
        format!("`--size full` ({papers}); the papers': {}", x.paper_size)
    } else if summary["params"]["quick"] == true {
        format!(
            "**reduced**: `--quick` sizes ({}), {chains} chains or replicates; the papers': {papers}",
            x.size_description(Size::Quick),
        )
    } else if x.full_is_reduced() && summary["params"]["paper"] != true {
        format!(
            "**reduced**: `--size full` ({}; {chains} chains ran); the papers': {papers} \
             (`--size paper`; on a cluster as the README's \"Sharding a grid\" shows)",
            x.size_description(Size::Full),
        )
    } else {
        format!("**reduced**: {chains} chains or replicates; the papers': {papers}")
    };
    let _ = writeln!(md, "Size: {size}.\n");
    render_runs(md, &e.runs);
    if let Some(notes) = summary["notes"].as_str().filter(|n| !n.is_empty()) {
        let _ = writeln!(md, "Protocol: {notes}\n");
    }
    for figure in &e.figures {
        let _ = writeln!(
            md,
            "![{figure}]({results}/{name}/{figure})\n",
            name = x.name
        );
    }
    let _ = writeln!(
        md,
        "Tables of every metric: [`summary.md`]({results}/{name}/summary.md); \
         every per-chain value: [`summary.json`]({results}/{name}/summary.json).\n",
        name = x.name
    );
    let (claims, checks): (Vec<&ClaimCheck>, Vec<&ClaimCheck>) =
        e.claims.iter().partition(|c| !c.protocol_check);
    if claims.is_empty() {
        md.push_str("This experiment states no checkable claim.\n");
    } else {
        claims_table(md, &claims, &e.timing());
    }
    if !checks.is_empty() {
        md.push_str(
            "\nProtocol checks (settings true by construction, not counted as claims):\n\n",
        );
        claims_table(md, &checks, &e.timing());
    }
}

/// A table of claims: the claim, our numbers with the caveats, the rule and
/// the verdict (marked when it rests on a per-second figure, with the
/// run's load).
fn claims_table(md: &mut String, claims: &[&ClaimCheck], timing: &str) {
    md.push_str(
        "| the paper's claim | our numbers | rule | verdict |\n| --- | --- | --- | --- |\n",
    );
    for c in claims {
        let caveats = if c.caveats.is_empty() {
            String::new()
        } else {
            format!(" *Caveat: {}.*", c.caveats.join("; "))
        };
        let timed = if c.caveats.iter().any(|v| v == TIMED) {
            format!(" ({timing})")
        } else {
            String::new()
        };
        let _ = writeln!(
            md,
            "| {} | {}{} | {} | **{}**{timed} |",
            cell(&c.claim),
            cell(&c.evidence),
            cell(&caveats),
            cell(&c.rule),
            c.verdict.word()
        );
    }
}

/// The run records as one sentence each (several when the results were
/// made over sittings or shards).
fn render_runs(md: &mut String, runs: &[RunRecord]) {
    if runs.is_empty() {
        md.push_str("Run: no run record (made before runs were recorded).\n\n");
        return;
    }
    if let Some(note) = latest_unfinished(runs) {
        let _ = writeln!(
            md,
            "{note} The figures and claims below are those of the summary an earlier run \
             wrote; the directory may also hold the stopped run's records and chains.\n"
        );
    }
    let total: f64 = runs.iter().map(|r| r.wall_time_secs).sum();
    let stopped = runs.iter().filter(|r| !r.finished).count();
    if runs.len() > 1 {
        let mut commits: Vec<String> = runs
            .iter()
            .filter(|r| r.ran_chains())
            .map(|r| short(&r.commit))
            .collect();
        commits.dedup();
        let mixed = if commits.len() > 1 {
            format!(
                " They ran at different commits: cells from different sittings are comparable \
                 only if nothing their samplers use changed between them (`git diff --stat {} -- \
                 crates/` lists what did).",
                commits.join(" ")
            )
        } else {
            String::new()
        };
        let tally = if stopped == 0 {
            format!("{:.0} s of wall time in all", total)
        } else {
            format!(
                "{stopped} of them did not finish, {:.0} s of wall time in the others",
                total
            )
        };
        let _ = writeln!(
            md,
            "Runs: {} sittings or shards, {tally}.{mixed}\n",
            runs.len()
        );
    }
    for r in runs {
        let shard = r
            .shard
            .as_deref()
            .map_or(String::new(), |s| format!(", shard {s}"));
        let only = if r.settings.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = r.settings.iter().map(|s| format!("`{s}`")).collect();
            format!(", only the cells with setting {}", quoted.join(" or "))
        };
        let checked = if r.reproduced.is_empty() {
            String::new()
        } else {
            format!(
                "; it reproduced the earlier cells {} bit for bit (all but per-second values)",
                r.reproduced.join(", ")
            )
        };
        let recomputed = match &r.recomputed {
            None => String::new(),
            Some(x) => {
                let quoted = |names: &[String]| -> String {
                    let q: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
                    q.join(", ")
                };
                format!(
                    "; it ran no chain: it added {} to {} from the stored chains in `{}`, \
                     which first reproduced every chain's {} in the summary bit for bit",
                    quoted(&x.metrics),
                    x.cells.join(", "),
                    x.chains,
                    quoted(&x.checked)
                )
            }
        };
        let load = match (r.load_start, r.load_end) {
            (Some(start), Some(end)) => format!(
                "1-min load average {:.2} at the start, {:.2} at the end{}",
                start[0],
                end[0],
                if r.load() == Load::Idle {
                    ""
                } else {
                    " (under load)"
                }
            ),
            _ => "load not recorded".to_string(),
        };
        if !r.finished {
            let _ = writeln!(
                md,
                "- `{}` on {} at commit `{}`{shard}{only}: started on {}, **did not finish** \
                 (stopped, failed, or still running){checked}.",
                r.command,
                date(r.started_unix),
                short(&r.commit),
                r.machine
            );
            continue;
        }
        let _ = writeln!(
            md,
            "- `{}` on {} at commit `{}`{shard}{only}: {:.0} s wall time on {}; \
             {load}{checked}{recomputed}.",
            r.command,
            date(r.started_unix),
            short(&r.commit),
            r.wall_time_secs,
            r.machine
        );
    }
    md.push('\n');
}

/// A sentence saying that the latest of `runs` (oldest first) did not
/// finish, naming it; `None` if it finished.
fn latest_unfinished(runs: &[RunRecord]) -> Option<String> {
    let latest = runs.last().filter(|r| !r.finished)?;
    Some(format!(
        "**The latest run did not finish**: `{}`, started on {} at commit `{}` (stopped, \
         failed, or still running); rerun it to finish it (its finished chains are kept).",
        latest.command,
        date(latest.started_unix),
        short(&latest.commit)
    ))
}

/// A commit hash shortened to 12 characters (keeping a `-dirty` mark).
fn short(commit: &str) -> String {
    match commit.split_once('-') {
        Some((hash, rest)) => format!("{}-{rest}", &hash[..hash.len().min(12)]),
        None => commit[..commit.len().min(12)].to_string(),
    }
}

/// Text as a Markdown table cell (pipes escaped).
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}
