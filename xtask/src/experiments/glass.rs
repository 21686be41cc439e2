//! The pseudo-marginal GP-classification posterior on UCI Glass against a
//! benchmark sample of long SM chains: KAMH paper Fig. 4 (`kamh-glass`) and
//! KMC paper Fig. 4 left (`kmc-glass`). The benchmark is computed once per
//! output root and size and shared (see [`crate::benchmark`]).

use super::kamh::banded_trace;
use crate::benchmark::GLASS_IMPORTANCE_DRAWS;
use crate::experiment::{Cell, Experiment, PaperGrid, Protocol, Start};
use crate::plot::{Axes, curves};
use crate::spec::{EMCEE, LiteBasis, Metric, SamplerSpec, TargetSpec, ensemble_note};
use crate::summary::Summary;
use crate::verdict::{ClaimCheck, Claimed, all_of, compare, estimate, pending};
use anyhow::Result;
use kameleon_diagnostics::MmdEstimator;
use kameleon_samplers::AdaptationStop;
use std::path::Path;

const TARGET: TargetSpec = TargetSpec::GlassPosterior {
    n_importance: GLASS_IMPORTANCE_DRAWS,
};

/// One `kamh-glass` chain: post-burn-in iterations, burn-in, and KAMH's
/// history subsample size.
#[derive(Clone, Copy)]
struct KamhSize {
    iterations: u64,
    burn_in: u64,
    n: usize,
}

const KAMH_QUICK: KamhSize = KamhSize {
    iterations: 150,
    burn_in: 50,
    n: 50,
};
/// 10 chains of these (a tenth of the papers' iterations, a third of its
/// chains: the papers' size is a cluster job).
const KAMH_FULL: KamhSize = KamhSize {
    iterations: 8_000,
    burn_in: 2_000,
    n: 1000,
};
/// The KAMH paper's: 30 chains of these.
const KAMH_PAPER: KamhSize = KamhSize {
    iterations: 80_000,
    burn_in: 20_000,
    n: 1000,
};

/// `kamh-glass` at quick or full size.
fn kamh_cells(quick: bool) -> Vec<Cell> {
    kamh_cells_sized(if quick { KAMH_QUICK } else { KAMH_FULL })
}

fn kamh_cells_sized(size: KamhSize) -> Vec<Cell> {
    let KamhSize {
        iterations,
        burn_in,
        n,
    } = size;
    Cell::per_sampler(
        TARGET,
        [
            SamplerSpec::Sm,
            SamplerSpec::AmFs,
            SamplerSpec::AmLs,
            SamplerSpec::KamhLs {
                n,
                gamma: 0.2,
                length_scale: None,
            },
            EMCEE,
        ],
        iterations,
        burn_in,
    )
}

/// `kamh-glass`.
pub fn kamh() -> Experiment {
    Experiment {
        name: "kamh-glass",
        source: "Sejdinovic et al. 2014 (KAMH), Fig. 4",
        description: "SM, AM-FS, AM-LS, KAMH-LS and emcee's ensemble on the pseudo-marginal GP Glass posterior: ‖mean − benchmark mean‖ and MMD² vs iterations",
        paper_size: "benchmark 30 SM chains × 500000 (100000 burn-in, thin 1000); 30 chains × 100000 (20000 burn-in), thin 20",
        protocol: Some(Protocol {
            chains: 10,
            quick_chains: 2,
            cells: kamh_cells,
            paper: Some(PaperGrid {
                chains: 30,
                cells: || kamh_cells_sized(KAMH_PAPER),
            }),
            metrics: &[
                Metric::Acceptance,
                Metric::MeanNorm,
                Metric::BenchmarkTrace {
                    checkpoints: 10,
                    thin: 20,
                    estimator: MmdEstimator::Unbiased,
                },
                Metric::MinEss,
            ],
            notes: concat!(
                "Sizes (each log-density estimate costs milliseconds): at `--size full` the benchmark \
                    is 10 SM chains of 5000 + 20000 iterations thinned by 20 (10000 draws) and each \
                    sampler runs 10 chains of 2000 burn-in + 8000 iterations; `--size paper` runs the \
                    paper's 30 × 500000 (100000 burn-in, thin 1000) and 30 × (20000 + 80000), a \
                    cluster job. The benchmark's R̂ and bulk ESS are in \
                    `../glass-benchmark/<size>/benchmark.json`. Target: \
                    Laplace importance sampling with n_imp = 100, ridge 10⁻³, prior θ ~ N(0, 5I) in the \
                    code's θ convention; every chain starts at θ = 0. KAMH-LS: n = 1000, γ = 0.2, \
                    median-heuristic bandwidth (the paper's code fixed σ = 23), adaptation during burn-in \
                    only. Curves: post-burn-in chains thinned by 20, ‖mean − benchmark mean‖ and the \
                    unbiased MMD² with the paper's kernel (1 + ⟨θ, θ′⟩)³ (the code's offset is 0.2) on 10 \
                    prefixes; x = post-burn-in iterations. Bands: 10%–90% of the chains (the paper's \
                    \"80% confidence intervals\" were mean ± 1.28·sd/√30; every value is in summary.json).",
                ensemble_note!()
            ),
            claims: kamh_claims,
            figures,
        }),
        study: None,
        missing: "",
    }
}

