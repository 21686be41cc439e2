//! Tests of `xtask::provenance`.

use xtask::provenance::*;

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
        load_start: Some([0.1, 0.2, 0.3]),
        load_end: Some([2.9, 1.0, 0.5]),
        threads: Some(2),
        settings: vec!["D=50, adapt=always".into()],
        reproduced: Vec::new(),
        recomputed: None,
        finished: true,
    };
    record.write(&dir).unwrap();
    let read = RunRecord::read_all(&dir).unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].command, record.command);
    assert_eq!(read[0].shard.as_deref(), Some("1/2"));
    assert_eq!(read[0].load_end, Some([2.9, 1.0, 0.5]));
    assert_eq!(read[0].settings, ["D=50, adapt=always"]);
    assert!(matches!(read[0].load(), Load::Loaded(why) if why.contains("at the end")));
    let idle = RunRecord {
        load_end: Some([2.4, 1.0, 0.5]),
        ..read[0].clone()
    };
    assert_eq!(idle.load(), Load::Idle);
    let busy_start = RunRecord {
        load_start: Some([1.5, 1.0, 0.5]),
        ..idle.clone()
    };
    assert!(matches!(busy_start.load(), Load::Loaded(why) if why.contains("at the start")));
    // a record from before load averages were recorded still reads
    let old = r#"{"command": "x", "commit": "c", "machine": "m", "started_unix": 1,
        "wall_time_secs": 2.0, "quick": false, "shard": null}"#;
    let old: RunRecord = serde_json::from_str(old).unwrap();
    assert_eq!(old.load(), Load::NotRecorded);
    assert!(old.settings.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A run records the commit of the checkout its binary was built from,
/// wherever it is started: from a directory outside the checkout, even
/// one inside another git repository (a cluster's scratch space, the
/// user's analysis repository), the record holds the checkout's commit,
/// not "unknown" nor the other repository's.
#[test]
fn runs_record_the_checkouts_commit_from_any_directory() {
    let root = std::env::temp_dir().join(format!("xtask-provenance-cwd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .current_dir(&root)
            .output()
            .unwrap();
        assert!(status.status.success(), "git {args:?}: {status:?}");
    };
    git(&["init", "-q"]);
    git(&["commit", "-q", "--allow-empty", "-m", "another repository"]);
    let output = crate::cli::smallest_run("out")
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let runs = RunRecord::read_all(&root.join("out").join("kamh-banana")).unwrap();
    assert_eq!(runs.len(), 1);
    // this test runs inside the checkout, so commit() here is the checkout's
    let here = commit();
    assert_ne!(here, "unknown");
    assert_eq!(runs[0].commit, here);
    std::fs::remove_dir_all(&root).unwrap();
}

/// A run's record as written at its start reads back unfinished, with no
/// wall time or end load; a finished one (and one made before records
/// said whether their run finished) reads as finished and is written
/// without the field.
#[test]
fn unfinished_records_round_trip_and_old_ones_read_as_finished() {
    let dir = std::env::temp_dir().join(format!("xtask-unfinished-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let whole = RunRecord::of_this_process(
        "abc".into(),
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(9),
        std::time::Duration::from_secs(3),
        Some([0.1, 0.2, 0.3]),
        2,
        true,
        None,
    );
    assert!(whole.finished);
    assert!(!serde_json::to_string(&whole).unwrap().contains("finished"));
    let started = whole.clone().unfinished();
    assert!(
        serde_json::to_string(&started)
            .unwrap()
            .contains("\"finished\":false")
    );
    started.write(&dir).unwrap();
    let read = RunRecord::read_all(&dir).unwrap();
    assert_eq!(read.len(), 1);
    assert!(!read[0].finished);
    assert_eq!((read[0].wall_time_secs, read[0].load_end), (0.0, None));
    assert_eq!(read[0].started_unix, 9);
    // the whole record replaces it (the same file)
    whole.write(&dir).unwrap();
    let read = RunRecord::read_all(&dir).unwrap();
    assert_eq!(read.len(), 1);
    assert!(read[0].finished && read[0].wall_time_secs == 3.0);
    let old = r#"{"command": "x", "commit": "c", "machine": "m", "started_unix": 1,
        "wall_time_secs": 2.0, "quick": false, "shard": null}"#;
    assert!(serde_json::from_str::<RunRecord>(old).unwrap().finished);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Of two runs started in the same second, one that did not finish is
/// the later: the finished one cannot have started after it was stopped.
#[test]
fn an_unfinished_run_of_the_same_second_reads_as_the_later() {
    let dir = std::env::temp_dir().join(format!("xtask-same-second-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let whole = RunRecord::of_this_process(
        "abc".into(),
        std::time::UNIX_EPOCH,
        std::time::Duration::from_secs(1),
        None,
        1,
        true,
        None,
    );
    // file names sort the unfinished one first
    let runs = dir.join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    whole
        .clone()
        .unfinished()
        .write_as(&runs.join("0-1.json"))
        .unwrap();
    whole.write_as(&runs.join("0-2.json")).unwrap();
    let read = RunRecord::read_all(&dir).unwrap();
    assert_eq!(
        read.iter().map(|r| r.finished).collect::<Vec<_>>(),
        [true, false]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
