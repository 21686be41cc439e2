//! F-KAMH thesis (Kotlicki 2015), §5.1, Figs. 5.2–5.5: ESS of the first two
//! dimensions, and ESS per second, of F-KAMH against the number of random
//! Fourier features D, beside KAMH with subsample sizes n = 600 and 1000.

use super::kamh::legend;
use crate::experiment::{Cell, Experiment, Protocol, Start};
use crate::plot::{Bar, BarSeries, grouped_bars};
use crate::spec::{Metric, SamplerSpec, TargetSpec};
use crate::summary::Summary;
use crate::verdict::{ClaimCheck, Claimed, Decision, TIMED, at_least, compare};
use anyhow::Result;
use kameleon_features::Embedding;
use kameleon_samplers::AdaptationStop;
use std::path::Path;

const FULL_D: [usize; 8] = [10, 50, 100, 200, 300, 400, 500, 600];
const QUICK_D: [usize; 2] = [10, 40];
const BANANAS: [f64; 2] = [0.03, 0.1];
/// The thesis' γ for both samplers.
const GAMMA: f64 = 0.5;

fn d_grid(quick: bool) -> &'static [usize] {
    if quick { &QUICK_D } else { &FULL_D }
}

fn banana(b: f64) -> TargetSpec {
    TargetSpec::Banana {
        dim: 8,
        b,
        v: 100.0,
    }
}

/// 20 000 iterations, the first 5 000 discarded (quick: 600 and 200).
fn cells(quick: bool) -> Vec<Cell> {
    let (iterations, burn_in) = if quick { (400, 200) } else { (15_000, 5_000) };
    let mut out = Vec::new();
    for b in BANANAS {
        let cell = |sampler, setting: String| Cell {
            target: banana(b),
            sampler,
            setting,
            iterations,
            burn_in,
            start: Start::Target,
        };
        for n in [600, 1000] {
            out.push(cell(kamh(n), format!("n={n}")));
        }
        for &features in d_grid(quick) {
            for embedding in [Embedding::SinCos, Embedding::CosPhase] {
                out.push(cell(
                    SamplerSpec::FKamh {
                        features,
                        embedding,
                        gamma: GAMMA,
                        eta: 1.0,
                    },
                    format!("D={features}"),
                ));
            }
        }
        for sampler in whole_chain(quick) {
            let SamplerSpec::Adapting(SamplerSpec::FKamh { features, .. }, _) = sampler else {
                continue;
            };
            out.push(cell(*sampler, whole_chain_setting(*features)));
        }
        if b == THESIS_KAMH_BANANA {
            let stop = thesis_kamh_stop(quick);
            for inner in &THESIS_KAMH {
                let SamplerSpec::KamhLs { n, .. } = inner else {
                    continue;
                };
                out.push(cell(
                    SamplerSpec::Adapting(inner, AdaptationStop::After(stop)),
                    thesis_kamh_setting(*n, stop),
                ));
            }
        }
    }
    out
}

/// KAMH-LS with subsample size `n` and the thesis' γ.
const fn kamh(n: usize) -> SamplerSpec {
    SamplerSpec::KamhLs {
        n,
        gamma: GAMMA,
        length_scale: None,
    }
}

/// KAMH-LS n = 600 and 1000 as the thesis runs them: adapting until
/// [`thesis_kamh_stop`], on [`THESIS_KAMH_BANANA`] only (the claims that
/// compare KAMH's subsample sizes, and F-KAMH with KAMH at small D, are
/// on it).
static THESIS_KAMH: [SamplerSpec; 2] = [kamh(600), kamh(1000)];

/// The banana of the KAMH cells adapting until [`thesis_kamh_stop`].
const THESIS_KAMH_BANANA: f64 = 0.1;

/// The step until which the thesis' KAMH adapts: 15 000 of its 20 000
/// (quick: 450 of 600, the same three quarters).
fn thesis_kamh_stop(quick: bool) -> u64 {
    if quick { 450 } else { 15_000 }
}

/// The setting of a KAMH cell adapting until step `stop`.
fn thesis_kamh_setting(n: usize, stop: u64) -> String {
    format!("n={n}, adapt until {stop}")
}

/// F-KAMH-sincos at the small D of the thesis' claim, adapting over the
/// whole chain as the thesis' F-KAMH does (full size: D = 50 and 100).
fn whole_chain(quick: bool) -> &'static [SamplerSpec] {
    const fn sincos(features: usize) -> SamplerSpec {
        SamplerSpec::FKamh {
            features,
            embedding: Embedding::SinCos,
            gamma: GAMMA,
            eta: 1.0,
        }
    }
    static FULL: [SamplerSpec; 2] = [sincos(50), sincos(100)];
    static FULL_ADAPTING: [SamplerSpec; 2] = [
        SamplerSpec::Adapting(&FULL[0], AdaptationStop::Never),
        SamplerSpec::Adapting(&FULL[1], AdaptationStop::Never),
    ];
    static QUICK: [SamplerSpec; 1] = [sincos(10)];
    static QUICK_ADAPTING: [SamplerSpec; 1] =
        [SamplerSpec::Adapting(&QUICK[0], AdaptationStop::Never)];
    if quick {
        &QUICK_ADAPTING
    } else {
        &FULL_ADAPTING
    }
}