/// `kmc-glass`: 6000 iterations from θ = 0 with no burn-in, every sampler
/// adapting throughout (quick: 200).
fn kmc_cells(quick: bool) -> Vec<Cell> {
    let iterations = if quick { 200 } else { 6_000 };
    static KAMH: SamplerSpec = SamplerSpec::KamhLs {
        n: 1000,
        gamma: 0.2,
        length_scale: None,
    };
    static KAMH_QUICK: SamplerSpec = SamplerSpec::KamhLs {
        n: 100,
        gamma: 0.2,
        length_scale: None,
    };
    static RW: SamplerSpec = SamplerSpec::RwTuned;
    // learning from its history needs adaptation at every step (there is no
    // burn-in: the runner's default would never adapt)
    static KMC: SamplerSpec = kmc_lite(1000, LiteBasis::History { kappa: REFIT_KAPPA });
    static KMC_QUICK: SamplerSpec = kmc_lite(100, LiteBasis::History { kappa: REFIT_KAPPA });
    let n = if quick { 100 } else { 1000 };
    let mut cells = Cell::per_sampler(
        TARGET,
        [
            SamplerSpec::Adapting(if quick { &KMC_QUICK } else { &KMC }, AdaptationStop::Never),
            SamplerSpec::Adapting(
                if quick { &KAMH_QUICK } else { &KAMH },
                AdaptationStop::Never,
            ),
            SamplerSpec::Adapting(&RW, AdaptationStop::Never),
            EMCEE,
        ],
        iterations,
        0,
    );
    // The public KMC code's protocol: a fixed basis of benchmark draws.
    cells.push(Cell {
        target: TARGET,
        sampler: kmc_lite(n, LiteBasis::Oracle),
        setting: ORACLE.into(),
        iterations,
        burn_in: 0,
        start: Start::Target,
    });
    // The public KMC code's KAMH: the same kind of basis, ν² = 0.02, γ² = 0.2.
    cells.push(Cell {
        target: TARGET,
        sampler: SamplerSpec::KamhReference {
            n,
            nu2: 0.02,
            gamma2: 0.2,
        },
        setting: ORACLE.into(),
        iterations,
        burn_in: 0,
        start: Start::Target,
    });
    cells
}

/// KMC lite with the paper's Glass settings on a basis of `n` points.
const fn kmc_lite(n: usize, basis: LiteBasis) -> SamplerSpec {
    SamplerSpec::KmcLite {
        n,
        sigma: KMC_SIGMA,
        lambda: KMC_LAMBDA,
        step_size: (0.01, 0.1),
        steps: (1, 10),
        basis,
    }
}

/// The setting of the KMC cell on an oracle basis of benchmark draws.
const ORACLE: &str = "basis=oracle";

/// The KMC code's lite kernel exp(−‖x − y‖²/σ) with σ = 2⁴, and λ = 1.
const KMC_SIGMA: f64 = 16.0;
const KMC_LAMBDA: f64 = 1.0;
/// Lite refits with probability t^−0.75 once 1000 states are seen.
const REFIT_KAPPA: f64 = 0.75;

