//! The one rule that decides every claim of the papers.
//!
//! Every number a claim rests on is an [`Interval`]: the mean over chains
//! (or replicates, or points) with the KAMH paper's 80% interval,
//! mean ± 1.2816·sd/√n. A claim orders two intervals, or an interval and a
//! threshold (an interval of width zero), and [`order`] decides it:
//!
//! - **reproduced** when the claimed order holds with disjoint intervals
//!   (a threshold: with the whole interval on the claimed side);
//! - **refuted** when the opposite order holds with disjoint intervals;
//! - **inconclusive** otherwise.
//!
//! A side without finite values (KL = ∞ or NaN, no draws at the compared
//! time, no runs) has no interval: the comparison is inconclusive ("no
//! data"), never a win or a loss. A side whose cell has not run is
//! **pending**. Claims made of several comparisons state their bundle rule
//! ([`at_least`], [`all_of`]); each comparison in them is decided by the
//! same rule.

use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The normal quantile of the paper's 80% intervals.
pub const Z80: f64 = 1.2816;

/// The verdict on one claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The claimed order holds with disjoint 80% intervals.
    Reproduced,
    /// The opposite order holds with disjoint 80% intervals.
    Refuted,
    /// The intervals overlap, or a side has no data.
    Inconclusive,
    /// A cell the claim needs has not run (or its sampler does not exist).
    Pending,
}

impl Verdict {
    /// Every verdict, in the order reports list them.
    pub const ALL: [Verdict; 4] = [
        Verdict::Reproduced,
        Verdict::Refuted,
        Verdict::Inconclusive,
        Verdict::Pending,
    ];

    /// The verdict in words.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::Refuted => "refuted",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Pending => "pending",
        }
    }
}

/// A mean with its 80% interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// What it measures (sampler, metric, setting).
    pub label: String,
    /// The mean.
    pub mean: f64,
    /// 1.2816·sd/√n (0 for a threshold or a single run).
    pub half_width: f64,
    /// mean − half_width.
    pub low: f64,
    /// mean + half_width.
    pub high: f64,
    /// The number of values (chains, replicates, points; 0 for a threshold).
    pub runs: usize,
}

impl Interval {
    fn new(label: String, mean: f64, half_width: f64, runs: usize) -> Self {
        Self {
            label,
            mean,
            half_width,
            low: mean - half_width,
            high: mean + half_width,
            runs,
        }
    }

    /// A threshold: the interval of width zero at `value`.
    pub fn threshold(value: f64) -> Self {
        Self::new(fmt(value), value, 0.0, 0)
    }

    /// This interval times `factor` (a positive constant), relabelled.
    pub fn times(&self, factor: f64) -> Self {
        Self::new(
            format!("{} × {}", fmt(factor), self.label),
            factor * self.mean,
            factor.abs() * self.half_width,
            self.runs,
        )
    }

    /// This interval plus `offset`, relabelled.
    pub fn plus(&self, offset: f64) -> Self {
        Self::new(
            format!("{} + {}", self.label, fmt(offset)),
            self.mean + offset,
            self.half_width,
            self.runs,
        )
    }

    /// `label mean ± half-width (n)`, or just the value of a threshold.
    fn describe(&self) -> String {
        if self.runs == 0 {
            self.label.clone()
        } else {
            format!(
                "{} {} ± {} (n = {})",
                self.label,
                fmt(self.mean),
                fmt(self.half_width),
                self.runs
            )
        }
    }
}

/// Why a side of a comparison has no interval.
#[derive(Debug, Clone, PartialEq)]
pub enum Missing {
    /// The cell has not run (or its sampler is pending).
    Pending(String),
    /// The values exist but are not all finite, or there are none.
    NoData(String),
}

/// One side of a comparison.
pub type Estimate = Result<Interval, Missing>;

/// The interval of `values` (one per chain, replicate or point); no data
/// when there are none or any is ∞ or NaN.
pub fn estimate(label: impl Into<String>, values: &[f64]) -> Estimate {
    let label = label.into();
    if values.is_empty() {
        return Err(Missing::NoData(format!("{label}: no values")));
    }
    let bad = values.iter().filter(|v| !v.is_finite()).count();
    if bad > 0 {
        return Err(Missing::NoData(format!(
            "{label}: {bad} of {} values are ∞ or NaN (no draws)",
            values.len()
        )));
    }
    let (mean, half_width) = mean_and_half_width(values);
    Ok(Interval::new(label, mean, half_width, values.len()))
}