/// The setting of an F-KAMH cell adapting over the whole chain.
fn whole_chain_setting(features: usize) -> String {
    format!("D={features}, adapt=always")
}

/// `fkamh-ess`.
pub fn ess() -> Experiment {
    Experiment {
        name: "fkamh-ess",
        source: "Kotlicki 2015 (F-KAMH thesis), Figs. 5.2–5.5",
        description: "ESS (mean of dims 1–2) and ESS/s vs D for F-KAMH (eq. 2.4 sin/cos, eq. 2.5 cos+phase) against KAMH n ∈ {600, 1000} on 8-d B(0.03,100), B(0.1,100)",
        paper_size: "50 runs; 20000 it (5000 discarded); D ∈ {10 … 600}",
        protocol: Some(Protocol {
            chains: 50,
            quick_chains: 2,
            cells,
            paper: None,
            metrics: &[Metric::Acceptance, Metric::MeanNorm, Metric::EssFirstTwo],
            notes: "As in the thesis: chains start at an exact draw, γ = 0.5, Gaussian kernel with \
                    the median distance of 1000 exact draws as length-scale, η (ν for KAMH) learned \
                    toward 0.234, ESS by Geyer's initial sequences averaged over dimensions 1–2. \
                    Ours: η starts at 1 and adapts with steps 1/√t during the 5000 discarded steps \
                    only (the thesis: steps 1/(t − 1000) after t = 1000, initial values from pilot \
                    runs, KAMH adapting until 15000). The cells with setting `adapt=always` \
                    run F-KAMH-sincos adapting over the whole chain (η still with steps 1/√t); those \
                    with `adapt until 15000` run KAMH-LS on B(0.1, 100) adapting until step 15000 of \
                    20000, as the thesis' KAMH (ν still with steps 1/√t). Fastfood is not in the \
                    grid. Figure \
                    whiskers: 95% intervals (mean ± 1.96·sd/√runs), as the thesis.",
            claims,
            figures,
        }),
        study: None,
        missing: "",
    }
}

fn figures(summary: &Summary, dir: &Path) -> Result<Vec<String>> {
    let groups: Vec<String> = d_grid(summary.params.quick)
        .iter()
        .map(|d| format!("D={d}"))
        .collect();
    let mut files = Vec::new();
    for (key, label) in summary.targets() {
        for (metric, title) in [("ess_12", "ESS"), ("ess_12_per_s", "ESS per second")] {
            let mut series: Vec<BarSeries> = Vec::new();
            for c in summary.cells.iter().filter(|c| c.target == key) {
                let bar = c.metrics.get(metric).map(|s| {
                    let half = s.ci80_half_width * 1.96 / 1.2816;
                    Bar {
                        value: s.mean,
                        low: s.mean - half,
                        high: s.mean + half,
                    }
                });
                let kamh = c.setting.starts_with("n=");
                let label = if kamh {
                    format!("{} {}", legend(c), c.setting)
                } else {
                    legend(c)
                };
                let i = match series.iter().position(|s| s.label == label) {
                    Some(i) => i,
                    None => {
                        series.push(BarSeries {
                            label,
                            bars: vec![None; groups.len()],
                        });
                        series.len() - 1
                    }
                };
                for (g, name) in groups.iter().enumerate() {
                    if kamh || &c.setting == name {
                        series[i].bars[g] = bar;
                    }
                }
            }
            let file = format!("ess-{metric}-{key}.svg");
            grouped_bars(
                &dir.join(&file),
                &format!("{label}: {title} of dimensions 1–2 vs D (95% intervals)"),
                &groups,
                &series,
                "",
            )?;
            files.push(file);
        }
    }
    Ok(files)
}

