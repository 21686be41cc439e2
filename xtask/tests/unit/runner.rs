//! Tests of running, resuming and merging grids and studies.

use crate::common::tree;
use anyhow::Result;
use kameleon_samplers::chain_rng;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use xtask::experiment::{Experiment, Replicate, Study};
use xtask::experiments;
use xtask::ids::sanitize;
use xtask::runner::records::{RecordFile, read_record, write_record};
use xtask::runner::*;
use xtask::size::Size;
use xtask::summary::{CellSummary, JobRecord, RunParams, StudyRecord, Summary};
use xtask::verdict::Verdict;

/// The fastest grid experiment at --quick size.
const FAST_GRID: &str = "kamh-banana";

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xtask-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn options(out: &Path, shard: Option<Shard>) -> RunOptions {
    RunOptions {
        size: Size::Quick,
        seed: 7,
        chains: None,
        out: out.to_path_buf(),
        references: None,
        shard,
        settings: Vec::new(),
        write_chains: true,
        force: false,
        progress: false,
        record_run: false,
    }
}

/// Runs `e` as shards 1–3 of 3 into `root`/shard1 … shard3 (a shard's
/// run returns no summary) and returns those directories.
fn run_three_shards(e: &Experiment, root: &Path) -> Vec<PathBuf> {
    let shard_dirs: Vec<PathBuf> = (1..=3).map(|i| root.join(format!("shard{i}"))).collect();
    for (i, dir) in shard_dirs.iter().enumerate() {
        let shard = Shard {
            index: i + 1,
            count: 3,
        };
        assert!(reproduce(e, &options(dir, Some(shard))).unwrap().is_none());
    }
    shard_dirs
}

