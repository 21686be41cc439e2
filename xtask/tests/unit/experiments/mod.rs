//! Tests of `xtask::experiments`.

mod ckam;
mod fkamh_covariance;
mod proposals;
mod trajectories;

use xtask::experiments::*;
use xtask::size::Size;

/// A name that is no experiment's is an error that points to `list` and,
/// for a typo, a different case or a part of a name, suggests the
/// experiments meant.
#[test]
fn an_unknown_name_suggests_the_experiments_meant() {
    assert_eq!(named("kmc-abc").map(|e| e.name).unwrap(), "kmc-abc");
    let message = |name: &str| format!("{:#}", named(name).map(|e| e.name).unwrap_err());
    for (typo, meant) in [
        ("kamh-banan", "`kamh-banana`"),
        ("KAMH-Banana", "`kamh-banana`"),
        ("kamh_glass", "`kamh-glass`"),
        ("ckam-bimodl", "`ckam-bimodal`"),
        ("banana", "`kamh-banana`, `kmc-banana`"),
    ] {
        let m = message(typo);
        assert!(
            m.contains(&format!("unknown experiment `{typo}`"))
                && m.contains(&format!("did you mean {meant}?"))
                && m.contains("cargo xtask list"),
            "{typo}: {m}"
        );
    }
    // `all` names no experiment where one is needed (merge, fold, recompute)
    let m = message("all");
    assert!(
        m.contains("one experiment") && m.contains("cargo xtask list"),
        "{m}"
    );
    let m = message("something-else");
    assert!(
        !m.contains("did you mean") && m.contains("cargo xtask list"),
        "{m}"
    );
}

/// `--size paper` changes only the experiments whose full size is
/// reduced: kamh-glass gets the KAMH paper's 30 chains of 20 000 +
/// 80 000 iterations; every other grid runs its full cells.
#[test]
fn paper_size_differs_from_full_only_where_full_is_reduced() {
    for e in all() {
        let Some(p) = &e.protocol else { continue };
        if e.full_is_reduced() {
            continue;
        }
        assert_eq!(
            p.cells_at(Size::Paper),
            p.cells_at(Size::Full),
            "{}",
            e.name
        );
        assert_eq!(p.chains_at(Size::Paper), p.chains, "{}", e.name);
    }
    let glass = find("kamh-glass").unwrap();
    let p = glass.protocol.as_ref().unwrap();
    assert!(glass.full_is_reduced());
    assert_eq!(
        (p.chains_at(Size::Paper), p.chains_at(Size::Full)),
        (30, 10)
    );
    for (paper, full) in p.cells_at(Size::Paper).iter().zip(p.cells_at(Size::Full)) {
        assert_eq!(paper.key(), full.key());
        assert_eq!((paper.burn_in, paper.iterations), (20_000, 80_000));
        assert_eq!((full.burn_in, full.iterations), (2_000, 8_000));
    }
    assert_eq!(p.chains_at(Size::Quick), p.quick_chains);
    assert!(
        glass
            .size_description(Size::Paper)
            .starts_with("30 chains;")
    );
    // kmc-glass runs the paper's grid at full size: only its benchmark is reduced
    let kmc = find("kmc-glass").unwrap();
    let p = kmc.protocol.as_ref().unwrap();
    assert!(kmc.full_is_reduced());
    assert_eq!(p.cells_at(Size::Paper), p.cells_at(Size::Full));
}