/// `kmc-glass`.
pub fn kmc() -> Experiment {
    Experiment {
        name: "kmc-glass",
        source: "Strathmann et al. 2015 (KMC), Fig. 4 left",
        description: "KMC lite vs KAMH vs RW (and emcee's ensemble) on the pseudo-marginal GP Glass posterior: MMD² to the benchmark over 6000 iterations, no burn-in",
        paper_size: "6000 iterations without burn-in; benchmark as in KAMH",
        protocol: Some(Protocol {
            chains: 10,
            quick_chains: 2,
            cells: kmc_cells,
            paper: Some(PaperGrid {
                chains: 10,
                cells: || kmc_cells(false),
            }),
            metrics: &[
                Metric::Acceptance,
                Metric::MeanNorm,
                Metric::BenchmarkTrace {
                    checkpoints: 12,
                    thin: 1,
                    estimator: MmdEstimator::Biased,
                },
                Metric::MinEss,
                // the KMC code's ESS: after 200 warm-up draws (of our 6000)
                Metric::MinEssAfter {
                    warmup: 200,
                    of: 6_000,
                },
            ],
            notes: concat!(
                "All chains start at θ = 0 and record every iteration (no burn-in); every sampler \
                    adapts throughout. KMC lite (the \
                    paper's description, not the code's oracle): kernel exp(−‖x − y‖²/σ), σ = 2⁴, \
                    λ = 1 (the code's values; the paper tuned them by \
                    cross-validation, not done here), fitted on a random 1000-state subsample of the \
                    history once 1000 states exist and refitted with probability t^−0.75 (random-walk \
                    steps before, scale learned toward 0.234), L ~ U{1, …, 10}, ε ~ U[0.01, 0.1), \
                    momentum N(0, I). KMC with setting `basis=oracle`: the same sampler on a \
                    fixed basis of n benchmark draws per chain from the first step, as the public \
                    KMC code runs it. KAMH with setting `basis=oracle`: the KMC code's KAMH on \
                    such a basis, kernel exp(−‖x − y‖²/σ) with σ = √(½ · median distance of the \
                    basis), fixed ν² = 0.02 and γ² = 0.2, no adaptation (the code's acceptance \
                    leaves out the proposal's density ratio; ours keeps it). KAMH: n = 1000, γ = 0.2, median-heuristic bandwidth, subsample \
                    redrawn every step, ν learned toward 0.234. RW: scale learned toward 0.234 from \
                    2.38/√9. Curves: biased MMD² (KMC's code) with the papers' kernel (1 + ⟨θ, θ′⟩)³ \
                    on 12 prefixes of the chain; bands: 10%–90% of the chains (KMC draws percentile \
                    bands). The benchmark is shared with kamh-glass (see its summary). \
                    **KMC's cell was rerun after a grid bug.** An earlier grid did not wrap the \
                    history KMC cell in `SamplerSpec::Adapting`, so it never adapted, never fitted \
                    its surrogate and ran the fallback random walk at 2.38/√9 (acceptance 0.096, \
                    the benchmark's SM). The cell in this summary adapts as intended and accepts \
                    0.46; its surrogate, fitted to its own early history, still mixes worse than \
                    RW and KAMH-LS by minimum ESS and by the final MMD², while on an oracle basis \
                    of benchmark draws it accepts 0.74 and beats RW in minimum ESS. Measured \
                    beside it: the likelihood estimate's sd at posterior points is 0.05–0.06 \
                    (0.08 at θ = 0; 50 repeats), capping the acceptance of a perfect move at \
                    2Φ(−σ/√2) ≈ 0.96 (with ε scaled by 10⁻³ KMC accepts 0.96–0.97), so the \
                    noise is not what limits any sampler here. `ess_min_after_warmup` is the \
                    minimum ESS without the first 200 of the 6000 draws (a thirtieth at every \
                    size), as the KMC code computes it after its 200 warm-up draws.",
                ensemble_note!()
            ),
            claims: kmc_claims,
            figures,
        }),
        study: None,
        missing: "",
    }
}