/// Checks a summary.json against the schema, reading it as untyped JSON
/// (so a field renamed in the struct breaks this test). A grid's cells
/// must have `accept` and `mean_norm`; a study's cells have
/// `iterations` = `burn_in` = 0 and metrics of their own.
fn check_schema(path: &Path, name: &str, study: bool) {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(v["experiment"], name);
    assert!(v["source"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(v["params"]["quick"].as_bool().unwrap());
    assert!(v["params"]["seed"].is_u64());
    let chains = v["params"]["chains"].as_u64().unwrap() as usize;
    let cells = v["cells"].as_array().unwrap();
    assert!(!cells.is_empty());
    let mut done = 0;
    for c in cells {
        for key in ["target", "target_label", "sampler", "setting", "status"] {
            assert!(c[key].is_string(), "{key} in {c}");
        }
        for key in ["chains", "iterations", "burn_in"] {
            assert!(c[key].is_u64(), "{key} in {c}");
        }
        assert!(c["wall_time_secs"].as_f64().unwrap() >= 0.0);
        let metrics = c["metrics"].as_object().unwrap();
        if c["status"] != "done" {
            assert!(c["status"].as_str().unwrap().starts_with("pending"));
            assert!(metrics.is_empty());
            continue;
        }
        done += 1;
        assert_eq!(c["chains"].as_u64().unwrap() as usize, chains);
        if study {
            assert_eq!(c["iterations"], 0);
            assert_eq!(c["burn_in"], 0);
            assert!(!metrics.is_empty(), "no metric in {c}");
        } else {
            for required in ["accept", "mean_norm"] {
                assert!(metrics.contains_key(required), "{required} missing in {c}");
            }
        }
        for (name, m) in metrics {
            let values: Vec<f64> = m["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect();
            assert_eq!(values.len(), chains, "{name}");
            let mean = values.iter().sum::<f64>() / chains as f64;
            assert!((m["mean"].as_f64().unwrap() - mean).abs() <= 1e-12 * mean.abs().max(1.0));
            let (lo, hi) = (m["q10"].as_f64().unwrap(), m["q90"].as_f64().unwrap());
            let min = values.iter().copied().fold(f64::INFINITY, f64::min);
            let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            assert!(min <= lo && lo <= hi && hi <= max, "{name}: {lo} {hi}");
            assert!(m["ci80_half_width"].as_f64().unwrap() >= 0.0);
        }
        if let Some(accept) = metrics.get("accept") {
            assert!((0.0..=1.0).contains(&accept["mean"].as_f64().unwrap()));
        }
        // Curves (optional): per-chain curves on common abscissae, with
        // pointwise mean and 10%/90% quantiles.
        let Some(curves) = c.get("curves") else {
            continue;
        };
        for (name, t) in curves.as_object().unwrap() {
            let floats = |v: &Value| -> Vec<f64> {
                v.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap())
                    .collect()
            };
            let x = floats(&t["x"]);
            assert!(!x.is_empty(), "{name}");
            let values: Vec<Vec<f64>> =
                t["chains"].as_array().unwrap().iter().map(floats).collect();
            assert_eq!(values.len(), chains, "{name}");
            let (mean, q10, q90) = (floats(&t["mean"]), floats(&t["q10"]), floats(&t["q90"]));
            for i in 0..x.len() {
                let column: Vec<f64> = values.iter().map(|v| v[i]).collect();
                let m = column.iter().sum::<f64>() / chains as f64;
                assert!(
                    (mean[i] - m).abs() <= 1e-12 * m.abs().max(1.0),
                    "{name}[{i}]"
                );
                let min = column.iter().copied().fold(f64::INFINITY, f64::min);
                let max = column.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                assert!(
                    min <= q10[i] && q10[i] <= q90[i] && q90[i] <= max,
                    "{name}[{i}]"
                );
            }
        }
    }
    assert!(done > 0, "no cell ran");
    for claim in v["claims"].as_array().unwrap() {
        for key in ["claim", "evidence", "rule"] {
            assert!(claim[key].is_string(), "{key} in {claim}");
        }
        assert!(claim["numbers"].is_array(), "{claim}");
        let verdict = claim["verdict"].as_str().unwrap();
        assert!(["reproduced", "refuted", "inconclusive", "pending"].contains(&verdict));
    }
}

/// Every implemented experiment (grid or study) runs end to end at
/// --quick size and writes a summary.json that fits the schema,
/// summary.md, its figures and (grids) one .npy per chain.
/// With `--references`, reference samples are read from and cached in
/// that directory, not the output root, so shards with outputs of their
/// own can share one benchmark.
#[test]
fn reference_samples_live_where_references_points() {
    let (out, refs) = (temp_dir("refs-out"), temp_dir("refs"));
    let mut opts = options(&out, None);
    opts.references = Some(refs.clone());
    opts.write_chains = false;
    let e = experiments::find("kmc-abc").unwrap();
    reproduce(&e, &opts).unwrap();
    assert!(refs.join("abc-benchmark/quick/benchmark.json").exists());
    assert!(!out.join("abc-benchmark").exists());
    assert!(out.join("kmc-abc/summary.json").exists());
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_dir_all(&refs).unwrap();
}

#[test]
fn every_implemented_experiment_runs_at_quick_size() {
    let out = temp_dir("quick");
    for e in experiments::all().iter().filter(|e| e.is_runnable()) {
        let summary = reproduce(e, &options(&out, None)).unwrap().unwrap();
        let dir = out.join(e.name);
        check_schema(&dir.join("summary.json"), e.name, e.study.is_some());
        assert_eq!(
            Summary::read_json(&dir.join("summary.json")).unwrap(),
            summary
        );
        // no claim is decided by a side without data (a sampler with no
        // draws at the compared time, KL = ∞)
        for claim in &summary.claims {
            assert!(claim.rests_on_data(), "{}: {claim:?}", e.name);
        }
        // the claims decide again from summary.json alone
        let regraded = xtask::runner::regrade(e, &out).unwrap();
        assert_eq!(regraded.claims, summary.claims, "{}", e.name);
        let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
        assert!(md.contains("## The paper's claims"));
        let figures: Vec<&str> = md
            .lines()
            .filter_map(|l| l.strip_prefix("![")?.split_once("](")?.1.strip_suffix(')'))
            .collect();
        assert!(!figures.is_empty());
        for f in figures {
            let svg = std::fs::read_to_string(dir.join(f)).unwrap();
            assert!(svg.starts_with("<svg"), "{f}");
        }
        for c in summary
            .cells
            .iter()
            .filter(|c| c.status == "done" && e.study.is_none())
        {
            for k in 0..c.chains {
                let mut npy = dir
                    .join("chains")
                    .join(sanitize(&c.target))
                    .join(sanitize(&c.sampler));
                if !c.setting.is_empty() {
                    npy = npy.join(sanitize(&c.setting));
                }
                let npy = npy.join(format!("{k}.npy"));
                let header = xtask::npy::read_chain_header(&npy).unwrap();
                assert_eq!(header.rows as u64, c.iterations);
            }
        }
    }
    std::fs::remove_dir_all(&out).unwrap();
}

/// The summary without what depends on the clock.
fn timeless(mut s: Summary) -> Summary {
    s.cells = s.cells.iter().map(CellSummary::timeless).collect();
    s.claims
        .retain(|c| !c.claim.contains("per second") && !c.claim.contains("wall time"));
    s
}

/// Three shards merged give the one-run summary and the same chain files,
/// whatever the thread count; a merge with a shard missing fails and names
/// the missing jobs. Checked on a plain grid and on one with curves and a
/// cached reference sample.
#[test]
fn shards_merge_into_the_single_run_summary() {
    // a grid experiment with scalar metrics, one with curves, and one with
    // curves and a cached reference sample
    for name in ["kamh-banana", "ckam-bimodal", "kmc-abc"] {
        check_shards_merge(name);
    }
}

fn check_shards_merge(name: &str) {
    let e = experiments::find(name).unwrap();
    let root = temp_dir(&format!("shards-{name}"));
    let single_dir = root.join("single");
    let single = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(|| reproduce(&e, &options(&single_dir, None)))
        .unwrap()
        .unwrap();
    let shard_dirs = run_three_shards(&e, &root);
    let incomplete = merge(&e, &shard_dirs[..2], &root.join("bad"));
    let message = format!("{:#}", incomplete.unwrap_err());
    assert!(message.contains("missing"), "{message}");
    // A failed merge writes nothing, not even the output directory.
    assert!(!root.join("bad").exists());
    let merged_dir = root.join("merged");
    let merged = merge(&e, &shard_dirs, &merged_dir).unwrap();
    assert_eq!(timeless(merged), timeless(single.clone()));
    for c in single.cells.iter().filter(|c| c.status == "done") {
        for k in 0..c.chains {
            let rel = PathBuf::from(name)
                .join("chains")
                .join(&c.target)
                .join(&c.sampler)
                .join(format!("{k}.npy"));
            let a = std::fs::read(single_dir.join(&rel)).unwrap();
            let b = std::fs::read(merged_dir.join(&rel)).unwrap();
            assert_eq!(a, b, "{}", rel.display());
        }
    }
    std::fs::remove_dir_all(&root).unwrap();
}

/// A study for the framework's tests: two rows, each the mean of
/// normal draws from the replicate's seed, and a figure.
fn fixture_study() -> Experiment {
    fn run(r: &Replicate) -> Result<Vec<xtask::summary::Measurement>> {
        use rand::RngExt;
        let mut rng = chain_rng(r.seed, 0);
        (r.progress)(0, 2);
        let rows = (0..2)
            .map(|row| {
                let draws = (0..100).map(|_| rng.sample::<f64, _>(rand_distr::StandardNormal));
                xtask::summary::Measurement {
                    target: "normal".into(),
                    target_label: "N(0, 1)".into(),
                    method: "mean".into(),
                    setting: format!("row={row}"),
                    wall_time_secs: 0.0,
                    metrics: BTreeMap::from([("mean".into(), draws.sum::<f64>() / 100.0)]),
                }
            })
            .collect();
        (r.progress)(2, 2);
        Ok(rows)
    }
    fn figures(_: &Summary, dir: &Path) -> Result<Vec<String>> {
        std::fs::write(dir.join("fixture.svg"), "<svg/>")?;
        Ok(vec!["fixture.svg".into()])
    }
    Experiment {
        name: "fixture-study",
        source: "the framework's tests",
        description: "means of normal draws",
        paper_size: "-",
        protocol: None,
        study: Some(Study {
            replicates: 5,
            quick_replicates: 5,
            size: |_| "two means of 100 draws".into(),
            run,
            notes: "A test fixture.",
            claims: |_| Vec::new(),
            figures,
        }),
        missing: "",
    }
}

/// A study runs, fits the schema, and three shards merged give the
/// one-run summary (replicates split round robin); a merge with a shard
/// missing fails naming the missing replicates.
#[test]
fn study_shards_merge_into_the_single_run_summary() {
    let e = fixture_study();
    let root = temp_dir("study-shards");
    let single = reproduce(&e, &options(&root.join("single"), None))
        .unwrap()
        .unwrap();
    check_schema(
        &root.join("single").join(e.name).join("summary.json"),
        e.name,
        true,
    );
    assert_eq!(single.cells.len(), 2);
    assert_eq!(single.cells[0].metrics["mean"].values.len(), 5);
    // Replicates differ (own seeds) and are N(0, 1/100) means: |mean| < 5/√100.
    let values = &single.cells[0].metrics["mean"].values;
    assert!(values.windows(2).all(|w| w[0] != w[1]));
    assert!(values.iter().all(|v| v.abs() < 0.5));
    let shard_dirs = run_three_shards(&e, &root);
    let message = format!(
        "{:#}",
        merge(&e, &shard_dirs[1..], &root.join("bad")).unwrap_err()
    );
    assert!(
        message.contains("missing") && message.contains("replicate-0"),
        "{message}"
    );
    assert!(!root.join("bad").exists());
    let merged = merge(&e, &shard_dirs, &root.join("merged")).unwrap();
    assert_eq!(timeless(merged), timeless(single));
    let md = std::fs::read_to_string(root.join("merged").join(e.name).join("summary.md")).unwrap();
    assert!(md.contains("5 replicate(s)") && md.contains("![fixture.svg](fixture.svg)"));
    std::fs::remove_dir_all(&root).unwrap();
}

/// The chain files under an experiment directory.
fn chains(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    tree(&dir.join("chains"))
}

/// A rerun repairs what an interrupted or careless run left: a torn
/// `.npy` (its record exists), a deleted `.npy`, the chains of a
/// `--no-chains` run, and a damaged record (reported, not fatal). Each
/// repaired file is identical to the original.
#[test]
fn reruns_repair_damaged_and_missing_outputs() {
    let e = experiments::find(FAST_GRID).unwrap();
    let root = temp_dir("repair");
    let dir = root.join(e.name);
    let first = reproduce(&e, &options(&root, None)).unwrap().unwrap();
    let good_chains = chains(&dir);
    let good_jobs = tree(&dir.join("jobs"));
    let (torn, whole) = good_chains.iter().next().unwrap();
    let torn = dir.join("chains").join(torn);
    std::fs::write(&torn, &whole[..whole.len() - 8]).unwrap();
    let (deleted, _) = good_chains.iter().nth(1).unwrap();
    std::fs::remove_file(dir.join("chains").join(deleted)).unwrap();
    let (damaged, _) = good_jobs.iter().next().unwrap();
    let damaged = dir.join("jobs").join(damaged);
    std::fs::write(&damaged, b"{\"experiment\": ").unwrap();
    let again = reproduce(&e, &options(&root, None)).unwrap().unwrap();
    assert_eq!(timeless(again), timeless(first.clone()));
    assert_eq!(chains(&dir), good_chains);
    let record: JobRecord = read_record(&damaged).unwrap().unwrap();
    let original: JobRecord =
        serde_json::from_slice(&good_jobs[damaged.strip_prefix(dir.join("jobs")).unwrap()])
            .unwrap();
    assert_eq!(record.timeless(), original.timeless());

    // A --no-chains run, then a run that keeps chains writes them all.
    let bare = temp_dir("repair-bare");
    let opts = RunOptions {
        write_chains: false,
        ..options(&bare, None)
    };
    reproduce(&e, &opts).unwrap();
    assert!(!bare.join(e.name).join("chains").exists());
    let full = reproduce(&e, &options(&bare, None)).unwrap().unwrap();
    assert_eq!(timeless(full), timeless(first));
    assert_eq!(chains(&bare.join(e.name)), good_chains);
    std::fs::remove_dir_all(&root).unwrap();
    std::fs::remove_dir_all(&bare).unwrap();
}

/// A run into a directory another run holds fails at once, naming the
/// holder's pid and the lock file; it runs once the lock is released.
#[test]
fn a_second_run_into_a_locked_directory_fails_at_once() {
    let e = fixture_study();
    let root = temp_dir("locked");
    let dir = experiment_dir(&root, &e);
    let lock = open_output(&dir, None).unwrap();
    let message = format!("{:#}", reproduce(&e, &options(&root, None)).unwrap_err());
    assert!(
        message.contains(&format!("pid {}", std::process::id()))
            && message.contains(&dir.join(".lock").display().to_string()),
        "{message}"
    );
    assert!(!dir.join("summary.json").exists());
    drop(lock);
    reproduce(&e, &options(&root, None)).unwrap().unwrap();
    std::fs::remove_dir_all(&root).unwrap();
}

/// A `--setting` that no cell has is an error before anything is written,
/// listing every setting of the grid once, quoted as the flag takes it
/// (the cells without a setting as `""`).
#[test]
fn an_unknown_setting_lists_the_grids_settings_once() {
    let e = experiments::find(FAST_GRID).unwrap();
    let out = temp_dir("setting");
    let opts = RunOptions {
        settings: vec!["cod".into()],
        ..options(&out, None)
    };
    let message = format!("{:#}", reproduce(&e, &opts).unwrap_err());
    assert!(
        message.contains("`cod`")
            && message.ends_with(r#"its settings: "", "adapt=always", "code""#),
        "{message}"
    );
    assert!(!out.exists());
}

/// Shards made with other run parameters (another --seed, or a stale
/// record of an earlier run left in a reused directory) do not merge: the
/// error names a record of each and their parameters as the flags that
/// made them.
#[test]
fn a_merge_of_disagreeing_shards_names_their_records_and_flags() {
    let e = fixture_study();
    let root = temp_dir("merge-params");
    let (a, b) = (root.join("a"), root.join("b"));
    let shard = |index| Some(Shard { index, count: 2 });
    reproduce(&e, &options(&a, shard(1))).unwrap();
    let other_seed = RunOptions {
        seed: 8,
        ..options(&b, shard(2))
    };
    reproduce(&e, &other_seed).unwrap();
    let message = format!(
        "{:#}",
        merge(&e, &[a.clone(), b.clone()], &root.join("out")).unwrap_err()
    );
    let record = |dir: &Path, k: usize| {
        dir.join(e.name)
            .join("jobs")
            .join(format!("replicate-{k}.json"))
    };
    assert!(
        message.contains(&record(&a, 0).display().to_string())
            && message.contains(&record(&b, 1).display().to_string())
            && message.contains("--size quick --seed 7 --chains 5")
            && message.contains("--size quick --seed 8 --chains 5"),
        "{message}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

/// Merging the outputs of one experiment under another's name fails
/// naming the experiment they hold, whether given as the output root or
/// as the experiment's own directory.
#[test]
fn a_merge_under_another_name_names_the_experiment_found() {
    let e = fixture_study();
    let root = temp_dir("merge-name");
    reproduce(&e, &options(&root, None)).unwrap();
    let grid = experiments::find(FAST_GRID).unwrap();
    for input in [root.clone(), root.join(e.name)] {
        let message = format!(
            "{:#}",
            merge(&grid, std::slice::from_ref(&input), &root.join("out")).unwrap_err()
        );
        assert!(
            message.contains(&input.display().to_string())
                && message.contains(e.name)
                && message.contains(FAST_GRID),
            "{message}"
        );
    }
    assert!(!root.join("out").exists());
    std::fs::remove_dir_all(&root).unwrap();
}

/// A restricted run folded from the directory of the whole run it adds to
/// (the `--out` both used): the fold checks only the cells of its
/// settings, only the restricted run's record says it reproduced cells,
/// and only those; the record of the run that made the summary claims no
/// reproduction of its own cells.
#[test]
fn a_fold_credits_only_the_restricted_run_with_what_it_reproduced() {
    use xtask::provenance::RunRecord;
    let e = experiments::find(FAST_GRID).unwrap();
    let root = temp_dir("fold-credit");
    let dir = root.join(e.name);
    let record = |started_unix: u64, settings: Vec<String>| RunRecord {
        started_unix,
        settings,
        ..RunRecord::of_this_process(
            "c0ffee".into(),
            std::time::SystemTime::now(),
            std::time::Duration::from_secs(1),
            None,
            1,
            true,
            None,
        )
    };
    reproduce(&e, &options(&root, None)).unwrap();
    record(1, Vec::new()).write(&dir).unwrap();
    let restricted = RunOptions {
        settings: vec!["code".into()],
        ..options(&root, None)
    };
    reproduce(&e, &restricted).unwrap();
    record(2, vec!["code".into()]).write(&dir).unwrap();
    let folded = fold(&e, std::slice::from_ref(&root), &root).unwrap();
    // the whole run's records beside it are not the restricted run's cells
    assert!(folded.added.is_empty());
    let labels: Vec<&str> = folded.reproduced.iter().map(|c| c.label.as_str()).collect();
    let code_cells = (e.protocol.as_ref().unwrap().cells)(true)
        .iter()
        .filter(|c| c.setting == "code")
        .count();
    assert_eq!(labels.len(), code_cells, "{labels:?}");
    assert!(labels.iter().all(|l| l.ends_with(" code")), "{labels:?}");
    let runs = RunRecord::read_all(&dir).unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs[0].reproduced.is_empty(), "{:?}", runs[0].reproduced);
    assert!(!runs[1].reproduced.is_empty());
    assert!(
        runs[1]
            .reproduced
            .iter()
            .all(|cell| cell.ends_with(" code")),
        "{:?}",
        runs[1].reproduced
    );
    std::fs::remove_dir_all(&root).unwrap();
}

/// A merge copies the shards' run records beside the merged summary (as
/// a fold does), so that the results still say how, where and at which
/// commits they were made; a damaged one fails the merge, naming it,
/// before anything is written.
#[test]
fn a_merge_keeps_the_shards_run_records() {
    use xtask::provenance::RunRecord;
    let e = fixture_study();
    let root = temp_dir("merge-runs");
    let shard_dirs = run_three_shards(&e, &root);
    for (i, dir) in shard_dirs.iter().enumerate() {
        RunRecord {
            started_unix: i as u64,
            ..RunRecord::of_this_process(
                format!("commit{i}"),
                std::time::SystemTime::now(),
                std::time::Duration::from_secs(1),
                None,
                1,
                true,
                Some(format!("{}/3", i + 1)),
            )
        }
        .write(&dir.join(e.name))
        .unwrap();
    }
    let runs_of = |dir: &Path| -> Vec<(Option<String>, String)> {
        RunRecord::read_all(&dir.join(e.name))
            .unwrap()
            .into_iter()
            .map(|r| (r.shard, r.commit))
            .collect()
    };
    let expected: Vec<(Option<String>, String)> = (0..3)
        .map(|i| (Some(format!("{}/3", i + 1)), format!("commit{i}")))
        .collect();
    let merged = root.join("merged");
    merge(&e, &shard_dirs, &merged).unwrap();
    assert_eq!(runs_of(&merged), expected);
    // merging again (into the same place) adds no copies
    merge(&e, &shard_dirs, &merged).unwrap();
    assert_eq!(runs_of(&merged), expected);
    // shards sharing one output directory: each record once
    let shared = root.join("shared");
    for dir in &shard_dirs {
        let from = dir.join(e.name);
        let to = shared.join(e.name);
        for sub in ["jobs", "runs"] {
            std::fs::create_dir_all(to.join(sub)).unwrap();
            for f in std::fs::read_dir(from.join(sub)).unwrap() {
                let f = f.unwrap();
                std::fs::copy(f.path(), to.join(sub).join(f.file_name())).unwrap();
            }
        }
    }
    merge(&e, std::slice::from_ref(&shared), &root.join("from-shared")).unwrap();
    assert_eq!(runs_of(&root.join("from-shared")), expected);
    // a damaged run record fails the merge, naming it, and nothing is written
    let damaged = shard_dirs[1].join(e.name).join("runs").join("bad.json");
    std::fs::write(&damaged, b"{").unwrap();
    let out = root.join("bad");
    let message = format!("{:#}", merge(&e, &shard_dirs, &out).unwrap_err());
    assert!(
        message.contains(&damaged.display().to_string()),
        "{message}"
    );
    assert!(!out.exists());
    std::fs::remove_dir_all(&root).unwrap();
}

/// A merge refuses damaged records and two shards that disagree on a
/// job, naming the files, and writes nothing.
#[test]
fn merge_refuses_damaged_and_conflicting_records() {
    let e = fixture_study();
    let root = temp_dir("merge-bad");
    let (a, b) = (root.join("a"), root.join("b"));
    reproduce(&e, &options(&a, None)).unwrap();
    reproduce(&e, &options(&b, None)).unwrap();
    // The same results with other wall times merge (one job run twice).
    let path = |dir: &Path| dir.join(e.name).join("jobs").join("replicate-1.json");
    let mut record: StudyRecord = read_record(&path(&b)).unwrap().unwrap();
    record.wall_time_secs += 1.0;
    write_record(&b.join(e.name).join("jobs"), &record).unwrap();
    merge(&e, &[a.clone(), b.clone()], &root.join("ok")).unwrap();
    // Other results do not.
    record.rows[0].metrics.insert("mean".into(), 42.0);
    write_record(&b.join(e.name).join("jobs"), &record).unwrap();
    let out = root.join("out");
    let message = format!(
        "{:#}",
        merge(&e, &[a.clone(), b.clone()], &out).unwrap_err()
    );
    assert!(
        message.contains(&path(&a).display().to_string())
            && message.contains(&path(&b).display().to_string()),
        "{message}"
    );
    std::fs::write(path(&b), b"not json").unwrap();
    let message = format!("{:#}", merge(&e, &[a, b.clone()], &out).unwrap_err());
    assert!(
        message.contains(&path(&b).display().to_string()),
        "{message}"
    );
    assert!(!out.exists());
    std::fs::remove_dir_all(&root).unwrap();
}

/// Slurm's variables are parsed strictly (an error names the variable
/// and its value), arrays may start anywhere and have a step, and an
/// srun step shards by its task rank.
#[test]
fn shards_come_from_slurm_variables() {
    let shard = |vars: &[(&str, &str)]| {
        Shard::from_vars(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
    };
    let ok = |vars: &[(&str, &str)], index, count| {
        assert_eq!(shard(vars).unwrap(), Shard { index, count }, "{vars:?}");
    };
    let fails = |vars: &[(&str, &str)], expected: &str| {
        let message = format!("{:#}", shard(vars).unwrap_err());
        assert!(message.contains(expected), "{vars:?}: {message}");
    };
    let id = "SLURM_ARRAY_TASK_ID";
    let (min, count, step) = (
        "SLURM_ARRAY_TASK_MIN",
        "SLURM_ARRAY_TASK_COUNT",
        "SLURM_ARRAY_TASK_STEP",
    );
    ok(&[(id, "0"), (min, "0"), (count, "8")], 1, 8);
    ok(&[(id, "8"), (min, "1"), (count, "8")], 8, 8);
    ok(&[(id, "3"), (count, "4")], 4, 4);
    ok(&[(id, "15"), (min, "1"), (step, "2"), (count, "8")], 8, 8);
    ok(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "3")], 1, 3);
    // The array takes precedence over the step's tasks.
    ok(
        &[
            (id, "2"),
            (min, "1"),
            (count, "2"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "3"),
        ],
        2,
        2,
    );
    fails(
        &[(id, "1"), (min, "x1"), (count, "8")],
        "SLURM_ARRAY_TASK_MIN=\"x1\"",
    );
    fails(&[(id, "-1"), (count, "8")], "SLURM_ARRAY_TASK_ID=\"-1\"");
    fails(
        &[(id, "1"), (min, "2"), (count, "8")],
        "SLURM_ARRAY_TASK_ID=1 is below SLURM_ARRAY_TASK_MIN=2",
    );
    fails(
        &[(id, "9"), (min, "1"), (count, "8")],
        "SLURM_ARRAY_TASK_COUNT=8",
    );
    fails(
        &[(id, "2"), (min, "1"), (step, "2"), (count, "8")],
        "SLURM_ARRAY_TASK_STEP=2",
    );
    fails(
        &[(id, "1"), (min, "1"), (step, "0"), (count, "8")],
        "SLURM_ARRAY_TASK_STEP=0",
    );
    fails(&[(id, "1")], "SLURM_ARRAY_TASK_COUNT is not set");
    fails(&[(id, "0"), (count, "0")], "SLURM_ARRAY_TASK_COUNT=0");
    fails(
        &[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "3")],
        "SLURM_PROCID=3",
    );
    fails(
        &[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "three")],
        "SLURM_NTASKS=\"three\"",
    );
    fails(&[], "none is set");
}

#[test]
fn shards_parse_and_partition_the_jobs() {
    assert_eq!(
        "2/5".parse::<Shard>().unwrap(),
        Shard { index: 2, count: 5 }
    );
    for bad in ["0/3", "4/3", "1/0", "3", "a/b"] {
        assert!(bad.parse::<Shard>().is_err(), "{bad}");
    }
    // Every job lands in exactly one shard, and shard sizes differ by at most one.
    let n_jobs = 17;
    for count in 1..6 {
        let shards: Vec<Shard> = (1..=count).map(|index| Shard { index, count }).collect();
        for job in 0..n_jobs {
            assert_eq!(shards.iter().filter(|s| s.contains(job)).count(), 1);
        }
        let sizes: Vec<usize> = shards
            .iter()
            .map(|s| (0..n_jobs).filter(|&j| s.contains(j)).count())
            .collect();
        let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
        assert!(max - min <= 1, "{sizes:?}");
    }
}

#[test]
fn cells_get_distinct_seeds_that_follow_the_master_seed() {
    let cells = (experiments::find("kamh-banana")
        .unwrap()
        .protocol
        .unwrap()
        .cells)(true);
    let seeds: Vec<u64> = cells.iter().map(|c| cell_seed(7, c)).collect();
    let mut unique = seeds.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), seeds.len());
    assert_ne!(cell_seed(8, &cells[0]), seeds[0]);
}

