//! Statistical tests of the ESS and R-hat estimators against known values and against an
//! independent estimator (batch means).

use kameleon_diagnostics::{
    DiagnosticsError, ess_bulk, ess_geyer, ess_geyer_per_dim, ess_multi_chain, ess_per_second,
    ess_summary, ess_tail, per_dimension, rank_normalize, rhat_rank, rhat_rank_and_ess_bulk,
    rhat_split, split_chains,
};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Stationary AR(1): x_0 ~ N(0, 1), x_t = ρ x_{t−1} + √(1−ρ²) ε_t, so Var x_t = 1 and the
/// integrated autocorrelation time is τ = (1+ρ)/(1−ρ), i.e. ESS/n → (1−ρ)/(1+ρ).
fn ar1(rho: f64, n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let s = (1.0 - rho * rho).sqrt();
    let mut x = Vec::with_capacity(n);
    let mut v: f64 = StandardNormal.sample(&mut rng);
    for _ in 0..n {
        x.push(v);
        let e: f64 = StandardNormal.sample(&mut rng);
        v = rho * v + s * e;
    }
    x
}

/// Independent ESS estimator: batch means with `a` batches of size b = n/a.
/// ESS = n·s²/(b·s²_batch), s² the sample variance and s²_batch the variance of batch means.
fn ess_batch_means(x: &[f64], a: usize) -> f64 {
    let b = x.len() / a;
    let var = |v: &[f64]| {
        let m = v.iter().sum::<f64>() / v.len() as f64;
        v.iter().map(|u| (u - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64
    };
    let means: Vec<f64> = x
        .chunks_exact(b)
        .map(|c| c.iter().sum::<f64>() / b as f64)
        .collect();
    (a * b) as f64 * var(&x[..a * b]) / (b as f64 * var(&means))
}

/// Tolerances. τ̂ = −1 + 2Σ_{m≤M} Γ̂_m/γ̂₀ sums 2M+2 autocorrelations, each with sd ≈ 1/√n
/// (Bartlett) and correlated as the chain is, so its relative sd is about
/// √(2(2M+1)/n)·(1 + noise from the random truncation point M) (Priestley 1981 §6.2 for the
/// fixed-window part). n = 10⁵: ρ = 0.9 → M ≈ 55 (where ρ^{2M} reaches 1/√n), sd ≈ 4.7 %;
/// ρ ∈ {0.5, 0, −0.5} → M ≲ 8, fixed-window sd ≲ 1.8 %, but the random truncation (pairs of pure
/// noise kept until the first negative one) roughly doubles it: ≈ 3 % per chain. Averaging 4
/// seeds halves these, and 3 sd of the mean gives the tolerances 8 % and 5 %.
#[test]
fn geyer_ess_of_ar1_matches_closed_form() {
    let n = 100_000;
    for (rho, tol) in [(0.9, 0.08), (0.5, 0.05), (0.0, 0.05), (-0.5, 0.05)] {
        let expected = (1.0 - rho) / (1.0 + rho);
        let mean: f64 = (0..4)
            .map(|seed| ess_geyer(&ar1(rho, n, 100 + seed)).unwrap() / n as f64)
            .sum::<f64>()
            / 4.0;
        let rel = (mean / expected - 1.0).abs();
        assert!(
            rel < tol,
            "rho {rho}: ESS/n {mean} vs {expected} (rel err {rel})"
        );
    }
}

/// Geyer vs batch means on the same chains. With a = 100 batches the batch-means variance has
/// relative sd √(2/99) ≈ 14 %, Geyer ≈ 3 % (ρ = 0.7, M ≈ 25); the mean log-ratio of 8 seeds has
/// sd ≈ 0.145/√8 ≈ 0.05, so 3 sd = 0.15. Batch size 1000 ≫ τ ≈ 5.7 keeps the batch-means bias
/// (≈ 2ρ/((1−ρ)²·τ·b) relative) below 0.2 %.
#[test]
fn geyer_agrees_with_batch_means() {
    let n = 100_000;
    let mean_log_ratio: f64 = (0..8)
        .map(|seed| {
            let x = ar1(0.7, n, 200 + seed);
            (ess_geyer(&x).unwrap() / ess_batch_means(&x, 100)).ln()
        })
        .sum::<f64>()
        / 8.0;
    assert!(
        mean_log_ratio.abs() < 0.15,
        "mean log(Geyer/batch means) = {mean_log_ratio}"
    );
}

/// iid N(0,1): τ = 1, so ESS/n ≈ 1 for every estimator. Bulk ESS of 4 chains × 25 000 (split
/// into 8) has relative sd of a few % (M ≲ 4: √(2·9/10⁵) ≈ 1.3 %); tail ESS of the 5 %/95 %
/// indicators is noisier (indicator variance estimates), sd ≈ 3–4 %. Tolerances 5 % and 12 %.
#[test]
fn iid_draws_have_ess_near_n() {
    let n = 100_000;
    let x = ar1(0.0, n, 7);
    let geyer = ess_geyer(&x).unwrap() / n as f64;
    assert!((geyer - 1.0).abs() < 0.05, "Geyer ESS/n = {geyer}");
    let chains: Vec<&[f64]> = x.chunks_exact(n / 4).collect();
    let bulk = ess_bulk(&chains).unwrap() / n as f64;
    let tail = ess_tail(&chains).unwrap() / n as f64;
    assert!((bulk - 1.0).abs() < 0.05, "bulk ESS/n = {bulk}");
    assert!((tail - 1.0).abs() < 0.12, "tail ESS/n = {tail}");
}

/// Four AR(1) chains with ρ = 0.9: the multi-chain, bulk (rank normalisation of a Gaussian
/// series is asymptotically the identity) and single-chain Geyer estimators all target
/// (1−ρ)/(1+ρ). Total 10⁵ draws → relative sd ≈ 4.7 %, tolerance 3 sd ≈ 15 %.
#[test]
fn multi_chain_and_bulk_ess_of_ar1() {
    let rho = 0.9;
    let expected = (1.0 - rho) / (1.0 + rho);
    let chains: Vec<Vec<f64>> = (0..4).map(|s| ar1(rho, 25_000, 300 + s)).collect();
    let refs: Vec<&[f64]> = chains.iter().map(Vec::as_slice).collect();
    for (name, ess) in [
        ("multi", ess_multi_chain(&refs).unwrap()),
        ("bulk", ess_bulk(&refs).unwrap()),
    ] {
        let ratio = ess / 100_000.0 / expected;
        assert!(
            (ratio - 1.0).abs() < 0.15,
            "{name}: ESS ratio to truth {ratio}"
        );
    }
    // With one chain the Vehtari estimator differs from Geyer only by O(τ/N) and the handling of
    // the truncation pair; on 10⁵ draws they agree within 2 %.
    let long = ar1(rho, 100_000, 400);
    let (a, b) = (
        ess_geyer(&long).unwrap(),
        ess_multi_chain(&[&long]).unwrap(),
    );
    assert!(
        (a / b - 1.0).abs() < 0.02,
        "Geyer {a} vs Vehtari single-chain {b}"
    );
}

/// Antithetic chains (ρ = −0.9, τ = 1/19) would give ESS = 19·MN; both estimators cap τ̂ at
/// 1/log₁₀(MN), i.e. ESS at MN·log₁₀(MN) = 4·10⁴ for 10⁴ draws. (Super-efficiency below the cap,
/// ρ = −0.5 with ESS ≈ 3n, is checked in `geyer_ess_of_ar1_matches_closed_form`.)
#[test]
fn antithetic_chain_is_capped() {
    let x = ar1(-0.9, 10_000, 11);
    let cap = 10_000.0 * 4.0;
    for ess in [ess_multi_chain(&[&x]).unwrap(), ess_geyer(&x).unwrap()] {
        assert!((ess - cap).abs() < 1e-6 * cap, "capped ESS {ess}");
    }
    // A perfectly alternating series has σ̂² ≤ 0 after truncation: both estimators cap.
    let alternating: Vec<f64> = (0..1000)
        .map(|t| if t % 2 == 0 { 1.0 } else { -1.0 })
        .collect();
    assert!((ess_geyer(&alternating).unwrap() - 3000.0).abs() < 1e-9);
    assert!((ess_multi_chain(&[&alternating]).unwrap() - 3000.0).abs() < 1e-9);
}

/// R-hat: chains from one law give R̂ ≈ 1 (for M = 8 split chains of 2500 iid draws the excess
/// R̂ − 1 is O(1/N′) ≈ 4e-4 in expectation); one chain shifted by 3 sd inflates both; one chain
/// with twice the sd is invisible to the location R̂ (< 1.01) but caught by the folded one.
#[test]
fn rhat_detects_location_and_scale_differences() {
    let base: Vec<Vec<f64>> = (0..4).map(|s| ar1(0.0, 5000, 500 + s)).collect();
    let refs: Vec<&[f64]> = base.iter().map(Vec::as_slice).collect();
    assert!(rhat_split(&refs).unwrap() < 1.01);
    assert!(rhat_rank(&refs).unwrap() < 1.01);
    // Identical copies of one chain: only the split halves can differ.
    assert!(rhat_rank(&[refs[0], refs[0], refs[0]]).unwrap() < 1.01);

    let shifted: Vec<f64> = base[3].iter().map(|v| v + 3.0).collect();
    let with_shift = [refs[0], refs[1], refs[2], shifted.as_slice()];
    assert!(rhat_split(&with_shift).unwrap() > 1.1);
    assert!(rhat_rank(&with_shift).unwrap() > 1.1);

    let wide: Vec<f64> = base[3].iter().map(|v| 2.0 * v).collect();
    let with_wide = [refs[0], refs[1], refs[2], wide.as_slice()];
    assert!(rhat_split(&with_wide).unwrap() < 1.01);
    assert!(rhat_rank(&with_wide).unwrap() > 1.01);
}

/// The shared computation gives each function's figure bit for bit, on
/// mixing, shifted, tied and constant chains, and both errors where the
/// shared part fails.
#[test]
fn rhat_and_bulk_ess_together_are_each_on_its_own() {
    let base: Vec<Vec<f64>> = (0..4).map(|s| ar1(0.7, 1001, 700 + s)).collect();
    let shifted: Vec<f64> = base[3].iter().map(|v| v + 0.5).collect();
    let tied: Vec<Vec<f64>> = base
        .iter()
        .map(|c| c.iter().map(|v| v.round()).collect())
        .collect();
    let constant = vec![2.0; 1001];
    let sets: Vec<Vec<&[f64]>> = vec![
        base.iter().map(Vec::as_slice).collect(),
        vec![&base[0], &base[1], &base[2], &shifted],
        tied.iter().map(Vec::as_slice).collect(),
        vec![&base[0]],
        vec![&constant, &constant],
        vec![&base[0], &base[1][..3]],
    ];
    let bits = |r: &Result<f64, DiagnosticsError>| r.as_ref().map(|v| v.to_bits()).ok();
    for chains in &sets {
        let (rhat, ess) = rhat_rank_and_ess_bulk(chains);
        assert_eq!(bits(&rhat), bits(&rhat_rank(chains)));
        assert_eq!(bits(&ess), bits(&ess_bulk(chains)));
        assert_eq!(rhat.is_err(), rhat_rank(chains).is_err());
        assert_eq!(ess.is_err(), ess_bulk(chains).is_err());
    }
}

#[test]
fn split_and_rank_normalize_by_hand() {
    let chain = [5.0, 1.0, 3.0, 2.0, 4.0];
    let split = split_chains(&[&chain]).unwrap();
    assert_eq!(split, vec![vec![5.0, 1.0], vec![2.0, 4.0]]);
    // Values {5, 1} ∪ {2, 2}: ranks 4, 1, 2.5, 2.5 of S = 4 → z = Φ⁻¹((r − 3/8)/4.25).
    let z = rank_normalize(&[&[5.0, 1.0], &[2.0, 2.0]]).unwrap();
    let phi_inv = |p: f64| kameleon_diagnostics::normal_quantile(p).unwrap();
    let expect = |r: f64| phi_inv((r - 0.375) / 4.25);
    assert!((z[0][0] - expect(4.0)).abs() < 1e-15);
    assert!((z[0][1] - expect(1.0)).abs() < 1e-15);
    assert_eq!(z[1][0], z[1][1]);
    assert!((z[1][0] - expect(2.5)).abs() < 1e-15);
}

#[test]
fn per_dimension_summary_and_helpers() {
    // Two columns: AR(1) with ρ = 0.5 (ESS/n ≈ 1/3) and iid (ESS/n ≈ 1).
    let n = 50_000;
    let (a, b) = (ar1(0.5, n, 600), ar1(0.0, n, 601));
    let rows: Vec<f64> = a.iter().zip(&b).flat_map(|(u, v)| [*u, *v]).collect();
    let ess = ess_geyer_per_dim(&rows, 2).unwrap();
    assert_eq!(ess, vec![ess_geyer(&a).unwrap(), ess_geyer(&b).unwrap()]);
    let summary = ess_summary(&ess).unwrap();
    assert_eq!(summary.min, ess[0]);
    assert!((summary.mean - (ess[0] + ess[1]) / 2.0).abs() < 1e-9);
    assert!((ess_per_second(summary.min, 2.0).unwrap() - summary.min / 2.0).abs() < 1e-12);
    assert!(ess_per_second(1.0, 0.0).is_err());
}

#[test]
fn bad_input_gives_typed_errors() {
    assert_eq!(
        ess_geyer(&[1.0; 10]),
        Err(DiagnosticsError::ZeroVariance("ess_geyer"))
    );
    assert!(matches!(
        ess_geyer(&[1.0, 2.0]),
        Err(DiagnosticsError::TooFewDraws { .. })
    ));
    assert!(matches!(
        ess_bulk(&[&[1.0, 2.0, 3.0, 4.0], &[1.0, 2.0, 3.0]]),
        Err(DiagnosticsError::DimensionMismatch(_))
    ));
    assert!(matches!(
        ess_multi_chain(&[&[1.0, f64::NAN, 3.0, 4.0]]),
        Err(DiagnosticsError::NonFinite(_))
    ));
    assert!(rhat_rank(&[&[2.0; 8], &[2.0; 8]]).is_err());
    assert!(ess_bulk(&[]).is_err());
}

/// A dimension d = 0 gave an empty list of ESS values, as if there were nothing to judge.
#[test]
fn per_dimension_refuses_zero_dimensions() {
    let chain = [0.1, 0.5, 0.2, 0.9, 0.4, 0.3, 0.8, 0.7];
    assert!(matches!(
        per_dimension(&[&chain], 0, ess_bulk),
        Err(DiagnosticsError::InvalidArgument(_))
    ));
    assert!(matches!(
        ess_geyer_per_dim(&chain, 0),
        Err(DiagnosticsError::InvalidArgument(_))
    ));
}

/// The autocorrelation sum by hand on one short chain. With one chain var⁺ = γ̂₀ and
/// W = γ̂₀·n/(n−1), so ρ̂_t = γ̂_t/γ̂₀ − 1/(n−1) for t ≥ 1 while ρ̂₀ is 1 exactly (not
/// 1 − 1/(n−1), which would bias every ESS low by 2/(n−1) relative). Here ρ̂₁ ≈ 0.077 and the
/// second pair (ρ̂₂, ρ̂₃) ≈ (−0.21, −0.21) is negative with ρ̂₂ < 0, so only the first pair
/// counts: τ̂ = −1 + 2(1 + ρ̂₁), above the cap 1/log₁₀ 12 ≈ 0.93.
#[test]
fn multi_chain_sum_by_hand_has_rho_zero_equal_to_one() {
    let x = [0.0, 1.0, 3.0, 2.0, 4.0, 3.0, 1.0, 2.0, 0.0, 1.0, 3.0, 2.0];
    let n = x.len() as f64;
    let g = kameleon_diagnostics::autocovariance_direct(&x, 3).unwrap();
    let rho = |t: usize| g[t] / g[0] - 1.0 / (n - 1.0);
    assert!(rho(2) + rho(3) < 0.0 && rho(2) < 0.0);
    let expected = n / (-1.0 + 2.0 * (1.0 + rho(1)));
    let got = ess_multi_chain(&[&x]).unwrap();
    assert!(
        (got - expected).abs() < 1e-12 * expected,
        "{got} vs {expected}"
    );
}

/// Every split diagnostic accepts chains of `MIN_DRAWS` draws, whose halves hold two.
#[test]
fn split_diagnostics_accept_min_draws_per_chain() {
    let chains: [&[f64]; 3] = [
        &[0.1, 1.2, -0.3, 0.8],
        &[0.5, -1.1, 0.9, 0.0],
        &[2.0, 0.3, -0.7, 1.4],
    ];
    assert_eq!(chains[0].len(), kameleon_diagnostics::MIN_DRAWS);
    for value in [
        ess_bulk(&chains),
        ess_tail(&chains),
        rhat_split(&chains),
        rhat_rank(&chains),
    ] {
        assert!(value.unwrap().is_finite());
    }
    assert!(matches!(
        ess_bulk(&[&[1.0, 2.0, 3.0]]),
        Err(DiagnosticsError::TooFewDraws {
            needed: 4,
            got: 3,
            ..
        })
    ));
}

/// Draws in {0, 1} with half of them 1: q̂₀.₉₅ = 1 = the largest draw, so I[x ≤ q̂₀.₉₅] is 1
/// everywhere and says nothing about the tail. The tail ESS is then that of I[x ≤ q̂₀.₀₅] = I[x = 0]
/// alone, which for these draws is the bulk ESS's own indicator: the multi-chain ESS of the split
/// indicator chains.
#[test]
fn tail_ess_of_discrete_draws_ignores_a_constant_indicator() {
    let chains: Vec<Vec<f64>> = (0..4)
        .map(|s| {
            ar1(0.3, 400, 700 + s)
                .iter()
                .map(|&v| f64::from(v > 0.0))
                .collect()
        })
        .collect();
    let refs: Vec<&[f64]> = chains.iter().map(Vec::as_slice).collect();
    let split = split_chains(&refs).unwrap();
    let lower: Vec<Vec<f64>> = split
        .iter()
        .map(|c| c.iter().map(|&v| f64::from(v <= 0.0)).collect())
        .collect();
    let lower_refs: Vec<&[f64]> = lower.iter().map(Vec::as_slice).collect();
    let tail = ess_tail(&refs).unwrap();
    assert_eq!(tail, ess_multi_chain(&lower_refs).unwrap());
    assert!(ess_tail(&[&[3.0; 8]]).is_err());
}

/// Chains frozen at different points: no variance within, some between, so R̂ = +∞ exactly
/// (a mean off by one rounding used to leave a within-chain variance of ~1e-33 and R̂ ≈ 1e15).
/// Binary draws split half and half fold to one value: the location R̂ alone is reported.
#[test]
fn r_hat_of_frozen_chains_and_of_an_even_binary_split() {
    let frozen: Vec<Vec<f64>> = [0.1, 0.7, 0.3].iter().map(|&v| vec![v; 100]).collect();
    let refs: Vec<&[f64]> = frozen.iter().map(Vec::as_slice).collect();
    assert_eq!(rhat_rank(&refs).unwrap(), f64::INFINITY);
    assert_eq!(rhat_split(&refs).unwrap(), f64::INFINITY);
    assert!(matches!(
        rhat_rank(&[&[0.3; 50], &[0.3; 50]]),
        Err(DiagnosticsError::ZeroVariance("rhat_rank"))
    ));
    let a = [0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0];
    let b = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0];
    let binary = rhat_rank(&[&a, &b]).unwrap();
    // The location R̂ by its formula on the rank-normalised halves.
    let halves = split_chains(&[&a, &b]).unwrap();
    let z = rank_normalize(&halves.iter().map(Vec::as_slice).collect::<Vec<_>>()).unwrap();
    let mean = |c: &[f64]| c.iter().sum::<f64>() / c.len() as f64;
    let var = |c: &[f64]| {
        let m = mean(c);
        c.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (c.len() - 1) as f64
    };
    let n = z[0].len() as f64;
    let w = z.iter().map(|c| var(c)).sum::<f64>() / z.len() as f64;
    let means: Vec<f64> = z.iter().map(|c| mean(c)).collect();
    let location = (((n - 1.0) / n * w + var(&means)) / w).sqrt();
    assert!((binary - location).abs() < 1e-12, "{binary} vs {location}");
}

/// ESS and split-R̂ are scale-free, and a power of two scales every operation exactly: draws of
/// magnitude 1e±200 must give the very figures of the same draws near 1. Before, their
/// squares overflowed (400 iid draws at 1e200 gave a Geyer ESS of 1041) or underflowed (a
/// false zero variance at 1e-200).
#[test]
fn draws_far_from_unit_scale_give_the_figures_of_the_same_draws_near_one() {
    let chains: Vec<Vec<f64>> = (0..4).map(|k| ar1(0.6, 400, 90 + k)).collect();
    let slices: Vec<&[f64]> = chains.iter().map(Vec::as_slice).collect();
    let reference = (
        ess_geyer(slices[0]).unwrap(),
        ess_multi_chain(&slices).unwrap(),
        rhat_split(&slices).unwrap(),
    );
    for exponent in [700, -700, 1000, -1000] {
        let factor = 2.0_f64.powi(exponent / 2) * 2.0_f64.powi(exponent - exponent / 2);
        let scaled: Vec<Vec<f64>> = chains
            .iter()
            .map(|c| c.iter().map(|v| v * factor).collect())
            .collect();
        let scaled: Vec<&[f64]> = scaled.iter().map(Vec::as_slice).collect();
        let figures = (
            ess_geyer(scaled[0]).unwrap(),
            ess_multi_chain(&scaled).unwrap(),
            rhat_split(&scaled).unwrap(),
        );
        assert_eq!(figures, reference, "draws times 2^{exponent}");
    }
}

/// A long chain within 2^±500 of unit scale can still overflow: its centred FFT, which the
/// autocovariances come from, holds about 0.3·n·max|x| at the lowest frequency (a chain whose
/// halves sit at different levels), and its square passes the largest double at n = 2^15 draws
/// of magnitude 2^499. Geyer's ESS then came out as its cap n·log₁₀ n.
#[test]
fn long_chains_of_large_draws_give_the_figures_of_the_same_draws_near_one() {
    let n = 1 << 15;
    let noise = ar1(0.6, n, 77);
    let chain: Vec<f64> = noise
        .iter()
        .enumerate()
        .map(|(t, v)| if t < n / 2 { 1.0 } else { -0.5 } + 0.01 * v)
        .collect();
    let factor = 2.0_f64.powi(499);
    let large: Vec<f64> = chain.iter().map(|v| v * factor).collect();
    let figures = |x: &[f64]| {
        let (a, b) = x.split_at(n / 2);
        (
            ess_geyer(x).unwrap(),
            ess_multi_chain(&[a, b]).unwrap(),
            rhat_split(&[a, b]).unwrap(),
        )
    };
    assert_eq!(figures(&large), figures(&chain));
}

/// Rank normalisation against ranks counted by brute force (ties averaged),
/// over a sequence of sizes that revisits earlier ones after others have
/// been ranked, so that any score remembered from an earlier call must be
/// the one of the size at hand.
#[test]
fn rank_normalize_matches_brute_force_ranks_across_sizes() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    for (round, &s) in [5usize, 7, 5, 9, 11, 13, 17, 5, 7].iter().enumerate() {
        // values on a coarse grid, so that some are tied
        let pooled: Vec<f64> = (0..s)
            .map(|_| {
                let z: f64 = StandardNormal.sample(&mut rng);
                (z * 2.0).round() / 2.0
            })
            .collect();
        let (a, b) = pooled.split_at(s / 2);
        let z = rank_normalize(&[a, b]).unwrap();
        let got: Vec<f64> = z.concat();
        for (i, &v) in pooled.iter().enumerate() {
            let below = pooled.iter().filter(|&&w| w < v).count();
            let equal = pooled.iter().filter(|&&w| w == v).count();
            // 1-based ranks below+1 … below+equal, averaged
            let rank = below as f64 + (equal as f64 + 1.0) / 2.0;
            let expected =
                kameleon_diagnostics::normal_quantile((rank - 0.375) / (s as f64 + 0.25)).unwrap();
            assert_eq!(got[i], expected, "round {round}, size {s}, value {v}");
        }
    }
}

/// The autocovariances' FFT runs at the CPU's widest vectors; capped at 256
/// bits it gives the same bits (on a CPU without AVX-512 both runs take the
/// same path). Lengths whose FFT halves are and are not whole vectors.
#[test]
fn estimates_do_not_depend_on_the_vector_width() {
    use kameleon_core::simd::{Width, set_max_width};
    let figures = |width| {
        set_max_width(width);
        let values: Vec<u64> = [5, 13, 100, 1001]
            .into_iter()
            .flat_map(|n| {
                let (a, b) = (ar1(0.7, n, 1), ar1(0.7, n, 2));
                let chains: [&[f64]; 2] = [&a, &b];
                [
                    ess_bulk(&chains).unwrap(),
                    ess_tail(&chains).unwrap(),
                    rhat_rank(&chains).unwrap(),
                ]
            })
            .map(f64::to_bits)
            .collect();
        set_max_width(Width::Widest);
        values
    };
    assert_eq!(figures(Width::Widest), figures(Width::Bits256));
}
