//! Tests of `xtask::bench_report::peak`.

use xtask::bench_report::peak::*;
use xtask::bench_report::timing::TimerSettings;

/// The streaming sum is the sum, whatever the tail.
#[test]
fn stream_sum_sums() {
    for n in [0usize, 1, 7, 16, 33, 1000] {
        let values: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let sum = kameleon_core::simd::dispatch(StreamSum { values: &values });
        assert_eq!(sum, (n * n.saturating_sub(1) / 2) as f64, "n = {n}");
    }
}

/// The FMA loop computes what it claims: chain i is the affine
/// recurrence from 1 + i, whose closed form after r rounds is
/// b/(1−a) + aʳ(1 + i − b/(1−a)).
#[test]
fn fma_loop_computes_the_recurrence() {
    let rounds = 1000;
    let (sum, lanes) = kameleon_core::simd::dispatch(FmaLoop::new(rounds));
    assert!(lanes >= 1);
    let (a, b): (f64, f64) = (0.999_999, 1e-6);
    let fixed = b / (1.0 - a);
    let expected: f64 = (0..FMA_CHAINS)
        .map(|i| fixed + a.powi(rounds as i32) * (1.0 + i as f64 - fixed))
        .sum::<f64>()
        * lanes as f64;
    assert!(
        (sum - expected).abs() < 1e-9 * expected,
        "{sum} vs {expected}"
    );
}

/// The floors take the higher of the FMA loop's and the GEMM's rates,
/// and say which.
#[test]
fn the_floor_rate_is_the_higher_of_the_loop_and_the_gemm() {
    let timing = TimerSettings {
        warmup: 0,
        repetitions: 1,
        min_secs: 0.0,
    }
    .time(|| {});
    let peak = |fma: f64, gemm: f64| Peak {
        lanes: 4,
        fma_timing: timing,
        fma_gflops: fma,
        clock_mhz: None,
        fma_per_cycle: None,
        gemm: GemmPeak {
            size: 8,
            timing,
            gflops_median: gemm,
            gflops_best: gemm,
        },
        read_rates: Vec::new(),
    };
    let wide = peak(60.0, 120.0);
    assert_eq!(wide.flop_gflops(), 120.0);
    assert!((wide.floor_secs(240e9) - 2.0).abs() < 1e-12);
    assert!(wide.describe().contains("the GEMM's rate"));
    let narrow = peak(60.0, 45.0);
    assert_eq!(narrow.flop_gflops(), 60.0);
    assert!(narrow.describe().contains("the FMA loop's rate"));
}