mod record_fuzz {
    //! Job and study records are files a user may hand us (copied
    //! between machines, cut by a full disk, edited by hand): reading
    //! any bytes gives a record or an error naming the file, never a
    //! panic.
    use crate::fuzz::{for_each_case, random_bytes};
    use std::path::Path;
    use xtask::runner::records::read_record;
    use xtask::summary::{JobRecord, StudyRecord};

    fn read_both(path: &Path, bytes: &[u8]) {
        std::fs::write(path, bytes).unwrap();
        for outcome in [
            read_record::<JobRecord>(path).map(|r| r.is_some()),
            read_record::<StudyRecord>(path).map(|r| r.is_some()),
        ] {
            match outcome {
                Ok(found) => assert!(found, "an existing file reads as missing"),
                Err(e) => assert!(
                    format!("{e:#}").contains(&path.display().to_string()),
                    "the error does not name the file: {e:#}"
                ),
            }
        }
    }

    /// The bytes of JSON-like text: braces, brackets, quotes, separators,
    /// digits, lower-case letters and the characters of numbers.
    const JSON_LIKE: &str = "{}[]\":,0123456789abcdefghijklmnopqrstuvwxyz_.eE+- ";

    #[test]
    fn arbitrary_bytes_never_panic() {
        let dir = tempdir("bytes");
        for_each_case(
            3,
            256,
            |rng| random_bytes(rng, 256, &[]),
            |bytes| read_both(&dir.join("job.json"), bytes),
        );
    }

