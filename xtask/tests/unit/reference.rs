//! Tests of `xtask::reference`.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use xtask::reference::*;

/// A record of `rows` draws with a made-up plan.
pub fn record(rows: usize) -> ReferenceRecord {
    ReferenceRecord {
        plan: ReferencePlan {
            target: "test-target".into(),
            sampler: "test sampler".into(),
            chains: 2,
            burn_in: 10,
            iterations: 20,
            thin: 1,
            seed: 1,
            paper: String::new(),
        },
        diagnostics: ReferenceDiagnostics {
            rows,
            rhat_max: 1.0,
            ess_bulk_min: 10.0,
            acceptance: 0.3,
            wall_time_secs: 0.0,
        },
    }
}

#[test]
fn reference_rows_mean_and_range_match_direct_computations() {
    // Rows (0,10), (1,11), …, (9,19).
    let samples: Vec<f64> = (0..10).flat_map(|i| [i as f64, 10.0 + i as f64]).collect();
    let r = Reference::new(2, samples, record(10)).unwrap();
    assert_eq!(r.rows(), 10);
    assert_eq!(r.mean, vec![4.5, 14.5]);
    let (lo, hi) = r.range(1).unwrap();
    assert!((lo - (10.0 - 0.45)).abs() < 1e-12 && (hi - (19.0 + 0.45)).abs() < 1e-12);
    assert!(r.range(2).is_err());
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let rows = r.random_rows(10, &mut rng).unwrap();
    // All ten rows, each once, each intact.
    let mut firsts: Vec<f64> = rows.chunks_exact(2).map(|x| x[0]).collect();
    assert!(rows.chunks_exact(2).all(|x| x[1] == x[0] + 10.0));
    firsts.sort_by(f64::total_cmp);
    assert_eq!(firsts, (0..10).map(f64::from).collect::<Vec<_>>());
    assert!(r.random_rows(11, &mut rng).is_err());
    assert!(Reference::new(2, vec![1.0; 3], record(1)).is_err());
}

/// A saved reference loads back equal, only under the same plan.
#[test]
fn cache_round_trips_and_checks_the_plan() {
    let dir = std::env::temp_dir().join(format!("xtask-ref-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let samples: Vec<f64> = (0..12).map(f64::from).collect();
    let r = Reference::new(3, samples.clone(), record(4)).unwrap();
    save(&dir, &r).unwrap();
    let Cached::Found(back) = load(&dir, &r.record.plan).unwrap() else {
        panic!("the saved reference is not found");
    };
    assert_eq!(back.samples, samples);
    assert_eq!(back.record, r.record);
    let mut other = r.record.plan.clone();
    other.seed += 1;
    assert!(matches!(load(&dir, &other).unwrap(), Cached::Other(p) if p == r.record.plan));
    assert!(matches!(
        load(&dir.join("absent"), &other).unwrap(),
        Cached::Absent
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}
