//! The timer every figure of the report goes through: warm-up calls, then
//! repetitions of a batch of calls long enough for the clock to be exact,
//! summarised by the median and the 10%/90% quantiles of the time per call.

use kameleon_diagnostics::quantile_sorted;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// A timing: the median and 10%/90% quantiles of the seconds per call.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Median seconds per call.
    pub median_secs: f64,
    /// 10% quantile of the seconds per call over repetitions.
    pub p10_secs: f64,
    /// 90% quantile.
    pub p90_secs: f64,
    /// Timed repetitions.
    pub repetitions: usize,
    /// Calls per repetition.
    pub calls_per_repetition: usize,
}

impl Timing {
    /// The summary of per-call times, one per repetition.
    ///
    /// # Panics
    ///
    /// On an empty `samples` (the timer takes at least one).
    pub fn from_samples(mut samples: Vec<f64>, calls_per_repetition: usize) -> Self {
        samples.sort_by(f64::total_cmp);
        let quantile =
            |p| quantile_sorted(&samples, p).expect("at least one repetition, levels in [0, 1]");
        Self {
            median_secs: quantile(0.5),
            p10_secs: quantile(0.1),
            p90_secs: quantile(0.9),
            repetitions: samples.len(),
            calls_per_repetition,
        }
    }
}

/// How a path is timed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimerSettings {
    /// Untimed calls first (at least one: it calibrates the batch).
    pub warmup: usize,
    /// Timed repetitions.
    pub repetitions: usize,
    /// The shortest duration of one repetition.
    pub min_secs: f64,
}

impl TimerSettings {
    /// Times `call`: each repetition times a batch of calls lasting at least
    /// `min_secs`, the batch size calibrated from the warm-up.
    pub fn time(&self, mut call: impl FnMut()) -> Timing {
        let start = Instant::now();
        let warmup = self.warmup.max(1);
        for _ in 0..warmup {
            call();
        }
        let per_call = start.elapsed().as_secs_f64() / warmup as f64;
        let batch = if per_call > 0.0 {
            ((self.min_secs / per_call).ceil() as usize).max(1)
        } else {
            1000
        };
        let samples = (0..self.repetitions.max(1))
            .map(|_| {
                let start = Instant::now();
                for _ in 0..batch {
                    call();
                }
                start.elapsed().as_secs_f64() / batch as f64
            })
            .collect();
        Timing::from_samples(samples, batch)
    }
}
