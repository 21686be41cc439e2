//! Tests of `xtask::benchmark`.

use crate::common::tree;
use std::path::Path;
use std::path::PathBuf;
use xtask::benchmark::*;
use xtask::size::Size;

/// The paper-size Glass benchmark is the KAMH paper's: 30 chains of
/// 500 000 iterations, 100 000 of them burn-in, thinned to 12 000 draws;
/// each size caches in its own directory, and the ABC reference (whose
/// full size is already the KMC code's) is shared by full and paper.
#[test]
fn each_size_has_its_plan_and_cache() {
    let glass = ReferenceKey::Glass {
        n_importance: GLASS_IMPORTANCE_DRAWS,
    };
    let paper = glass.plan(Size::Paper, 1);
    assert_eq!(
        (paper.chains, paper.burn_in + paper.iterations),
        (30, 500_000)
    );
    assert_eq!(paper.burn_in, 100_000);
    assert_eq!(paper.chains as u64 * paper.iterations / paper.thin, 12_000);
    assert_ne!(glass.plan(Size::Full, 1), paper);
    let env = |size| RunEnv {
        references: PathBuf::from("refs"),
        keep_cached: false,
        size,
        seed: 1,
    };
    assert_eq!(
        glass.dir(&env(Size::Paper)),
        Path::new("refs/glass-benchmark/paper")
    );
    assert_eq!(
        glass.dir(&env(Size::Full)),
        Path::new("refs/glass-benchmark/full")
    );
    let abc = ReferenceKey::Abc;
    assert_eq!(abc.plan(Size::Paper, 1), abc.plan(Size::Full, 1));
    assert_eq!(abc.dir(&env(Size::Paper)), abc.dir(&env(Size::Full)));
}

/// The master seed reads back from a reference plan's seed.
#[test]
fn the_master_seed_reads_back_from_a_plan() {
    for seed in [0, 1, 7, 12_345, u64::MAX] {
        assert_eq!(
            master_seed(ReferenceKey::Abc.plan(Size::Quick, seed).seed),
            seed
        );
    }
}

/// A cached reference made with another plan, or damaged, in the
/// directory `--references` names is an error that names what differs and
/// what to do, and stays as it was; in the default directory (the output
/// root) it is recomputed.
#[test]
fn a_reference_of_another_plan_is_never_replaced_where_references_points() {
    let refs = std::env::temp_dir().join(format!("xtask-stale-ref-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&refs);
    let env = |seed, keep_cached| RunEnv {
        references: refs.clone(),
        keep_cached,
        size: Size::Quick,
        seed,
    };
    let abc = ReferenceKey::Abc;
    // none there yet: computed into the directory given
    load_or_compute(abc, &env(7, true)).unwrap();
    let dir = abc.dir(&env(7, true));
    let made = tree(&dir);
    let refused = |env: &RunEnv| match load_or_compute(abc, env) {
        Ok(_) => panic!("the cached reference was not refused"),
        Err(e) => format!("{e:#}"),
    };
    let message = refused(&env(8, true));
    for part in [
        "seed: stored --seed 7, wanted --seed 8",
        "--references",
        "delete",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    assert!(!message.contains("chains:"), "{message}");
    assert_eq!(tree(&dir), made);
    // the same run with the reference's seed reads it
    load_or_compute(abc, &env(7, true)).unwrap();
    // damaged: an error, the files kept
    std::fs::write(dir.join("benchmark.json"), b"{").unwrap();
    let damaged = tree(&dir);
    let message = refused(&env(7, true));
    assert!(
        message.contains("damaged") && message.contains("delete"),
        "{message}"
    );
    assert_eq!(tree(&dir), damaged);
    // in the default directory: recomputed with this run's plan
    let again = load_or_compute(abc, &env(8, false)).unwrap();
    assert_eq!(again.record.plan, abc.plan(Size::Quick, 8));
    std::fs::remove_dir_all(&refs).unwrap();
}