    #[test]
    fn json_like_text_never_panics() {
        let dir = tempdir("json");
        for_each_case(
            4,
            256,
            |rng| random_bytes(rng, 300, JSON_LIKE.as_bytes()),
            |text| read_both(&dir.join("job.json"), text),
        );
    }

    fn tempdir(tag: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("xtask-record-fuzz-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}

/// Regrading needs a summary.json of the same experiment, and says so.
#[test]
fn regrade_refuses_missing_and_foreign_summaries() {
    let out = temp_dir("regrade");
    let e = experiments::find("kamh-banana").unwrap();
    let err = regrade(&e, &out).unwrap_err();
    assert!(
        format!("{err:#}").contains("run `reproduce` first"),
        "{err:#}"
    );
    let dir = out.join("kamh-banana");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("summary.json"), "{not json").unwrap();
    let err = regrade(&e, &out).unwrap_err();
    assert!(format!("{err:#}").contains("parsing"), "{err:#}");
    let foreign = Summary {
        experiment: "kamh-flower".into(),
        source: String::new(),
        params: RunParams::new(Size::Quick, 1, 2),
        notes: String::new(),
        cells: Vec::new(),
        claims: Vec::new(),
    };
    foreign.write_json(&dir.join("summary.json")).unwrap();
    let err = regrade(&e, &out).unwrap_err();
    assert!(format!("{err:#}").contains("not kamh-banana"), "{err:#}");
    // a summary whose per-chain values were emptied (a figure indexed them)
    let study = experiments::find("kamh-proposals").unwrap();
    let own = reproduce(&study, &options(&out, None)).unwrap().unwrap();
    let mut emptied = own.clone();
    let (name, stats) = emptied.cells[0].metrics.iter_mut().next().unwrap();
    let name = name.clone();
    stats.values.clear();
    let path = out.join(study.name).join("summary.json");
    emptied.write_json(&path).unwrap();
    let err = format!("{:#}", regrade(&study, &out).unwrap_err());
    assert!(
        err.contains(&path.display().to_string()) && err.contains(&name),
        "{err}"
    );
    std::fs::remove_dir_all(&out).unwrap();
}

/// A `fold`, `merge` or `recompute` killed between renaming the experiment
/// directory aside and renaming its new copy in left the directory
/// missing: `reproduce` puts the old one back before it starts, rather
/// than starting an empty directory over it.
#[test]
fn reproduce_puts_back_a_directory_a_killed_swap_left_aside() {
    let out = temp_dir("killed-swap");
    let e = experiments::find(FAST_GRID).unwrap();
    let first = reproduce(&e, &options(&out, None)).unwrap().unwrap();
    let dir = out.join(e.name);
    std::fs::write(dir.join("notes.txt"), "kept").unwrap();
    let aside = out.join(format!(".{}.4242.7.old.tmp", e.name));
    std::fs::rename(&dir, &aside).unwrap();
    let again = reproduce(&e, &options(&out, None)).unwrap().unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "kept"
    );
    assert!(!aside.exists());
    assert_eq!(
        serde_json::to_value(&again.cells).unwrap(),
        serde_json::to_value(&first.cells).unwrap()
    );
    std::fs::remove_dir_all(&out).unwrap();
}

/// `regrade all` regrades every experiment with a summary, and a results
/// root with none (a mistyped `--results`) is an error naming it, not a
/// silent success.
#[test]
fn regrade_all_needs_some_summary() {
    let out = temp_dir("regrade-all");
    for missing in [out.clone(), out.join("nowhere")] {
        let _ = std::fs::create_dir_all(&out);
        let err = format!("{:#}", regrade_all(&missing).unwrap_err());
        assert!(
            err.contains(&missing.display().to_string()) && err.contains("no summary.json"),
            "{err}"
        );
    }
    let e = experiments::find(FAST_GRID).unwrap();
    reproduce(&e, &options(&out, None)).unwrap();
    let regraded = regrade_all(&out).unwrap();
    assert_eq!(
        regraded
            .iter()
            .map(|s| s.experiment.as_str())
            .collect::<Vec<_>>(),
        [FAST_GRID]
    );
    std::fs::remove_dir_all(&out).unwrap();
}

/// A run restricted to some settings, folded into a summary that lacks its
/// new cells, gives the one-run summary (up to the clock); every cell it
/// did not add stays byte for byte as it was, cells the summary held are
/// checked bit for bit, and the run's record is copied beside the summary.
/// Records that disagree with a held cell, an incomplete cell, other run
/// parameters or an input without a run record are errors that write
/// nothing.
#[test]
fn a_restricted_run_folds_into_a_summary_leaving_other_cells_as_they_were() {
    let e = experiments::find("fkamh-ess").unwrap();
    let root = temp_dir("fold");
    let single = reproduce(&e, &options(&root.join("single"), None))
        .unwrap()
        .unwrap();
    // The quick grid's variants: F-KAMH adapting over the whole chain, KAMH
    // adapting until step 450; and n=600, which the summary holds.
    let new = ["D=10, adapt=always", "n=600, adapt until 450"];
    let held = "n=600";
    let base = root.join("base");
    let base_dir = base.join(e.name);
    std::fs::create_dir_all(&base_dir).unwrap();
    let mut lacking = single.clone();
    lacking.cells.retain(|c| !new.contains(&c.setting.as_str()));
    assert_eq!(lacking.cells.len(), single.cells.len() - 3);
    lacking.write_json(&base_dir.join("summary.json")).unwrap();
    let before = std::fs::read(base_dir.join("summary.json")).unwrap();

    let part = root.join("part");
    let settings: Vec<String> = new.iter().chain([&held]).map(|s| s.to_string()).collect();
    let opts = RunOptions {
        settings: settings.clone(),
        ..options(&part, None)
    };
    assert!(reproduce(&e, &opts).unwrap().is_none());
    let jobs = part.join(e.name).join("jobs");
    assert_eq!(std::fs::read_dir(&jobs).unwrap().count(), 5 * 2);
    // without a run record the fold cannot say how the cells were made
    let message = format!(
        "{:#}",
        fold(&e, std::slice::from_ref(&part), &base).unwrap_err()
    );
    assert!(message.contains("no run record"), "{message}");
    let record = xtask::provenance::RunRecord {
        settings,
        ..xtask::provenance::RunRecord::of_this_process(
            "c0ffee".into(),
            std::time::SystemTime::now(),
            std::time::Duration::from_secs(3),
            Some([4.0, 3.0, 2.0]),
            2,
            true,
            None,
        )
    };
    record.write(&part.join(e.name)).unwrap();

    // a record that disagrees with the held cell is refused
    let tampered = jobs.join("banana-b0.1-v100-d8__KAMH-LS__n=600__1.json");
    let original = std::fs::read(&tampered).unwrap();
    let mut r: JobRecord = read_record(&tampered).unwrap().unwrap();
    *r.metrics.get_mut("ess_12").unwrap() += 1e-9;
    write_record(&jobs, &r).unwrap();
    let message = format!(
        "{:#}",
        fold(&e, std::slice::from_ref(&part), &base).unwrap_err()
    );
    assert!(
        message.contains("KAMH-LS n=600") && message.contains("ess_12 of chain 1"),
        "{message}"
    );
    std::fs::write(&tampered, &original).unwrap();
    // an incomplete new cell is refused
    let chain = jobs.join("banana-b0.1-v100-d8__F-KAMH-sincos__D=10__adapt=always__0.json");
    let kept = std::fs::read(&chain).unwrap();
    std::fs::remove_file(&chain).unwrap();
    let message = format!(
        "{:#}",
        fold(&e, std::slice::from_ref(&part), &base).unwrap_err()
    );
    assert!(message.contains("missing"), "{message}");
    std::fs::write(&chain, kept).unwrap();
    // records of another seed are refused
    let other = root.join("other");
    let opts = RunOptions {
        seed: 8,
        settings: vec![new[0].to_string()],
        ..options(&other, None)
    };
    reproduce(&e, &opts).unwrap();
    record.write(&other.join(e.name)).unwrap();
    let message = format!("{:#}", fold(&e, &[other], &base).unwrap_err());
    assert!(message.contains("was run with"), "{message}");
    // every failure left the summary and its folder as they were
    assert_eq!(
        std::fs::read(base_dir.join("summary.json")).unwrap(),
        before
    );
    assert!(!base_dir.join("runs").exists());

    let folded = fold(&e, std::slice::from_ref(&part), &base).unwrap();
    assert_eq!(folded.added.len(), 3, "{folded:?}");
    assert!(
        folded
            .added
            .iter()
            .all(|c| new.contains(&c.key.2.as_str()) && c.label.ends_with(&c.key.2))
    );
    assert_eq!(folded.reproduced.len(), 2, "{folded:?}");
    let after = Summary::read_json(&base_dir.join("summary.json")).unwrap();
    assert_eq!(timeless(after.clone()), timeless(single));
    // the cells not added are the base's, byte for byte in the JSON
    let cells = |bytes: &[u8]| -> Vec<Value> {
        let v: Value = serde_json::from_slice(bytes).unwrap();
        v["cells"].as_array().unwrap().clone()
    };
    let after_cells = cells(&std::fs::read(base_dir.join("summary.json")).unwrap());
    let kept: Vec<&Value> = after_cells
        .iter()
        .filter(|c| !new.contains(&c["setting"].as_str().unwrap()))
        .collect();
    assert_eq!(kept, cells(&before).iter().collect::<Vec<_>>());
    // the new claim variants are decided
    let variants: Vec<_> = after
        .claims
        .iter()
        .filter(|c| c.claim.contains("until step 450"))
        .collect();
    assert_eq!(variants.len(), 2);
    for claim in variants {
        assert_ne!(claim.verdict, Verdict::Pending, "{}", claim.claim);
    }
    // the run record came along, so the summary says how the cells were made
    let runs = xtask::provenance::RunRecord::read_all(&base_dir).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].commit, "c0ffee");
    assert_eq!(runs[0].settings.len(), 3);
    // with the held cells its records reproduced
    assert_eq!(
        runs[0].reproduced,
        [
            "8-d B(0.03, 100) KAMH-LS n=600",
            "8-d B(0.1, 100) KAMH-LS n=600"
        ]
    );
    // folding again changes nothing: every cell is now held and reproduced
    let again = fold(&e, &[part], &base).unwrap();
    assert!(again.added.is_empty());
    assert_eq!(again.reproduced.len(), 5);
    assert_eq!(
        cells(&std::fs::read(base_dir.join("summary.json")).unwrap()),
        after_cells
    );
    std::fs::remove_dir_all(&root).unwrap();
}

