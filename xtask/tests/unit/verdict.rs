//! Tests of `xtask::verdict`.

use xtask::verdict::*;

/// An estimate with the given mean and half-width from two values.
fn at(label: &str, mean: f64, half_width: f64) -> Estimate {
    // two values m ± s have sd s√2, so half-width Z80·s√2/√2 = Z80·s
    let s = half_width / Z80;
    estimate(label, &[mean - s, mean + s])
}

#[test]
fn intervals_are_the_papers_80_percent_intervals() {
    let i = estimate("x", &[3.0, 1.0, 2.0, 4.0, 5.0]).unwrap();
    assert_eq!(i.mean, 3.0);
    assert!((i.half_width - Z80 * 2.5f64.sqrt() / 5f64.sqrt()).abs() < 1e-15);
    assert_eq!(
        (i.low, i.high, i.runs),
        (3.0 - i.half_width, 3.0 + i.half_width, 5)
    );
    let a = at("a", 2.0, 0.5).unwrap();
    assert!((a.mean - 2.0).abs() < 1e-15 && (a.half_width - 0.5).abs() < 1e-12);
    let t = a.times(2.0).plus(1.0);
    assert_eq!(t.label, "2.0000 × a + 1.0000");
    assert!((t.mean - 5.0).abs() < 1e-12 && (t.half_width - 1.0).abs() < 1e-12);
}

#[test]
fn pairs_are_decided_on_disjoint_intervals() {
    let d = compare(at("a", 1.0, 0.2), Claimed::Below, at("b", 2.0, 0.2));
    assert_eq!(d.verdict, Verdict::Reproduced);
    assert_eq!(d.numbers.len(), 2);
    let d = compare(at("a", 1.0, 0.2), Claimed::Above, at("b", 2.0, 0.2));
    assert_eq!(d.verdict, Verdict::Refuted);
    let d = compare(at("a", 3.0, 0.2), Claimed::Below, at("b", 2.0, 0.2));
    assert_eq!(d.verdict, Verdict::Refuted);
    // overlapping: 1.0 + 0.6 > 2.0 − 0.6
    let d = compare(at("a", 1.0, 0.6), Claimed::Below, at("b", 2.0, 0.6));
    assert_eq!(d.verdict, Verdict::Inconclusive);
    let d = compare(at("a", 2.5, 0.6), Claimed::Below, at("b", 2.0, 0.6));
    assert_eq!(d.verdict, Verdict::Inconclusive);
}

#[test]
fn thresholds_need_the_whole_interval() {
    let t = || Ok(Interval::threshold(0.234));
    let below = compare(at("accept", 0.2, 0.01), Claimed::Below, t());
    assert_eq!(below.verdict, Verdict::Reproduced);
    assert_eq!(
        below.numbers.len(),
        1,
        "a threshold is in the rule, not a number"
    );
    let across = compare(at("accept", 0.23, 0.01), Claimed::Below, t());
    assert_eq!(across.verdict, Verdict::Inconclusive);
    let above = compare(at("accept", 0.3, 0.01), Claimed::Below, t());
    assert_eq!(above.verdict, Verdict::Refuted);
    assert_eq!(
        within(at("a", 0.234, 0.01), 0.204, 0.264).verdict,
        Verdict::Reproduced
    );
    assert_eq!(
        within(at("a", 0.19, 0.02), 0.204, 0.264).verdict,
        Verdict::Inconclusive
    );
    assert_eq!(
        within(at("a", 0.16, 0.02), 0.204, 0.264).verdict,
        Verdict::Refuted
    );
    assert_eq!(
        within(at("a", 0.3, 0.02), 0.204, 0.264).verdict,
        Verdict::Refuted
    );
    let waiting = within(pending("AM-LS accept"), 0.204, 0.264);
    assert_eq!(waiting.verdict, Verdict::Pending);
    assert_eq!(waiting.detail, vec!["pending: AM-LS accept".to_string()]);
    assert!(
        waiting.rule.contains("the estimate lies in"),
        "{}",
        waiting.rule
    );
}

#[test]
fn infinite_or_nan_values_are_no_data_on_either_side() {
    let finite = || at("b", 2.0, 0.1);
    for bad in [f64::INFINITY, f64::NAN, f64::NEG_INFINITY] {
        let a = || estimate("a", &[1.0, bad]);
        assert!(matches!(a(), Err(Missing::NoData(_))));
        for claimed in [Claimed::Below, Claimed::Above] {
            for d in [
                compare(a(), claimed, finite()),
                compare(finite(), claimed, a()),
            ] {
                assert_eq!(d.verdict, Verdict::Inconclusive, "{bad} {claimed:?}");
                assert!(d.numbers.is_empty());
                assert!(d.detail[0].starts_with("no data"), "{:?}", d.detail);
            }
        }
    }
    assert!(matches!(estimate("a", &[]), Err(Missing::NoData(_))));
    let d = compare(pending("KMC"), Claimed::Below, estimate("a", &[f64::NAN]));
    assert_eq!(d.verdict, Verdict::Pending);
    // a claim decided on data rests on finite numbers; one without data is never decided
    let claim = ClaimCheck::new(
        "c",
        compare(estimate("a", &[f64::INFINITY]), Claimed::Below, finite()),
    );
    assert_eq!(claim.verdict, Verdict::Inconclusive);
    assert!(claim.rests_on_data());
    assert!(claim.evidence.contains("no data"), "{}", claim.evidence);
}

#[test]
fn bundles_state_and_apply_their_rule() {
    let yes = || compare(at("a", 1.0, 0.1), Claimed::Below, at("b", 2.0, 0.1));
    let no = || compare(at("a", 3.0, 0.1), Claimed::Below, at("b", 2.0, 0.1));
    let maybe = || compare(at("a", 1.9, 0.3), Claimed::Below, at("b", 2.0, 0.3));
    let none = || {
        compare(
            estimate("a", &[f64::INFINITY]),
            Claimed::Below,
            at("b", 2.0, 0.1),
        )
    };
    assert_eq!(all_of(vec![yes(), yes()]).verdict, Verdict::Reproduced);
    assert_eq!(all_of(vec![yes(), maybe()]).verdict, Verdict::Inconclusive);
    assert_eq!(all_of(vec![yes(), no()]).verdict, Verdict::Refuted);
    assert_eq!(all_of(vec![yes(), none()]).verdict, Verdict::Inconclusive);
    assert_eq!(all_of(vec![no()]), no());
    let most = |parts| at_least(3, parts);
    assert_eq!(
        most(vec![yes(), yes(), yes(), no(), no()]).verdict,
        Verdict::Reproduced
    );
    // only two wins: the three with no data count for neither side
    assert_eq!(
        most(vec![yes(), yes(), none(), none(), none()]).verdict,
        Verdict::Inconclusive
    );
    assert_eq!(
        most(vec![yes(), no(), no(), no(), maybe()]).verdict,
        Verdict::Refuted
    );
    let d = most(vec![yes(), yes(), none(), none(), none()]);
    assert!(d.rule.starts_with("at least 3 of the 5"), "{}", d.rule);
    assert_eq!(d.detail.len(), 5);
}