fn claims(summary: &Summary) -> Vec<ClaimCheck> {
    let grid = d_grid(summary.params.quick);
    let largest = format!("D={}", grid[grid.len() - 1]);
    let smallest = format!("D={}", grid[0]);
    let ess = |b: f64, sampler: &str, setting: &str| {
        summary.estimate(&banana(b).key(), sampler, setting, "ess_12")
    };
    let mut out: Vec<ClaimCheck> = ["F-KAMH-sincos", "F-KAMH-cos"]
        .into_iter()
        .map(|s| {
            ClaimCheck::new(
                format!(
                    "samplers do worse (ESS) on B(0.1, 100) than on B(0.03, 100): {s} at {largest}"
                ),
                compare(
                    ess(0.1, s, &largest),
                    Claimed::Below,
                    ess(0.03, s, &largest),
                ),
            )
        })
        .collect();
    out.push(
        ClaimCheck::new(
            format!("on B(0.1, 100) F-KAMH beats KAMH n = 600 in ESS even at small D ({smallest})"),
            compare(
                ess(0.1, "F-KAMH-sincos", &smallest),
                Claimed::Above,
                ess(0.1, "KAMH-LS", "n=600"),
            ),
        )
        .caveat(
            "both samplers adapt during burn-in only; the thesis lets F-KAMH adapt over the \
             whole chain",
        ),
    );
    let stop = thesis_kamh_stop(summary.params.quick);
    let thesis_kamh_600 = thesis_kamh_setting(600, stop);
    for sampler in whole_chain(summary.params.quick) {
        let SamplerSpec::Adapting(SamplerSpec::FKamh { features, .. }, _) = sampler else {
            continue;
        };
        let whole = whole_chain_setting(*features);
        out.push(
            ClaimCheck::new(
                format!(
                    "on B(0.1, 100) F-KAMH beats KAMH n = 600 in ESS even at small D (D={features}) \
                     (variant: F-KAMH adapting over the whole chain, as the thesis' F-KAMH, \
                     which uses \"the entire available chain history\")"
                ),
                compare(
                    ess(0.1, "F-KAMH-sincos", &whole),
                    Claimed::Above,
                    ess(0.1, "KAMH-LS", "n=600"),
                ),
            )
            .caveat(
                "our F-KAMH keeps η's steps 1/√t (the thesis: 1/(t − 1000)), and our KAMH stops \
                 adapting at 5000 (the thesis' at 15 000: the next variant)",
            ),
        );
        out.push(
            ClaimCheck::new(
                format!(
                    "on B(0.1, 100) F-KAMH beats KAMH n = 600 in ESS even at small D (D={features}) \
                     (variant: the thesis' protocol for both, F-KAMH adapting over the whole chain \
                     and KAMH until step {stop})"
                ),
                compare(
                    ess(0.1, "F-KAMH-sincos", &whole),
                    Claimed::Above,
                    ess(0.1, "KAMH-LS", &thesis_kamh_600),
                ),
            )
            .caveat(
                "η and ν keep steps 1/√t from 1 and √0.1 (the thesis: 1/(t − 1000) from pilot \
                 runs' values)",
            ),
        );
    }
    out.push(ClaimCheck::new(
        format!("on B(0.03, 100) F-KAMH has a lower ESS than KAMH n = 1000 ({largest})"),
        compare(
            ess(0.03, "F-KAMH-sincos", &largest),
            Claimed::Below,
            ess(0.03, "KAMH-LS", "n=1000"),
        ),
    ));
    // Thesis §5.1, its main result, on ESS per second.
    let per_s = |b: f64, sampler: &str, setting: &str| {
        summary.estimate(&banana(b).key(), sampler, setting, "ess_12_per_s")
    };
    for b in [0.03, 0.1] {
        let parts: Vec<Decision> = grid
            .iter()
            .map(|d| {
                compare(
                    per_s(b, "F-KAMH-sincos", &format!("D={d}")),
                    Claimed::Above,
                    per_s(b, "KAMH-LS", "n=600"),
                )
            })
            .collect();
        let half = parts.len().div_ceil(2);
        out.push(
            ClaimCheck::new(
                format!(
                    "F-KAMH clearly outperforms KAMH for a large range of D in ESS per second, \
                     on B({b}, 100): F-KAMH-sincos above KAMH-LS n = 600 at {half} or more of the \
                     {} values of D",
                    parts.len()
                ),
                at_least(half, parts),
            )
            .caveat(TIMED)
            .caveat("\"a large range\" as half of our D grid is ours"),
        );
    }
    out.push(
        ClaimCheck::new(
            "KAMH with n = 1000 achieves a better ESS per second than with n = 600 on B(0.1, 100)",
            compare(
                per_s(0.1, "KAMH-LS", "n=1000"),
                Claimed::Above,
                per_s(0.1, "KAMH-LS", "n=600"),
            ),
        )
        .caveat(TIMED),
    );
    out.push(ClaimCheck::new(
        "KAMH gains from n = 1000 over n = 600 on B(0.1, 100) (tested as: a larger ESS at \
         n = 1000; the thesis' \"more than on B(0.03, 100)\" compares two ratios of means, \
         which have no interval here)",
        compare(
            ess(0.1, "KAMH-LS", "n=1000"),
            Claimed::Above,
            ess(0.1, "KAMH-LS", "n=600"),
        ),
    ));
    out.push(
        ClaimCheck::new(
            format!(
                "KAMH gains from n = 1000 over n = 600 on B(0.1, 100) (tested as: a larger ESS at \
                 n = 1000) (variant: KAMH adapting until step {stop}, as the thesis' KAMH)"
            ),
            compare(
                ess(0.1, "KAMH-LS", &thesis_kamh_setting(1000, stop)),
                Claimed::Above,
                ess(0.1, "KAMH-LS", &thesis_kamh_600),
            ),
        )
        .caveat("ν keeps steps 1/√t from √0.1 (the thesis: 1/(t − 1000) from pilot runs' values)"),
    );
    out
}