/// The mean of `values` (at least one) and the papers' 80% half width
/// 1.2816·sd/√n (sd with n − 1; 0 for a single value).
pub fn mean_and_half_width(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = if values.len() > 1 {
        values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (mean, Z80 * var.sqrt() / n.sqrt())
}

/// A side that is missing because its cell is pending or absent.
pub fn pending(what: impl Into<String>) -> Estimate {
    Err(Missing::Pending(what.into()))
}

/// The order a claim states between its two sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claimed {
    /// The first side is smaller.
    Below,
    /// The first side is larger.
    Above,
}

/// The verdict of the claim "`smaller` < `larger`": reproduced when
/// `smaller`'s interval lies wholly below `larger`'s, refuted when wholly
/// above, inconclusive when they overlap (or touch). Every claim is
/// decided here.
pub fn order(smaller: &Interval, larger: &Interval) -> Verdict {
    if smaller.high < larger.low {
        Verdict::Reproduced
    } else if larger.high < smaller.low {
        Verdict::Refuted
    } else {
        Verdict::Inconclusive
    }
}

/// A decided comparison (or bundle of comparisons).
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The verdict.
    pub verdict: Verdict,
    /// The rule, in words.
    pub rule: String,
    /// The intervals it rests on.
    pub numbers: Vec<Interval>,
    /// The comparisons and their verdicts, and why a side had no data.
    pub detail: Vec<String>,
}

fn sign(claimed: Claimed) -> &'static str {
    match claimed {
        Claimed::Below => "<",
        Claimed::Above => ">",
    }
}

/// The claim "`a` `claimed` `b`" for two estimates (a threshold is
/// [`Interval::threshold`]).
pub fn compare(a: Estimate, claimed: Claimed, b: Estimate) -> Decision {
    let (a, b) = match (a, b) {
        (Ok(a), Ok(b)) => (a, b),
        (a, b) => {
            let missing: Vec<Missing> = [a.err(), b.err()].into_iter().flatten().collect();
            let is_pending = missing.iter().any(|m| matches!(m, Missing::Pending(_)));
            return Decision {
                verdict: if is_pending {
                    Verdict::Pending
                } else {
                    Verdict::Inconclusive
                },
                rule: format!(
                    "80% intervals, once both sides have data: reproduced if the claimed order \
                     ({}) holds with disjoint intervals, refuted if the opposite does, else \
                     inconclusive; a side without data is neither a win nor a loss",
                    sign(claimed)
                ),
                numbers: Vec::new(),
                detail: missing
                    .into_iter()
                    .map(|m| match m {
                        Missing::Pending(s) => format!("pending: {s}"),
                        Missing::NoData(s) => format!("no data: {s}"),
                    })
                    .collect(),
            };
        }
    };
    let verdict = match claimed {
        Claimed::Below => order(&a, &b),
        Claimed::Above => order(&b, &a),
    };
    let threshold = b.runs == 0;
    let rule = if threshold {
        format!(
            "reproduced if the whole 80% interval of {} is {} {}, refuted if the whole interval \
             is on the other side, else inconclusive",
            a.label,
            sign(claimed),
            b.label
        )
    } else {
        format!(
            "80% intervals: reproduced if {} {} {} with disjoint intervals, refuted if the \
             opposite holds with disjoint intervals, else inconclusive",
            a.label,
            sign(claimed),
            b.label
        )
    };
    Decision {
        verdict,
        detail: vec![format!(
            "{} {} {}: {}",
            a.label,
            sign(claimed),
            b.label,
            verdict.word()
        )],
        rule,
        numbers: if threshold { vec![a] } else { vec![a, b] },
    }
}

/// The claim "`a` lies within [`low`, `high`]": both thresholds, bundled
/// with [`all_of`] (refuted when the whole interval is outside).
pub fn within(a: Estimate, low: f64, high: f64) -> Decision {
    let label = a
        .as_ref()
        .map_or_else(|_| "the estimate".to_string(), |i| i.label.clone());
    let above = compare(a.clone(), Claimed::Above, Ok(Interval::threshold(low)));
    let mut d = if a.is_ok() {
        all_of(vec![
            above,
            compare(a, Claimed::Below, Ok(Interval::threshold(high))),
        ])
    } else {
        // one "no data" is enough
        above
    };
    d.rule = format!(
        "reproduced if the whole 80% interval of {label} lies in [{}, {}], refuted if it lies \
         wholly outside, else inconclusive",
        fmt(low),
        fmt(high)
    );
    d
}

