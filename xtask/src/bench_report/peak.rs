//! This machine's arithmetic peak, measured in the same run as the paths it
//! judges: the issue rate of independent vector FMAs (the ceiling of any
//! floating-point loop on one core) and the rate of a faer GEMM (what the
//! best-tuned dense kernel reaches of it).
//!
//! CPUs differ by a factor of two here: first-generation Zen issues one
//! 256-bit FMA per cycle, Zen 3 and Intel since Haswell two. A floor computed
//! from a measured rate means the same on both.

use super::timing::{TimerSettings, Timing};
use faer::{Accum, Mat, Par};
use serde::{Deserialize, Serialize};
use std::hint::black_box;

/// Independent accumulators in the FMA loop: enough to cover the FMA latency
/// (4–5 cycles) times two pipes, few enough to stay in 16 vector registers.
pub const FMA_CHAINS: usize = 12;
/// FMA rounds per call of the loop (each round issues [`FMA_CHAINS`] FMAs).
const FMA_ROUNDS: usize = 100_000;

/// The measured peaks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peak {
    /// The vector width the FMA loop ran at (`kameleon_core::simd::dispatch`:
    /// the widest the CPU offers), in f64 lanes.
    pub lanes: usize,
    /// The timing of one call of the FMA loop.
    pub fma_timing: Timing,
    /// GFLOP/s of the FMA loop at its 10% quantile time (the best runs; an
    /// FMA counts 2 flops per lane). The floors use the larger of this and
    /// the GEMM's rate ([`Peak::flop_gflops`]).
    pub fma_gflops: f64,
    /// The clock `/proc/cpuinfo` reports, in MHz (nominal on a VM).
    pub clock_mhz: Option<f64>,
    /// Vector FMAs issued per cycle at that clock: ≈ 1 on first-generation
    /// Zen, ≈ 2 on Zen 3 or Intel since Haswell (turbo clocks read high).
    pub fma_per_cycle: Option<f64>,
    /// The single-thread faer GEMM.
    pub gemm: GemmPeak,
    /// The streaming read rate at each working-set size a path needs.
    pub read_rates: Vec<ReadRate>,
}

/// The rate at which one core streams through a buffer of one size (read
/// only, so it bounds traffic that also writes from above: a floor).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReadRate {
    /// The buffer's bytes.
    pub bytes: usize,
    /// The timing of one pass.
    pub timing: Timing,
    /// GB/s (10⁹ bytes) at the 10% quantile time.
    pub gbs: f64,
}

/// The measured single-thread GEMM rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GemmPeak {
    /// Square size of the product.
    pub size: usize,
    /// The product's timing.
    pub timing: Timing,
    /// GFLOP/s at the median time.
    pub gflops_median: f64,
    /// GFLOP/s at the 10% quantile time (the best runs).
    pub gflops_best: f64,
}

impl Peak {
    /// Measures the FMA and GEMM rates, and the read rate at each of
    /// `working_sets` (bytes).
    pub fn measure(timer: &TimerSettings, gemm_size: usize, working_sets: &[usize]) -> Self {
        // a peak is the best the machine does: many short repetitions, so
        // that the 10% quantile is a quiet moment of a shared machine
        let fma_timer = TimerSettings {
            warmup: 10,
            repetitions: 101,
            min_secs: 0.002,
        };
        let mut lanes = 0;
        let fma_timing = fma_timer.time(|| {
            let (value, width) = kameleon_core::simd::dispatch(FmaLoop::new(FMA_ROUNDS));
            lanes = width;
            black_box(value);
        });
        let flops = (2 * FMA_CHAINS * FMA_ROUNDS * lanes) as f64;
        let fma_gflops = flops / fma_timing.p10_secs / 1e9;
        let clock_mhz = cpuinfo_mhz();
        let fma_per_cycle =
            clock_mhz.map(|mhz| fma_gflops * 1e9 / (2.0 * lanes as f64) / (mhz * 1e6));
        Self {
            lanes,
            fma_timing,
            fma_gflops,
            clock_mhz,
            fma_per_cycle,
            gemm: gemm_peak(timer, gemm_size),
            read_rates: working_sets
                .iter()
                .map(|&bytes| read_rate(timer, bytes))
                .collect(),
        }
    }

    /// Seconds that moving `bytes` out of a working set of `working_set`
    /// bytes takes at the measured read rate (None if not measured).
    pub fn memory_floor_secs(&self, bytes: f64, working_set: usize) -> Option<f64> {
        self.read_rates
            .iter()
            .find(|r| r.bytes == working_set)
            .map(|r| bytes / (r.gbs * 1e9))
    }

    /// The flop rate the floors use: the FMA loop's, or the GEMM's where
    /// that is higher. Both run at the CPU's widest vectors (the loop through
    /// `kameleon_core::simd::dispatch`, 512 bits on AVX-512 CPUs); a rate the
    /// machine demonstrably reaches bounds every path from below, whichever
    /// code reached it.
    pub fn flop_gflops(&self) -> f64 {
        self.fma_gflops.max(self.gemm.gflops_best)
    }

    /// Seconds that `flops` take at [`Peak::flop_gflops`].
    pub fn floor_secs(&self, flops: f64) -> f64 {
        flops / (self.flop_gflops() * 1e9)
    }