/// A summary that lacks a metric of the stored draws alone gets, from a
/// run's stored chains, exactly the values and claims the run's own
/// summary has; cells that hold it already stay byte for byte; chains that
/// do not reproduce a held metric bit for bit, a missing chain or a cell
/// with nothing to check against are refused and nothing is written; the
/// run record says what was added from which chains; a second recompute
/// has nothing to add.
#[test]
fn a_recompute_from_stored_chains_gives_the_runs_own_metrics() {
    let e = experiments::find("kmc-glass").unwrap();
    let protocol = e.protocol.as_ref().unwrap();
    let root = temp_dir("recompute");
    let run = root.join("run");
    let single = reproduce(&e, &options(&run, None)).unwrap().unwrap();
    let added = "ess_min_after_warmup";
    let kept = "RW";
    // the summary as made before the metric existed, except for one cell
    let mut lacking = single.clone();
    for c in lacking.cells.iter_mut().filter(|c| c.sampler != kept) {
        assert!(c.metrics.remove(added).is_some(), "{}", c.sampler);
    }
    lacking.claims = (protocol.claims)(&lacking);
    let variants = |s: &Summary| -> Vec<Verdict> {
        s.claims
            .iter()
            .filter(|c| c.claim.contains("after 200 warm-up draws"))
            .map(|c| c.verdict)
            .collect()
    };
    assert_eq!(variants(&lacking), [Verdict::Pending; 3]);
    let base = root.join("base");
    let base_dir = base.join(e.name);
    std::fs::create_dir_all(&base_dir).unwrap();
    lacking.write_json(&base_dir.join("summary.json")).unwrap();
    let before = std::fs::read(base_dir.join("summary.json")).unwrap();
    let unchanged = |why: &str| {
        assert_eq!(
            std::fs::read(base_dir.join("summary.json")).unwrap(),
            before,
            "{why}"
        );
        assert!(!base_dir.join("runs").exists(), "{why}");
        assert!(!base_dir.join("summary.md").exists(), "{why}");
    };

    let source = run.join(e.name);
    let target = single.cells[0].target.clone();
    let chain = chain_file(&source, &target, "KMC", "", 1);
    let original = std::fs::read(&chain).unwrap();
    // a chain that differs in its last draw from the one that made the
    // summary (every coordinate: `ess_min` sees the dimension of least ESS)
    let (mut samples, d) = xtask::npy::read_chain(&chain).unwrap();
    let n = samples.len();
    samples[n - d..].iter_mut().for_each(|x| *x += 1e-3);
    xtask::npy::write_chain(&chain, &samples, d).unwrap();
    let message = format!("{:#}", recompute(&e, &run, &base).unwrap_err());
    assert!(
        message.contains("stored chain 1 of") && message.contains("KMC gives ess_min"),
        "{message}"
    );
    unchanged("a tampered chain");
    // a missing chain
    std::fs::remove_file(&chain).unwrap();
    let message = format!("{:#}", recompute(&e, &run, &base).unwrap_err());
    assert!(
        message.contains("chain 1 of") && message.contains("KMC"),
        "{message}"
    );
    unchanged("a missing chain");
    std::fs::write(&chain, &original).unwrap();
    // a cell that holds no metric to check its chains against
    let mut blind = lacking.clone();
    blind.cells[0].metrics.remove("ess_min");
    blind.write_json(&base_dir.join("summary.json")).unwrap();
    let message = format!("{:#}", recompute(&e, &source, &base).unwrap_err());
    assert!(message.contains("nothing shows"), "{message}");
    lacking.write_json(&base_dir.join("summary.json")).unwrap();
    unchanged("a cell without a metric to check");
    // no chains at all
    let message = format!("{:#}", recompute(&e, &base, &base).unwrap_err());
    assert!(message.contains("no chains/"), "{message}");
    // a run record that cannot be written (a file where runs/ goes): the
    // summary does not take the metrics without the record saying so
    std::fs::write(base_dir.join("runs"), b"").unwrap();
    assert!(recompute(&e, &run, &base).is_err());
    std::fs::remove_file(base_dir.join("runs")).unwrap();
    unchanged("a run record that cannot be written");

    let done = recompute(&e, &run, &base).unwrap();
    let after = Summary::read_json(&base_dir.join("summary.json")).unwrap();
    // exactly the run's own summary, claims included
    assert_eq!(after, single);
    assert!(variants(&after).iter().all(|v| *v != Verdict::Pending));
    assert_eq!(done.metrics, [added]);
    assert_eq!(done.checked, ["ess_min"]);
    assert_eq!(done.cells.len(), single.cells.len() - 1);
    assert!(done.cells.iter().all(|c| !c.ends_with(&format!(" {kept}"))));
    assert_eq!(
        PathBuf::from(&done.chains),
        std::fs::canonicalize(&source).unwrap()
    );
    // the cell that held the metric is byte for byte as it was
    let cell_of = |bytes: &[u8]| -> Value {
        let v: Value = serde_json::from_slice(bytes).unwrap();
        v["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["sampler"] == kept)
            .unwrap()
            .clone()
    };
    let written = std::fs::read(base_dir.join("summary.json")).unwrap();
    assert_eq!(cell_of(&written), cell_of(&before));
    assert!(base_dir.join("summary.md").exists());
    let runs = xtask::provenance::RunRecord::read_all(&base_dir).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].recomputed.as_ref(), Some(&done));
    assert!(!runs[0].commit.is_empty());
    // again: nothing to add, nothing written
    let again = recompute(&e, &run, &base).unwrap();
    assert!(again.cells.is_empty() && again.metrics.is_empty());
    assert_eq!(
        std::fs::read(base_dir.join("summary.json")).unwrap(),
        written
    );
    assert_eq!(
        xtask::provenance::RunRecord::read_all(&base_dir)
            .unwrap()
            .len(),
        1
    );
    std::fs::remove_dir_all(&root).unwrap();
}

