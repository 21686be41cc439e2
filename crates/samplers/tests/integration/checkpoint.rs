//! The checked checkpoint format: every damaged file is rejected with an
//! error naming the file, and concurrent writers never leave a broken one.

use kameleon_samplers::{
    CheckpointProblem, FnTarget, RandomWalk, RandomWalkConfig, Run, RunConfig, SamplerError,
    checkpoint,
};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Small {
    values: Vec<f64>,
    label: String,
    count: u64,
}

fn small() -> Small {
    Small {
        values: vec![1.5, f64::NEG_INFINITY, -0.25],
        label: "abc".to_string(),
        count: 7,
    }
}

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("kameleon-checkpoint-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The problem of a failed load, checking that the error names `path`.
fn problem_of<T: std::fmt::Debug>(
    result: kameleon_samplers::Result<T>,
    path: &Path,
) -> CheckpointProblem {
    match result {
        Err(e @ SamplerError::Checkpoint { .. }) => {
            let message = e.to_string();
            assert!(
                message.contains(&path.display().to_string()),
                "the error names the file: {message}"
            );
            let SamplerError::Checkpoint { path: p, problem } = e else {
                unreachable!()
            };
            assert_eq!(p, path);
            problem
        }
        other => panic!("expected a checkpoint error, got {other:?}"),
    }
}

#[test]
fn round_trip() {
    let dir = scratch("round-trip");
    let path = dir.join("small.ckpt");
    checkpoint::save(&path, "small", &small()).unwrap();
    let back: Small = checkpoint::load(&path, "small").unwrap();
    assert_eq!(back.label, "abc");
    assert_eq!(back.values[1], f64::NEG_INFINITY);
    assert_eq!(back, small());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_single_byte_change_is_rejected() {
    let dir = scratch("flips");
    let path = dir.join("small.ckpt");
    checkpoint::save(&path, "small", &small()).unwrap();
    let good = std::fs::read(&path).unwrap();
    let damaged = dir.join("damaged.ckpt");
    // every position, each single-bit change and the all-bits one
    for at in 0..good.len() {
        for flip in (0..8).map(|bit| 1u8 << bit).chain([0xff]) {
            let mut bytes = good.clone();
            bytes[at] ^= flip;
            std::fs::write(&damaged, &bytes).unwrap();
            let loaded = checkpoint::load::<Small>(&damaged, "small");
            assert!(loaded.is_err(), "byte {at} xor {flip:#x} was accepted");
            problem_of(loaded, &damaged);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_truncation_is_rejected() {
    let dir = scratch("truncation");
    let path = dir.join("small.ckpt");
    checkpoint::save(&path, "small", &small()).unwrap();
    let good = std::fs::read(&path).unwrap();
    for len in 0..good.len() {
        std::fs::write(&path, &good[..len]).unwrap();
        let problem = problem_of(checkpoint::load::<Small>(&path, "small"), &path);
        assert!(
            matches!(
                problem,
                CheckpointProblem::Truncated | CheckpointProblem::NotACheckpoint
            ),
            "length {len}: {problem}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn trailing_bytes_wrong_kind_and_foreign_files_are_named() {
    let dir = scratch("named");
    let path = dir.join("small.ckpt");
    checkpoint::save(&path, "small", &small()).unwrap();
    let good = std::fs::read(&path).unwrap();

    let mut longer = good.clone();
    longer.extend_from_slice(b"xyz");
    std::fs::write(&path, &longer).unwrap();
    let problem = problem_of(checkpoint::load::<Small>(&path, "small"), &path);
    assert!(
        matches!(problem, CheckpointProblem::TrailingBytes { extra: 3 }),
        "{problem}"
    );

    std::fs::write(&path, &good).unwrap();
    let problem = problem_of(checkpoint::load::<Small>(&path, "other"), &path);
    assert!(
        matches!(&problem, CheckpointProblem::WrongKind { found, wanted } if found == "small" && wanted == "other"),
        "{problem}"
    );
    assert!(
        problem
            .to_string()
            .contains("holds a `small`, not a `other`")
    );

    std::fs::write(&path, b"{\"json\": true}").unwrap();
    let problem = problem_of(checkpoint::load::<Small>(&path, "small"), &path);
    assert!(
        matches!(problem, CheckpointProblem::NotACheckpoint),
        "{problem}"
    );

    let missing = dir.join("missing.ckpt");
    let problem = problem_of(checkpoint::load::<Small>(&missing, "small"), &missing);
    assert!(matches!(problem, CheckpointProblem::Io(_)), "{problem}");

    // an intact file of the right kind whose payload is another type
    checkpoint::save(&path, "small", &(1u8, 2u8)).unwrap();
    let problem = problem_of(checkpoint::load::<Small>(&path, "small"), &path);
    assert!(
        matches!(problem, CheckpointProblem::Undecodable { .. }),
        "{problem}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_run_of_another_proposal_type_is_refused_by_kind() {
    let dir = scratch("run-kind");
    let path = dir.join("run.ckpt");
    let target = FnTarget::new(1, |x: &[f64]| -0.5 * x[0] * x[0]);
    let run = Run::new(
        &target,
        RandomWalk::new(1, RandomWalkConfig::default()).unwrap(),
        &[0.0],
        RunConfig::new(0, 10),
        1,
        0,
    )
    .unwrap();
    run.checkpoint(&path).unwrap();
    let resumed = Run::<kameleon_samplers::AdaptiveMetropolis>::resume(&path, &target);
    let problem = problem_of(resumed, &path);
    assert!(
        matches!(&problem, CheckpointProblem::WrongKind { found, .. } if found.contains("RandomWalk")),
        "{problem}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn concurrent_writers_never_leave_a_broken_file() {
    let dir = scratch("concurrent");
    let path = dir.join("shared.ckpt");
    let value = |writer: u64, round: u64| Small {
        values: vec![writer as f64; 64 + (round % 7) as usize * 100],
        label: format!("writer {writer} round {round}"),
        count: writer * 1000 + round,
    };
    std::thread::scope(|scope| {
        for writer in 0..4u64 {
            let path = &path;
            scope.spawn(move || {
                for round in 0..50 {
                    checkpoint::save(path, "small", &value(writer, round)).unwrap();
                }
            });
        }
        let path = &path;
        scope.spawn(move || {
            for _ in 0..200 {
                if path.exists() {
                    let read: Small = checkpoint::load(path, "small").unwrap();
                    let (writer, round) = (read.count / 1000, read.count % 1000);
                    assert_eq!(read, value(writer, round));
                }
            }
        });
    });
    let last: Small = checkpoint::load(&path, "small").unwrap();
    assert_eq!(last, value(last.count / 1000, last.count % 1000));
    // no temporary file is left behind
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("shared.ckpt")]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn arbitrary_bytes_never_panic() {
    // Random files (pure noise, and valid headers followed by noise, and
    // valid files with random bytes overwritten) must give an error, never a
    // panic, for the checkpoint loader and for `Run::resume`.
    let dir = scratch("fuzz");
    let path = dir.join("fuzz.ckpt");
    let target = FnTarget::new(2, |x: &[f64]| -0.5 * (x[0] * x[0] + x[1] * x[1]));
    let mut run = Run::new(
        &target,
        RandomWalk::new(2, RandomWalkConfig::default()).unwrap(),
        &[0.0, 0.0],
        RunConfig::new(3, 5),
        1,
        0,
    )
    .unwrap();
    run.advance(&target, 4, None).unwrap();
    run.checkpoint(&path).unwrap();
    let good = std::fs::read(&path).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    for case in 0..3000 {
        let bytes: Vec<u8> = match case % 3 {
            0 => (0..rng.random_range(0..200))
                .map(|_| rng.random())
                .collect(),
            1 => {
                let keep = rng.random_range(0..good.len());
                let mut b = good[..keep].to_vec();
                b.extend((0..rng.random_range(0..200)).map(|_| rng.random::<u8>()));
                b
            }
            _ => {
                let mut b = good.clone();
                for _ in 0..rng.random_range(1..6) {
                    let at = rng.random_range(0..b.len());
                    b[at] = rng.random();
                }
                b
            }
        };
        std::fs::write(&path, &bytes).unwrap();
        let resumed = Run::<RandomWalk>::resume(&path, &target);
        if bytes != good {
            assert!(resumed.is_err(), "case {case} was accepted");
        }
        let _ = checkpoint::load::<Small>(&path, "small");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(target_os = "linux")]
#[test]
fn a_save_removes_the_temporary_files_of_killed_writers() {
    let dir = scratch("stale");
    let path = dir.join("run.ckpt");
    // a writer killed between creating and renaming its file leaves
    // `.run.ckpt.<pid>.<counter>.tmp`; pid u32::MAX never runs on Linux
    // (pids stop at 2^22), pid 1 always does, and this process's own
    // temporary files may still be renamed by another of its threads
    let stale = dir.join(format!(".run.ckpt.{}.0.tmp", u32::MAX));
    let running = dir.join(".run.ckpt.1.0.tmp");
    let ours = dir.join(format!(".run.ckpt.{}.999999.tmp", std::process::id()));
    let other_file = dir.join(format!(".other.ckpt.{}.0.tmp", u32::MAX));
    for file in [&stale, &running, &ours, &other_file] {
        std::fs::write(file, b"partial").unwrap();
    }
    checkpoint::save(&path, "small", &small()).unwrap();
    assert!(!stale.exists(), "the dead writer's file is removed");
    for kept in [&running, &ours, &other_file] {
        assert!(kept.exists(), "{} is kept", kept.display());
    }
    let loaded: Small = checkpoint::load(&path, "small").unwrap();
    assert_eq!(loaded, small());
    std::fs::remove_dir_all(&dir).unwrap();
}