    /// One sentence naming the peak that applies.
    pub fn describe(&self) -> String {
        let per_cycle = match (self.fma_per_cycle, self.clock_mhz) {
            (Some(r), Some(mhz)) => format!(
                ", {r:.2} vector FMAs per cycle at the reported {mhz:.0} MHz ({})",
                if r > 1.4 {
                    "two FMA pipes"
                } else {
                    "one FMA pipe, or 256-bit FMAs split in halves"
                }
            ),
            _ => String::new(),
        };
        let applies = if self.gemm.gflops_best > self.fma_gflops {
            "the GEMM's rate, the higher, sets the floors: the CPU has wider vectors than the \
             FMA loop uses"
        } else {
            "the FMA loop's rate sets the floors"
        };
        format!(
            "independent {}-bit FMAs: {:.1} GFLOP/s{per_cycle}; a single-thread faer GEMM \
             {n}×{n} reaches {:.1} GFLOP/s ({:.0}% of it); {applies}",
            self.lanes * 64,
            self.fma_gflops,
            self.gemm.gflops_best,
            100.0 * self.gemm.gflops_best / self.fma_gflops,
            n = self.gemm.size,
        )
    }
}

/// [`FMA_CHAINS`] independent chains of `x ← x·a + b`, `rounds` times,
/// chain i starting at `1 + i`; the output is their sum (so nothing is
/// optimised away) and the lane count. The chains start apart and `a`, `b`
/// and `rounds` come through `black_box`, so the compiler can neither merge
/// the chains nor evaluate the loop ahead.
pub struct FmaLoop {
    rounds: usize,
    a: f64,
    b: f64,
}

impl FmaLoop {
    /// The loop of `rounds` rounds, with the fixed `a` and `b`.
    pub fn new(rounds: usize) -> Self {
        Self {
            rounds: black_box(rounds),
            a: black_box(0.999_999),
            b: black_box(1e-6),
        }
    }
}

impl pulp::WithSimd for FmaLoop {
    type Output = (f64, usize);

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) -> (f64, usize) {
        // a·x + b with 0 < a < 1 converges to b/(1 − a): no overflow, no
        // denormals, whatever the number of rounds
        let a = simd.splat_f64s(self.a);
        let b = simd.splat_f64s(self.b);
        let mut chains: [S::f64s; FMA_CHAINS] =
            std::array::from_fn(|i| simd.splat_f64s(1.0 + i as f64));
        for _ in 0..self.rounds {
            for x in &mut chains {
                *x = simd.mul_add_f64s(*x, a, b);
            }
        }
        let mut sum = simd.splat_f64s(0.0);
        for x in chains {
            sum = simd.add_f64s(sum, x);
        }
        (
            simd.reduce_sum_f64s(sum),
            std::mem::size_of::<S::f64s>() / 8,
        )
    }
}

/// Streams through a buffer of `bytes`, summing it in SIMD registers with
/// independent accumulators (so the adds are not the limit).
fn read_rate(timer: &TimerSettings, bytes: usize) -> ReadRate {
    let values: Vec<f64> = (0..bytes / 8).map(|i| (i % 7) as f64).collect();
    let timing = timer.time(|| {
        black_box(kameleon_core::simd::dispatch(StreamSum { values: &values }));
    });
    ReadRate {
        bytes,
        timing,
        gbs: bytes as f64 / timing.p10_secs / 1e9,
    }
}

/// The sum of `values` (in an order of its own).
pub struct StreamSum<'a> {
    /// The values to sum.
    pub values: &'a [f64],
}

impl pulp::WithSimd for StreamSum<'_> {
    type Output = f64;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) -> f64 {
        let (vectors, tail) = S::as_simd_f64s(self.values);
        let mut sums = [simd.splat_f64s(0.0); 4];
        let mut blocks = vectors.chunks_exact(4);
        for block in &mut blocks {
            for (s, v) in sums.iter_mut().zip(block) {
                *s = simd.add_f64s(*s, *v);
            }
        }
        for v in blocks.remainder() {
            sums[0] = simd.add_f64s(sums[0], *v);
        }
        let total = sums
            .into_iter()
            .fold(simd.splat_f64s(0.0), |a, b| simd.add_f64s(a, b));
        simd.reduce_sum_f64s(total) + tail.iter().sum::<f64>()
    }
}

fn cpuinfo_mhz() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines().find_map(|l| {
        let (key, value) = l.split_once(':')?;
        (key.trim() == "cpu MHz")
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

fn gemm_peak(timer: &TimerSettings, size: usize) -> GemmPeak {
    let a = Mat::<f64>::from_fn(size, size, |i, j| ((i * 7 + j * 3) % 13) as f64 / 13.0);
    let b = Mat::<f64>::from_fn(size, size, |i, j| ((i * 5 + j * 11) % 17) as f64 / 17.0);
    let mut c = Mat::<f64>::zeros(size, size);
    let timing = timer.time(|| {
        faer::linalg::matmul::matmul(
            c.as_mut(),
            Accum::Replace,
            a.as_ref(),
            b.as_ref(),
            1.0,
            Par::Seq,
        );
        black_box(&c);
    });
    let flops = 2.0 * (size as f64).powi(3);
    GemmPeak {
        size,
        timing,
        gflops_median: flops / timing.median_secs / 1e9,
        gflops_best: flops / timing.p10_secs / 1e9,
    }
}