/// A rerun with fewer chains into the directory of a run with more removes
/// the surplus chain files (`<k>.npy`, k ≥ the new count), which would
/// otherwise be read as the new run's; other files stay.
#[test]
fn a_rerun_with_fewer_chains_removes_the_surplus_chain_files() {
    let e = experiments::find(FAST_GRID).unwrap();
    let root = temp_dir("fewer-chains");
    let dir = root.join(e.name);
    let with = |chains| RunOptions {
        chains: Some(chains),
        ..options(&root, None)
    };
    reproduce(&e, &with(3)).unwrap().unwrap();
    let some_cell = dir
        .join("chains")
        .join(chains(&dir).keys().next().unwrap())
        .parent()
        .unwrap()
        .to_path_buf();
    std::fs::write(some_cell.join("notes.txt"), b"mine").unwrap();
    std::fs::write(some_cell.join("07.npy"), b"not a chain of xtask's naming").unwrap();
    let summary = reproduce(&e, &with(2)).unwrap().unwrap();
    let mut expected = BTreeMap::new();
    for c in summary.cells.iter().filter(|c| c.status == "done") {
        let mut cell = PathBuf::from(sanitize(&c.target)).join(sanitize(&c.sampler));
        if !c.setting.is_empty() {
            cell = cell.join(sanitize(&c.setting));
        }
        *expected.entry(cell).or_insert(0) += c.chains;
    }
    let mut found: BTreeMap<PathBuf, usize> = BTreeMap::new();
    for file in chains(&dir)
        .keys()
        .filter(|f| f.extension().is_some_and(|x| x == "npy"))
    {
        let stem = file.file_stem().unwrap().to_str().unwrap();
        if stem != "07" {
            assert!(stem.parse::<usize>().unwrap() < 2, "{}", file.display());
            *found
                .entry(file.parent().unwrap().to_path_buf())
                .or_insert(0) += 1;
        }
    }
    assert_eq!(found, expected);
    assert!(some_cell.join("notes.txt").exists() && some_cell.join("07.npy").exists());
    std::fs::remove_dir_all(&root).unwrap();
}