/// A bundle that holds when at least `k` of its comparisons are
/// reproduced (a bundle of one is that comparison): reproduced when ≥ k are, refuted when more than
/// (parts − k) are refuted (k can no longer be reached), pending when a
/// pending part could still decide it, else inconclusive.
pub fn at_least(k: usize, mut parts: Vec<Decision>) -> Decision {
    if k == 1 && parts.len() == 1 {
        // a bundle of one comparison is that comparison
        return parts.remove(0);
    }
    let count = |v: Verdict| parts.iter().filter(|p| p.verdict == v).count();
    let (reproduced, refuted, waiting) = (
        count(Verdict::Reproduced),
        count(Verdict::Refuted),
        count(Verdict::Pending),
    );
    let n = parts.len();
    let verdict = if n == 0 {
        Verdict::Inconclusive
    } else if reproduced >= k {
        Verdict::Reproduced
    } else if refuted > n - k.min(n) {
        Verdict::Refuted
    } else if waiting > 0 {
        Verdict::Pending
    } else {
        Verdict::Inconclusive
    };
    let rule = if k == n {
        format!(
            "all {n} comparisons below, each on 80% intervals: reproduced if every one is \
             reproduced, refuted if any is refuted, else inconclusive"
        )
    } else {
        format!(
            "at least {k} of the {n} comparisons below, each on 80% intervals: reproduced if \
             {k} or more are reproduced, refuted if more than {} are refuted, else inconclusive",
            n - k
        )
    };
    let mut numbers: Vec<Interval> = Vec::new();
    let mut detail = Vec::new();
    for p in parts {
        for i in p.numbers {
            if !numbers.contains(&i) {
                numbers.push(i);
            }
        }
        detail.extend(p.detail);
    }
    Decision {
        verdict,
        rule,
        numbers,
        detail,
    }
}

/// A bundle that holds when every one of its comparisons does.
pub fn all_of(parts: Vec<Decision>) -> Decision {
    at_least(parts.len(), parts)
}

/// One claim of a paper with its verdict, the rule that decided it and the
/// numbers it rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimCheck {
    /// The claim in the paper's words (with the target it is checked on).
    pub claim: String,
    /// The verdict.
    pub verdict: Verdict,
    /// The decision rule, in words.
    pub rule: String,
    /// The intervals the verdict rests on.
    pub numbers: Vec<Interval>,
    /// The numbers and comparisons in words.
    pub evidence: String,
    /// What the verdict depends on beyond the data (the machine's load, an
    /// implementation's cost ratio, a threshold of ours).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caveats: Vec<String>,
    /// A fact of the protocol checked by construction (a setting, a
    /// count), listed apart from the paper's claims and not counted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub protocol_check: bool,
}

/// The caveat of a claim that compares wall times or per-second rates.
pub const TIMED: &str = "per-second figure: depends on the machine and its load";

/// The caveat of a claim that compares samplers at equal wall time.
pub const COST_RATIO: &str =
    "depends on our implementation's cost per step of each sampler (Rust), not the paper's";

impl ClaimCheck {
    /// The claim `claim` decided by `decision`; the evidence lists the
    /// intervals and each comparison's verdict.
    pub fn new(claim: impl Into<String>, decision: Decision) -> Self {
        let mut evidence = decision
            .numbers
            .iter()
            .map(Interval::describe)
            .collect::<Vec<_>>()
            .join("; ");
        if decision.detail.len() > 1 || decision.numbers.is_empty() {
            if !evidence.is_empty() {
                evidence.push_str(". ");
            }
            evidence.push_str(&decision.detail.join("; "));
        }
        Self {
            claim: claim.into(),
            verdict: decision.verdict,
            rule: decision.rule,
            numbers: decision.numbers,
            evidence,
            caveats: Vec::new(),
            protocol_check: false,
        }
    }

    /// Appends `text` to the evidence.
    pub fn note(mut self, text: impl AsRef<str>) -> Self {
        let text = text.as_ref();
        if !text.is_empty() {
            let _ = write!(self.evidence, ". {text}");
        }
        self
    }

    /// Adds a caveat.
    pub fn caveat(mut self, text: impl Into<String>) -> Self {
        self.caveats.push(text.into());
        self
    }

    /// Marks the check as a fact of the protocol, not a claim of the paper.
    pub fn protocol(mut self) -> Self {
        self.protocol_check = true;
        self
    }

    /// Whether every interval of a decided claim is finite and rests on at
    /// least one value (thresholds aside): no claim may be decided by a side
    /// without data.
    pub fn rests_on_data(&self) -> bool {
        !matches!(self.verdict, Verdict::Reproduced | Verdict::Refuted)
            || (!self.numbers.is_empty()
                && self
                    .numbers
                    .iter()
                    .all(|i| i.mean.is_finite() && i.half_width.is_finite() && i.half_width >= 0.0))
    }
}

/// Compact number formatting for tables and evidence.
pub fn fmt(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 || (1e-3..1e4).contains(&a) {
        format!("{v:.4}")
    } else {
        format!("{v:.3e}")
    }
}