/// One curve figure per trace (`mmd2`, `mean_norm`), bands 10%–90%.
fn figures(summary: &Summary, dir: &Path) -> Result<Vec<String>> {
    let mut files = Vec::new();
    for (trace, title) in [
        ("mmd2", "MMD² to the benchmark"),
        ("mean_norm", "‖mean − benchmark mean‖"),
    ] {
        let series = banded_trace(summary, trace);
        let file = format!("fig4-{trace}.svg");
        curves(
            &dir.join(&file),
            &format!("Glass: {title} (mean, 10%–90% of chains)"),
            ("iterations", trace),
            Axes {
                log_x: false,
                log_y: false,
            },
            &series,
        )?;
        files.push(file);
    }
    Ok(files)
}

/// KAMH §5.1: KAMH-LS nearer the benchmark than each rival at the end of
/// the run, one claim per rival and figure of merit.
fn kamh_claims(summary: &Summary) -> Vec<ClaimCheck> {
    let key = TARGET.key();
    let mut out = Vec::new();
    for (trace, what) in [
        ("mmd2", "MMD² (all mixed moments up to order 3)"),
        ("mean_norm", "‖mean − benchmark mean‖"),
    ] {
        for rival in ["SM", "AM-FS", "AM-LS"] {
            let last = |s: &str| summary.curve_estimate(&key, s, "", trace, -1);
            out.push(ClaimCheck::new(
                format!(
                    "KAMH-LS approximates the benchmark better than {rival} in {what} at the \
                     full sample size"
                ),
                compare(last("KAMH-LS"), Claimed::Below, last(rival)),
            ));
        }
    }
    // each chain's seconds: its ess_min over its ess_min_per_s (both from
    // the chain's own timer); all cells run the same number of iterations
    let chain_secs = |sampler: &str, factor: f64| match (
        summary.stats(&key, sampler, "", "ess_min"),
        summary.stats(&key, sampler, "", "ess_min_per_s"),
    ) {
        (Some(ess), Some(rate)) => {
            let secs: Vec<f64> = (ess.values.iter().zip(&rate.values))
                .map(|(e, r)| factor * e / r)
                .collect();
            let scaled = if factor == 1.0 {
                String::new()
            } else {
                format!("{factor} × ")
            };
            estimate(format!("{scaled}{sampler}'s seconds per chain"), &secs)
        }
        _ => pending(format!(
            "{sampler}'s seconds per chain (no such cell has run)"
        )),
    };
    let mut overhead = compare(
        chain_secs("KAMH-LS", 1.0),
        Claimed::Below,
        chain_secs("SM", 1.05),
    );
    overhead.rule = format!(
        "{} (the chains' own timers; only an idle run's times mean anything: the section's run \
         records give each run's load)",
        overhead.rule
    );
    out.push(ClaimCheck::new(
        "KAMH-LS costs only 2–3% more effective computation time than SM (the likelihood \
         estimates dominate): its time per chain below 1.05 × SM's",
        overhead,
    ));
    out
}