/// The files under `dir` but its lock files (which a fold or a merge
/// takes, writing its pid there).
fn without_locks(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    tree(dir)
        .into_iter()
        .filter(|(p, _)| !p.to_string_lossy().starts_with(".lock"))
        .collect()
}

/// Asserts that the files under `dir` but its lock files are `before`,
/// naming the files that differ.
fn same_files(dir: &Path, before: &BTreeMap<PathBuf, Vec<u8>>) {
    let now = without_locks(dir);
    let differ: Vec<&PathBuf> = now
        .keys()
        .chain(before.keys())
        .filter(|p| now.get(*p) != before.get(*p))
        .collect();
    assert!(differ.is_empty(), "{} changed: {differ:?}", dir.display());
}

/// The names in `dir`.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A fold or a merge that fails while writing its output (here a figure's
/// file name is taken by a directory) leaves the output directory as it
/// was, with no half-copied records, chains or run records, and no staging
/// directory beside it.
#[test]
fn a_failed_fold_or_merge_leaves_the_output_as_it_was() {
    let e = experiments::find(FAST_GRID).unwrap();
    let root = temp_dir("failed-output");
    let out = root.join("out");
    reproduce(&e, &options(&out, None)).unwrap();
    let dir = out.join(e.name);
    let figure = names(&dir)
        .into_iter()
        .find(|n| n.ends_with(".svg"))
        .unwrap();
    let block = |dir: &Path| {
        let _ = std::fs::remove_file(dir.join(&figure));
        std::fs::create_dir_all(dir.join(&figure)).unwrap();
        std::fs::write(dir.join(&figure).join("blocker"), b"").unwrap();
    };

    // a restricted run, recorded, folded into `out`
    let part = root.join("part");
    let restricted = RunOptions {
        settings: vec!["code".into()],
        record_run: true,
        ..options(&part, None)
    };
    reproduce(&e, &restricted).unwrap();
    block(&dir);
    let before = without_locks(&dir);
    assert!(fold(&e, std::slice::from_ref(&part), &out).is_err());
    same_files(&dir, &before);
    assert_eq!(names(&out), [e.name]);

    // shards merged into a directory holding only the blocker
    let shards = run_three_shards(&e, &root.join("shards"));
    let merged = root.join("merged");
    block(&merged.join(e.name));
    let before = without_locks(&merged.join(e.name));
    assert!(merge(&e, &shards, &merged).is_err());
    same_files(&merged.join(e.name), &before);
    assert_eq!(names(&merged), [e.name]);
    // unblocked, both succeed
    for dir in [&dir, &merged.join(e.name)] {
        std::fs::remove_dir_all(dir.join(&figure)).unwrap();
    }
    fold(&e, std::slice::from_ref(&part), &out).unwrap();
    merge(&e, &shards, &merged).unwrap();
    assert!(merged.join(e.name).join(&figure).is_file());
    assert_eq!(names(&merged), [e.name]);
    std::fs::remove_dir_all(&root).unwrap();
}

/// A `--no-chains` run that reruns chains (another seed here) removes the
/// chain files an earlier run left at their paths: they are not its
/// chains, and a reader of the directory would take them for its own.
/// Chains it does not rerun keep their files.
#[test]
fn a_rerun_without_chains_removes_the_earlier_runs_chain_files() {
    let e = experiments::find(FAST_GRID).unwrap();
    let root = temp_dir("no-chains-rerun");
    let dir = root.join(e.name);
    reproduce(&e, &options(&root, None)).unwrap();
    let kept = chains(&dir);
    let bare = |seed| RunOptions {
        seed,
        write_chains: false,
        ..options(&root, None)
    };
    // the same run without chains reruns nothing and keeps them
    reproduce(&e, &bare(7)).unwrap();
    assert_eq!(
        chains(&dir).keys().collect::<Vec<_>>(),
        kept.keys().collect::<Vec<_>>()
    );
    reproduce(&e, &bare(8)).unwrap();
    let left: Vec<PathBuf> = chains(&dir).into_keys().collect();
    assert!(left.is_empty(), "{left:?}");
    std::fs::remove_dir_all(&root).unwrap();
}
