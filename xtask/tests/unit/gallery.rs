//! Tests of `xtask::gallery`.

use serde_json::Value;
use xtask::gallery::*;
use xtask::provenance::RunRecord;
use xtask::verdict::TIMED;

#[test]
fn a_gallery_counts_verdicts_and_links_figures() {
    let root = std::env::temp_dir().join(format!("xtask-gallery-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let results = root.join("results");
    let dir = results.join("kamh-banana");
    std::fs::create_dir_all(&dir).unwrap();
    let summary = serde_json::json!({
        "experiment": "kamh-banana",
        "params": {"quick": false, "seed": 1, "chains": 20},
        "notes": "n = 1000",
        "cells": [
            {"target": "b", "target_label": "B", "sampler": "KAMH-LS", "status": "done",
             "iterations": 10, "burn_in": 5,
             "metrics": {"q_avg": {"mean": 0.5}, "ess_min_per_s": {"mean": 3.0}}},
            {"target": "b", "target_label": "B", "sampler": "Ensemble", "status": "done",
             "iterations": 10, "burn_in": 5,
             "metrics": {"q_avg": {"mean": 0.25}, "ess_min_per_s": {"mean": 1.0}}},
            // a variant: in its section, not in the ensemble table
            {"target": "b", "target_label": "B", "sampler": "KAMH-LS", "setting": "code",
             "status": "done", "iterations": 10, "burn_in": 5,
             "metrics": {"q_avg": {"mean": 0.125}, "ess_min_per_s": {"mean": 9.0}}}
        ],
        "claims": [
            {"claim": "A | B", "verdict": "reproduced", "rule": "r", "numbers": [],
             "evidence": "1 ± 2"},
            {"claim": "C", "verdict": "refuted", "rule": "r", "numbers": [], "evidence": "3",
             "caveats": [TIMED]},
            {"claim": "D", "verdict": "reproduced", "rule": "r", "numbers": [],
             "evidence": "4"},
            {"claim": "E", "verdict": "inconclusive", "rule": "r", "numbers": [],
             "evidence": "5"},
            {"claim": "F", "verdict": "reproduced", "rule": "r", "numbers": [],
             "evidence": "6", "protocol_check": true}
        ]
    });
    std::fs::write(dir.join("summary.json"), summary.to_string()).unwrap();
    std::fs::write(dir.join("fig.svg"), "<svg/>").unwrap();
    let first = RunRecord {
        command: "xtask reproduce kamh-banana".into(),
        commit: "0123456789abcdef0123-dirty".into(),
        machine: "CPU".into(),
        started_unix: 0,
        wall_time_secs: 264.0,
        quick: false,
        shard: None,
        load_start: None,
        load_end: None,
        threads: None,
        settings: Vec::new(),
        reproduced: Vec::new(),
        recomputed: None,
        finished: true,
    };
    first.write(&dir).unwrap();
    // a later run of some cells, folded in
    RunRecord {
        started_unix: 86_400,
        settings: vec!["n=600".into(), "D=50".into()],
        reproduced: vec!["B KAMH-LS n=600".into()],
        ..first.clone()
    }
    .write(&dir)
    .unwrap();
    // a metric added from the stored chains
    RunRecord {
        command: "xtask recompute kamh-banana /runs".into(),
        // its commit and load are not those of a run of the samplers
        commit: "fedcba9876543210fedc".into(),
        load_start: Some([9.0, 9.0, 9.0]),
        load_end: Some([9.0, 9.0, 9.0]),
        threads: Some(1),
        started_unix: 2 * 86_400,
        wall_time_secs: 2.0,
        recomputed: Some(xtask::provenance::Recomputation {
            chains: "/runs/kamh-banana".into(),
            metrics: vec!["ess_min_after_warmup".into()],
            checked: vec!["ess_min".into()],
            cells: vec!["B SM".into(), "B KAMH-LS".into()],
        }),
        ..first
    }
    .write(&dir)
    .unwrap();
    let out = root.join("RESULTS.md");
    main(&results, &out).unwrap();
    let md = std::fs::read_to_string(&out).unwrap();
    assert!(md.contains("| [kamh-banana](#kamh-banana) | "), "{md}");
    // the protocol check is not counted
    assert!(md.contains("| full | 2 | 1 | 1 | 0 |"), "{md}");
    assert!(
        md.contains(
            "| experiment | source | size | reproduced | refuted | inconclusive | pending |"
        ),
        "{md}"
    );
    // the ensemble table is generated, the best in bold
    assert!(md.contains("| [kamh-banana](#kamh-banana), B | 15 | quantile error `q_avg` | KAMH-LS 0.5000, **Ensemble 0.2500** |"), "{md}");
    assert!(
        md.contains(
            "min ESS per second (load not recorded) | **KAMH-LS 3.0000**, Ensemble 1.0000 |"
        ),
        "{md}"
    );
    assert!(md.contains("| C | 3 *Caveat: per-second"), "{md}");
    assert!(md.contains("| **refuted** (load not recorded) |"), "{md}");
    assert!(md.contains("Protocol checks"), "{md}");
    assert!(md.contains("; load not recorded."), "{md}");
    assert!(
        md.contains("![fig.svg](results/kamh-banana/fig.svg)"),
        "{md}"
    );
    assert!(
        md.contains("| A \\| B | 1 ± 2 | r | **reproduced** |"),
        "{md}"
    );
    assert!(md.contains("at commit `0123456789ab-dirty`"), "{md}");
    assert!(md.contains("on 1970-01-01"), "{md}");
    assert!(
        md.contains(
            "on 1970-01-02 at commit `0123456789ab-dirty`, only the cells with setting \
             `n=600` or `D=50`: 264 s wall time on CPU; load not recorded; it reproduced \
             the earlier cells B KAMH-LS n=600 bit for bit (all but per-second values)."
        ),
        "{md}"
    );
    assert!(
        md.contains(
            "- `xtask recompute kamh-banana /runs` on 1970-01-03 at commit \
             `fedcba987654`: 2 s wall time on CPU; 1-min load average 9.00 at the start, \
             9.00 at the end (under load); it ran no chain: \
             it added `ess_min_after_warmup` to B SM, B KAMH-LS from the stored chains in \
             `/runs/kamh-banana`, which first reproduced every chain's `ess_min` in the \
             summary bit for bit."
        ),
        "{md}"
    );
    assert!(!md.contains("ran at different commits"), "{md}");
    assert!(!md.contains("timed under load"), "{md}");
    // an experiment without results gets the commands that make them
    assert!(
        md.contains("`cargo xtask reproduce kmc-abc --no-chains`"),
        "{md}"
    );
    // and where the full size is reduced, the command runs the papers'
    assert!(
        md.contains("`cargo xtask reproduce kamh-glass --size paper --no-chains`"),
        "{md}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

/// kamh-glass at `--size full` is labelled reduced, with the papers' size
/// and the flag that runs it; at `--size paper` with the papers' 30
/// chains it counts as the papers' size, and with fewer it does not.
#[test]
fn the_gallery_labels_a_reduced_full_size() {
    let root = std::env::temp_dir().join(format!("xtask-gallery-size-{}", std::process::id()));
    let results = root.join("results");
    let dir = results.join("kamh-glass");
    let render = |params: Value| {
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&dir).unwrap();
        let summary =
            serde_json::json!({"experiment": "kamh-glass", "params": params, "claims": []});
        std::fs::write(dir.join("summary.json"), summary.to_string()).unwrap();
        let out = root.join("RESULTS.md");
        main(&results, &out).unwrap();
        std::fs::read_to_string(&out).unwrap()
    };
    let full = render(serde_json::json!({"quick": false, "seed": 1, "chains": 10}));
    assert!(
        full.contains(
            "| [kamh-glass](#kamh-glass) | Sejdinovic et al. 2014 (KAMH), Fig. 4 | reduced |"
        ),
        "{full}"
    );
    assert!(
        full.contains("Size: **reduced**: `--size full` (10 chains;"),
        "{full}"
    );
    assert!(
        full.contains("the papers': benchmark 30 SM chains × 500000"),
        "{full}"
    );
    let paper = render(serde_json::json!({"quick": false, "paper": true, "seed": 1, "chains": 30}));
    assert!(paper.contains("(KAMH), Fig. 4 | full |"), "{paper}");
    assert!(
        paper.contains("Size: the papers' size (benchmark 30 SM chains"),
        "{paper}"
    );
    let few = render(serde_json::json!({"quick": false, "paper": true, "seed": 1, "chains": 3}));
    assert!(
        few.contains("Size: **reduced**: 3 chains or replicates"),
        "{few}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

/// A results root that does not exist (a mistyped `--results`) or holds
/// no experiment's summary, or a summary.json that is not its experiment's (another experiment's, or no
/// summary at all), is an error naming it, and RESULTS.md stays as it
/// was: the gallery never reports results it did not find as "not run
/// yet", nor renders a foreign file as an experiment's results.
#[test]
fn the_gallery_refuses_a_missing_root_and_foreign_summaries() {
    let root = std::env::temp_dir().join(format!("xtask-gallery-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let out = root.join("RESULTS.md");
    std::fs::write(&out, "kept").unwrap();
    let results = root.join("results");
    // a mistyped root, and one that holds no experiment's results (e.g. an
    // experiment's own directory given as the root)
    std::fs::create_dir_all(results.join("kamh-flower")).unwrap();
    for wrong in [root.join("resluts"), results.join("kamh-flower")] {
        let err = format!("{:#}", main(&wrong, &out).unwrap_err());
        assert!(err.contains(&wrong.display().to_string()), "{err}");
    }
    let summary = results.join("kamh-flower").join("summary.json");
    std::fs::create_dir_all(summary.parent().unwrap()).unwrap();
    for foreign in [
        serde_json::json!({"experiment": "kamh-banana", "params": {}, "cells": []}),
        serde_json::json!({"kind": "x"}),
        serde_json::json!([]),
    ] {
        std::fs::write(&summary, foreign.to_string()).unwrap();
        let err = format!("{:#}", main(&results, &out).unwrap_err());
        assert!(
            err.contains(&summary.display().to_string()) && err.contains("kamh-flower"),
            "{foreign}: {err}"
        );
    }
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "kept");
    std::fs::remove_dir_all(&root).unwrap();
}

/// A fresh temporary root `xtask-gallery-<name>-<pid>` holding
/// `results/kamh-glass/summary.json` with the run parameters `params` and
/// no claims: (the root, the results root, the experiment's directory).
fn glass_results(
    name: &str,
    params: Value,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let root = std::env::temp_dir().join(format!("xtask-gallery-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let results = root.join("results");
    let dir = results.join("kamh-glass");
    std::fs::create_dir_all(&dir).unwrap();
    let summary = serde_json::json!({"experiment": "kamh-glass", "params": params, "claims": []});
    std::fs::write(dir.join("summary.json"), summary.to_string()).unwrap();
    (root, results, dir)
}

/// The gallery rewrites only a file it wrote (one with its marker line,
/// keeping the text above it) or a new one: an existing file without the
/// marker (`--out README.md` by mistake) is an error that leaves it whole.
#[test]
fn the_gallery_overwrites_no_file_of_someone_elses() {
    let (root, results, _) = glass_results(
        "own",
        serde_json::json!({"quick": true, "seed": 1, "chains": 2}),
    );
    let out = root.join("README.md");
    std::fs::write(&out, "# A hand-written file\n").unwrap();
    let err = format!("{:#}", main(&results, &out).unwrap_err());
    assert!(
        err.contains(&out.display().to_string()) && err.contains(MARKER),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "# A hand-written file\n"
    );
    // with the marker, the text above it is kept and the rest generated
    std::fs::write(&out, format!("# Mine\n\n{MARKER}\nstale generated text\n")).unwrap();
    main(&results, &out).unwrap();
    let md = std::fs::read_to_string(&out).unwrap();
    assert!(
        md.starts_with(&format!("# Mine\n\n{MARKER}\n")) && !md.contains("stale generated text"),
        "{md}"
    );
    // and a new file is written
    let fresh = root.join("NEW.md");
    main(&results, &fresh).unwrap();
    assert!(
        std::fs::read_to_string(&fresh)
            .unwrap()
            .starts_with("# Results")
    );
    std::fs::remove_dir_all(&root).unwrap();
}

/// A run that started and did not finish (its record written at the
/// start only) is not shown as one that made the results: the gallery
/// says that the latest run did not finish, naming it, beside the results
/// of the earlier finished run, and lists it without a wall time. An
/// experiment with no summary yet gets the same note.
#[test]
fn the_gallery_says_that_the_latest_run_did_not_finish() {
    let (root, results, dir) = glass_results(
        "stopped",
        serde_json::json!({"quick": false, "seed": 1, "chains": 10}),
    );
    let finished = RunRecord::of_this_process(
        "0123456789abcdef0123".into(),
        std::time::UNIX_EPOCH,
        std::time::Duration::from_secs(264),
        None,
        2,
        false,
        None,
    );
    finished.write(&dir).unwrap();
    let stopped = RunRecord {
        command: "xtask reproduce kamh-glass --size paper".into(),
        commit: "fedcba9876543210fedc".into(),
        started_unix: 2 * 86_400,
        ..finished.clone()
    }
    .unfinished();
    stopped.write(&dir).unwrap();
    // no summary yet for another experiment, whose only run did not finish
    let other = results.join("kmc-glass");
    std::fs::create_dir_all(&other).unwrap();
    RunRecord {
        command: "xtask reproduce kmc-glass".into(),
        ..stopped.clone()
    }
    .write(&other)
    .unwrap();
    // a finished run as the latest, for a third
    let third = results.join("kmc-abc");
    std::fs::create_dir_all(&third).unwrap();
    std::fs::write(
        third.join("summary.json"),
        std::fs::read_to_string(dir.join("summary.json"))
            .unwrap()
            .replace("kamh-glass", "kmc-abc"),
    )
    .unwrap();
    stopped.write(&third).unwrap();
    RunRecord {
        started_unix: 3 * 86_400,
        ..finished.clone()
    }
    .write(&third)
    .unwrap();

    let out = root.join("RESULTS.md");
    main(&results, &out).unwrap();
    let md = std::fs::read_to_string(&out).unwrap();
    let section = |name: &str| {
        let start = md.find(&format!("\n## {name}\n")).unwrap();
        let end = md[start + 1..]
            .find("\n## ")
            .map_or(md.len(), |e| start + 1 + e);
        md[start..end].to_string()
    };
    let glass = section("kamh-glass");
    let note = "**The latest run did not finish**: `xtask reproduce kamh-glass --size paper`, \
                started on 1970-01-03 at commit `fedcba987654`";
    assert!(glass.contains(note), "{glass}");
    assert!(
        glass.contains("Runs: 2 sittings or shards, 1 of them did not finish, 264 s of wall time in the others."),
        "{glass}"
    );
    assert!(
        glass.contains(
            "- `xtask reproduce kamh-glass --size paper` on 1970-01-03 at commit `fedcba987654`: \
             started on"
        ) && glass.contains("**did not finish** (stopped, failed, or still running)."),
        "{glass}"
    );
    assert!(
        glass.contains("on 1970-01-01 at commit `0123456789ab`: 264 s wall time"),
        "{glass}"
    );
    let kmc = section("kmc-glass");
    assert!(
        kmc.contains("Not run yet")
            && kmc.contains("**The latest run did not finish**: `xtask reproduce kmc-glass`"),
        "{kmc}"
    );
    let abc = section("kmc-abc");
    assert!(!abc.contains("The latest run did not finish"), "{abc}");
    assert!(abc.contains("1 of them did not finish"), "{abc}");
    std::fs::remove_dir_all(&root).unwrap();
}