/// KMC §5.3 on Glass, one claim per rival.
fn kmc_claims(summary: &Summary) -> Vec<ClaimCheck> {
    let key = TARGET.key();
    let points = summary
        .cells
        .iter()
        .find(|c| c.sampler == "KMC")
        .and_then(|c| c.curves.get("mmd2"))
        .map_or(0, |c| c.x.len());
    let at = |s: &str, i: usize| summary.curve_estimate(&key, s, "", "mmd2", i as isize);
    let mut out = Vec::new();
    for rival in ["RW", "KAMH-LS"] {
        out.push(ClaimCheck::new(
            format!("KMC clearly outperforms {rival} in MMD² by the end of the run"),
            compare(
                summary.curve_estimate(&key, "KMC", "", "mmd2", -1),
                Claimed::Below,
                summary.curve_estimate(&key, rival, "", "mmd2", -1),
            ),
        ));
        out.push(ClaimCheck::new(
            format!("KMC outperforms {rival} in MMD² from about 500 iterations on"),
            all_of(
                (0..points)
                    .map(|i| compare(at("KMC", i), Claimed::Below, at(rival, i)))
                    .collect(),
            ),
        ));
        out.push(ClaimCheck::new(
            format!(
                "KMC has a larger minimum ESS than {rival} (paper: ≈ 415 for KMC, 35 for KAMH, \
                 25 for RW)"
            ),
            compare(
                summary.estimate(&key, "KMC", "", "ess_min"),
                Claimed::Above,
                summary.estimate(&key, rival, "", "ess_min"),
            ),
        ));
    }
    for rival in ["RW", "KAMH-LS"] {
        out.push(
            ClaimCheck::new(
                format!(
                    "KMC has a larger minimum ESS than {rival} (variant: KMC on an oracle basis of \
                     benchmark draws, as the public KMC code runs it)"
                ),
                compare(
                    summary.estimate(&key, "KMC", ORACLE, "ess_min"),
                    Claimed::Above,
                    summary.estimate(&key, rival, "", "ess_min"),
                ),
            )
            .caveat(
                "the KMC code also gives KAMH an oracle basis and computes the ESS after 200 \
                 warm-up draws; ours learns KAMH's basis from its history and counts every draw",
            ),
        );
    }
    // Both on the code's oracle basis.
    out.push(
        ClaimCheck::new(
            "KMC has a larger minimum ESS than KAMH (paper: ≈ 415 for KMC, 35 for KAMH) \
             (variant: both on an oracle basis of benchmark draws, KAMH with the code's fixed \
             ν² = 0.02 and γ² = 0.2, as the public KMC code runs them)",
            compare(
                summary.estimate(&key, "KMC", ORACLE, "ess_min"),
                Claimed::Above,
                summary.estimate(&key, "KAMH", ORACLE, "ess_min"),
            ),
        )
        .caveat(
            "the KMC code computes the ESS after 200 warm-up draws; ours counts every draw from \
             θ = 0, and the code's KAMH leaves out the proposal's density ratio",
        ),
    );
    // The code's protocol in full: both on the oracle basis, the ESS after
    // the 200 warm-up draws.
    out.push(
        ClaimCheck::new(
            "KMC has a larger minimum ESS than KAMH (paper: ≈ 415 for KMC, 35 for KAMH) \
             (variant: both on an oracle basis of benchmark draws, the ESS after 200 warm-up \
             draws, as the public KMC code computes it)",
            compare(
                summary.estimate(&key, "KMC", ORACLE, "ess_min_after_warmup"),
                Claimed::Above,
                summary.estimate(&key, "KAMH", ORACLE, "ess_min_after_warmup"),
            ),
        )
        .caveat("the code's KAMH leaves out the proposal's density ratio; ours keeps it"),
    );
    for rival in ["RW", "KAMH-LS"] {
        out.push(ClaimCheck::new(
            format!(
                "KMC has a larger minimum ESS than {rival} (variant: the ESS after 200 warm-up \
                 draws, as the public KMC code computes it)"
            ),
            compare(
                summary.estimate(&key, "KMC", "", "ess_min_after_warmup"),
                Claimed::Above,
                summary.estimate(&key, rival, "", "ess_min_after_warmup"),
            ),
        ));
    }
    out.push(ClaimCheck::new(
        "KMC clearly outperforms KAMH in MMD² by the end of the run (variant: both on an oracle \
         basis of benchmark draws, as the public KMC code runs them)",
        compare(
            summary.curve_estimate(&key, "KMC", ORACLE, "mmd2", -1),
            Claimed::Below,
            summary.curve_estimate(&key, "KAMH", ORACLE, "mmd2", -1),
        ),
    ));
    let third = summary
        .cells
        .iter()
        .find(|c| c.sampler == "KMC")
        .and_then(|c| c.curves.get("mmd2"))
        .and_then(|c| c.x.iter().position(|&x| x == 3000.0))
        .map_or(isize::MAX, |i| i as isize);
    for sampler in ["KMC", "KAMH-LS", "RW"] {
        let mmd2 = |i: isize| summary.curve_estimate(&key, sampler, "", "mmd2", i);
        out.push(
            ClaimCheck::new(
                format!(
                    "all samplers effectively stop improving from 3000 iterations (a burn-in \
                     bias): {sampler}'s MMD² at the end is not below its MMD² at 3000"
                ),
                compare(mmd2(-1), Claimed::Above, mmd2(third)),
            )
            .caveat(
                "a claim of no improvement: a significant fall refutes it, no change is \
                 inconclusive, only a significant rise reproduces it; the two points are the \
                 same chains, compared as if independent",
            ),
        );
    }
    out
}
