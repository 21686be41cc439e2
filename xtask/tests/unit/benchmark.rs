//! Tests of `xtask::benchmark`.

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
