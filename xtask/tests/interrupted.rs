//! The `xtask` binary under interruption and contention: a run killed at
//! random moments and rerun ends with exactly the outputs of one
//! uninterrupted run, and a second run into a directory in use fails at
//! once naming the first.

#![cfg(unix)]

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::tree;

/// The fastest grid experiment at --quick size.
const EXPERIMENT: &str = "kamh-banana";

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xtask-it-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `reproduce` into `out`, at --quick size unless `full`.
fn command(out: &Path, full: bool) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_xtask"));
    c.args(["reproduce", EXPERIMENT, "--seed", "5", "--threads", "2"])
        .args(if full { None } else { Some("--quick") })
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null());
    c
}

fn spawn(out: &Path, full: bool) -> Child {
    command(out, full)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn run(out: &Path) -> Output {
    command(out, false).output().unwrap()
}

/// Whether a metric, curve or claim depends on the clock.
fn on_clock(name: &str) -> bool {
    name == "wall_time_secs"
        || name == "seconds"
        || name.ends_with("_per_s")
        || name.contains("per second")
        || name.contains("wall time")
}

/// A summary.json without what depends on the clock.
fn timeless(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|k, _| !on_clock(k));
            if let Some(Value::Array(claims)) = map.get_mut("claims") {
                claims.retain(|c| !c["claim"].as_str().is_some_and(on_clock));
            }
            map.values_mut().for_each(timeless);
        }
        Value::Array(items) => items.iter_mut().for_each(timeless),
        _ => {}
    }
}

fn summary(dir: &Path) -> Value {
    let path = dir.join(EXPERIMENT).join("summary.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    timeless(&mut v);
    v
}

/// Kills a run (SIGKILL) 8 times at random moments within an
/// uninterrupted run's duration, resuming each time (with --force every
/// other time), then lets it finish:
/// the summary (less wall times) and every chain file equal the
/// uninterrupted run's, and no record is left that does not parse.
#[test]
fn killed_runs_resume_to_the_uninterrupted_result() {
    let root = temp_dir("kill");
    let reference = root.join("reference");
    let clock = Instant::now();
    let out = run(&reference);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let duration = clock.elapsed();

    let resumed = root.join("resumed");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2026);
    for kill in 0..8 {
        // Every other run reruns everything (--force), so kills also land
        // while chain files whose records exist are being rewritten.
        let mut command = command(&resumed, false);
        if kill % 2 == 1 {
            command.arg("--force");
        }
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(duration.mul_f64(rng.random::<f64>()));
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let out = run(&resumed);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    assert_eq!(summary(&resumed), summary(&reference));
    let chains = |dir: &Path| tree(&dir.join(EXPERIMENT).join("chains"));
    let expected = chains(&reference);
    assert!(!expected.is_empty());
    let got: BTreeMap<PathBuf, Vec<u8>> = chains(&resumed)
        .into_iter()
        .filter(|(p, _)| p.extension().is_some_and(|e| e == "npy"))
        .collect();
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (path, bytes) in &expected {
        assert!(got[path] == *bytes, "{} differs", path.display());
    }
    for (path, bytes) in tree(&resumed.join(EXPERIMENT).join("jobs")) {
        if path.extension().is_some_and(|e| e == "json") {
            serde_json::from_slice::<Value>(&bytes)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
    std::fs::remove_dir_all(&root).unwrap();
}

/// The run records (`runs/*.json`) of an experiment directory, oldest first.
fn run_records(dir: &Path) -> Vec<Value> {
    let mut records: Vec<Value> = std::fs::read_dir(dir.join("runs"))
        .into_iter()
        .flatten()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap())
        .collect();
    records.sort_by_key(|r| r["started_unix"].as_u64());
    records
}

/// While one run writes into a directory, a second one into the same
/// directory fails at once, naming the first one's pid and the lock file,
/// and leaves no run record. (The first runs at full size, so it is still
/// running when the second starts; it is killed afterwards, and its run
/// record, written when it started, says that it did not finish.)
#[test]
fn a_second_process_is_refused_while_the_first_runs() {
    let root = temp_dir("contention");
    let lock = root.join(EXPERIMENT).join(".lock");
    let mut first = spawn(&root, true);
    let pid = format!("pid {}", first.id());
    // Wait until the first run holds the lock (it writes its pid there).
    let clock = Instant::now();
    while !std::fs::read_to_string(&lock).is_ok_and(|t| t.contains(&pid)) {
        assert!(
            clock.elapsed() < Duration::from_secs(30),
            "the run never took its lock"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let experiment = root.join(EXPERIMENT);
    // its record is written once it holds the lock
    while run_records(&experiment).is_empty() {
        assert!(
            clock.elapsed() < Duration::from_secs(30),
            "the run wrote no record when it started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let clock = Instant::now();
    let second = run(&root);
    let refused = clock.elapsed();
    assert!(
        first.try_wait().unwrap().is_none(),
        "the full-size run ended early"
    );
    first.kill().unwrap();
    first.wait().unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success());
    assert!(
        stderr.contains(&pid) && stderr.contains(&lock.display().to_string()),
        "{stderr}"
    );
    assert!(refused < Duration::from_secs(5), "{refused:?}");
    let records = run_records(&experiment);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["finished"], false, "{records:?}");
    assert!(records[0]["commit"].as_str().is_some_and(|c| !c.is_empty()));
    // Once the first is gone (killed: the OS released its lock), runs go on.
    let out = run(&root);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records = run_records(&experiment);
    assert_eq!(records.len(), 2, "{records:?}");
    // (both may have started in the same second)
    let (stopped, whole): (Vec<&Value>, Vec<&Value>) =
        records.iter().partition(|r| r["finished"] == false);
    assert_eq!((stopped.len(), whole.len()), (1, 1), "{records:?}");
    // a finished run's record is written whole, without the field
    assert!(whole[0].get("finished").is_none(), "{records:?}");
    assert!(whole[0]["wall_time_secs"].as_f64().unwrap() > 0.0);
    std::fs::remove_dir_all(&root).unwrap();
}
