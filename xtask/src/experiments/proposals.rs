//! `kamh-proposals`: KAMH Fig. 2 (banana) and Fig. 6 (flower, ring) — the
//! 95% regions of the KAMH proposal `N(y, γ²I + ν²MHMᵀ)` at given points y
//! for one fixed subsample z, drawn over the target's density.

use crate::experiment::{Experiment, Replicate, Study};
use crate::ids::replicate_seed;
use crate::plot::{Ellipse, proposal_contours};
use crate::spec::TargetSpec;
use crate::summary::{Measurement, Summary};
use crate::verdict::{ClaimCheck, Claimed, Interval, compare, estimate};
use anyhow::Result;
use faer::Mat;
use kameleon_kernels::{Gaussian, median_heuristic};
use kameleon_samplers::{
    Bandwidth, Gamma, Kamh, KamhConfig, KamhCovariance, Refresh, RobbinsMonro, RunConfig, Scale,
    StepSchedule, SubsampleConfig, chain_rng, run_chain,
};
use std::collections::BTreeMap;
use std::f64::consts::PI;
use std::path::Path;

const NAME: &str = "kamh-proposals";
/// The subsample size of the paper's experiments.
const SUBSAMPLE: usize = 1000;
/// The paper's γ.
const GAMMA: f64 = 0.2;
/// Points whose major axis is checked against the ridge must have an
/// alignment |cos ∠| of at least this on average over a target's points.
const ALIGNMENT: f64 = 0.9;
/// … and a ratio of the axes' lengths of at least this.
const ANISOTROPY: f64 = 2.0;

const NOTES: &str = "The subsample z is n = 1000 exact draws from the target (the paper's \
figures use the samples of a chain); the kernel is Gaussian with the median-heuristic \
bandwidth on z, γ = 0.2, and ν is the value KAMH-LS learns (Robbins–Monro toward 0.234, \
steps 1/√t from ν² = 0.1) in a chain whose subsample is frozen at z. Each replicate draws \
a fresh z; the figures show replicate 0. The banana is the paper's 8-d B(0.03, 100), \
shown in its first two coordinates (the ellipses are the 95% regions of the proposal's \
2-d marginal); the flower F(10, 6, 6, 1) and the ring (A = 0) are 2-d. The points y lie on \
the ridge of the density (plus points off it); `alignment` is |cos| of the angle between \
the proposal's major axis and the ridge's tangent at y, `anisotropy` the ratio of the \
axes' lengths, `s11`, `s12`, `s22` the proposal covariance in the plotted coordinates. \
The panels marked \"the figure code's settings\" use the fixed values of the KAMH code's figure \
script (kameleon-mcmc `paper_figures/create_figures.py`) instead: on the flower a Gaussian \
kernel of width ℓ = 2, ν² = 0.2, γ = 0.1 (n = 1000); on the code's own ring, r₀ = 3.5 and \
σ² = 0.05, ℓ = 0.5, n = 200, ν² = 0.01, γ = 0.1.";

/// A target of the figure with its points.
struct Panel {
    target: TargetSpec,
    label: &'static str,
    /// Plotted window.
    window: ((f64, f64), (f64, f64)),
    /// Points on the ridge with the ridge's tangent there.
    ridge: Vec<((f64, f64), (f64, f64))>,
    /// Points off the ridge.
    off: Vec<(f64, f64)>,
    /// How the proposal is set.
    settings: ProposalSettings,
    /// The panel's random streams: its subsample is drawn from stream
    /// `stream`, the median heuristic's points from `stream + 3`, and the
    /// chain that learns ν is seeded with the replicate's seed ⊕ `stream`.
    stream: u64,
}

/// How a panel's KAMH proposal is set.
#[derive(Debug, Clone, Copy)]
enum ProposalSettings {
    /// The paper's experiments: n = 1000, the median-heuristic kernel
    /// width on z, γ = 0.2 and ν as KAMH-LS learns it with z frozen.
    Learned,
    /// The KAMH code's figure script: fixed kernel width, ν², γ and n.
    Figure {
        length_scale: f64,
        nu2: f64,
        gamma: f64,
        subsample: usize,
    },
}

impl Panel {
    /// The panel's key in the summary: the target's, marked for the figure
    /// code's settings.
    fn key(&self) -> String {
        match self.settings {
            ProposalSettings::Learned => self.target.key(),
            ProposalSettings::Figure { .. } => format!("{}-figure-code", self.target.key()),
        }
    }

    /// The subsample size n.
    fn subsample_size(&self) -> usize {
        match self.settings {
            ProposalSettings::Learned => SUBSAMPLE,
            ProposalSettings::Figure { subsample, .. } => subsample,
        }
    }
}

/// A polar ridge r(θ) = r₀ + A cos(ωθ): the point at θ and its tangent.
pub fn polar_ridge(r0: f64, amplitude: f64, petals: f64, theta: f64) -> ((f64, f64), (f64, f64)) {
    let r = r0 + amplitude * (petals * theta).cos();
    let dr = -amplitude * petals * (petals * theta).sin();
    (
        (r * theta.cos(), r * theta.sin()),
        (
            dr * theta.cos() - r * theta.sin(),
            dr * theta.sin() + r * theta.cos(),
        ),
    )
}

/// A 2-d flower or ring panel: the target F(r₀, A, ω, σ) given as
/// `(r₀, A, ω, σ)`, points on its ridge at `angles`, the origin off it, and
/// the square window of half-width `half_width`.
fn polar_panel(
    (radius, amplitude, petals, sigma): (f64, f64, u32, f64),
    angles: &[f64],
    label: &'static str,
    half_width: f64,
    settings: ProposalSettings,
    stream: u64,
) -> Panel {
    Panel {
        target: TargetSpec::Flower {
            dim: 2,
            radius,
            amplitude,
            petals,
            sigma,
            whole_norm: false,
        },
        label,
        window: ((-half_width, half_width), (-half_width, half_width)),
        ridge: angles
            .iter()
            .map(|&t| polar_ridge(radius, amplitude, petals as f64, t))
            .collect(),
        off: vec![(0.0, 0.0)],
        settings,
        stream,
    }
}

fn panels() -> Vec<Panel> {
    let (b, v) = (0.03, 100.0);
    let banana_ridge = [-20.0, -12.0, -5.0, 5.0, 12.0, 20.0]
        .iter()
        .map(|&x: &f64| ((x, b * (x * x - v)), (1.0, 2.0 * b * x)))
        .collect();
    let flower_angles = [0.0, PI / 12.0, PI / 6.0, PI / 4.0, 0.9 * PI, 1.45 * PI];
    let ring_angles = [0.0, PI / 4.0, PI / 2.0, 0.8 * PI, 1.2 * PI, 1.6 * PI];
    vec![
        Panel {
            target: TargetSpec::Banana { dim: 8, b, v },
            label: "8-d B(0.03, 100) (KAMH Fig. 2)",
            window: ((-30.0, 30.0), (-8.0, 22.0)),
            ridge: banana_ridge,
            off: vec![(0.0, 8.0), (25.0, -5.0)],
            settings: ProposalSettings::Learned,
            stream: 0,
        },
        polar_panel(
            (10.0, 6.0, 6, 1.0),
            &flower_angles,
            "2-d F(10, 6, 6, 1) (KAMH Fig. 6)",
            18.0,
            ProposalSettings::Learned,
            1,
        ),
        polar_panel(
            (10.0, 0.0, 6, 1.0),
            &ring_angles,
            "2-d ring F(10, 0, ·, 1) (KAMH Fig. 6)",
            14.0,
            ProposalSettings::Learned,
            2,
        ),
        polar_panel(
            (10.0, 6.0, 6, 1.0),
            &flower_angles,
            "2-d F(10, 6, 6, 1), the figure code's settings (ℓ = 2, ν² = 0.2, γ = 0.1)",
            18.0,
            ProposalSettings::Figure {
                length_scale: 2.0,
                nu2: 0.2,
                gamma: 0.1,
                subsample: SUBSAMPLE,
            },
            10,
        ),
        polar_panel(
            (3.5, 0.0, 0, 0.05f64.sqrt()),
            &ring_angles,
            "2-d ring F(3.5, 0, ·, √0.05), the figure code's settings (ℓ = 0.5, n = 200, \
             ν² = 0.01, γ = 0.1)",
            5.0,
            ProposalSettings::Figure {
                length_scale: 0.5,
                nu2: 0.01,
                gamma: 0.1,
                subsample: 200,
            },
            11,
        ),
    ]
}

/// `kamh-proposals`.
pub fn proposals() -> Experiment {
    Experiment {
        name: NAME,
        source: "Sejdinovic et al. 2014 (KAMH), Fig. 2 and Fig. 6 (appendix B)",
        description: "95% proposal contours of KAMH on the banana, flower and ring",
        paper_size: "one subsample of 1000 points per target",
        protocol: None,
        study: Some(Study {
            replicates: 10,
            quick_replicates: 2,
            size: |quick| {
                format!(
                    "n = {SUBSAMPLE} exact draws per target, ν from {} KAMH-LS steps, \
                     covariances at 6–8 points",
                    learning_steps(quick)
                )
            },
            run,
            notes: NOTES,
            claims,
            figures,
        }),
        missing: "",
    }
}

fn learning_steps(quick: bool) -> u64 {
    if quick { 2000 } else { 10000 }
}

/// The subsample of replicate `seed` on a panel's target: n exact draws
/// (n × d) — also what the figure draws.
fn subsample(panel: &Panel, seed: u64) -> Result<Mat<f64>> {
    let built = panel.target.build()?;
    let t = built.target();
    let mut rng = chain_rng(seed, panel.stream);
    let mut x = vec![0.0; t.dim()];
    let n = panel.subsample_size();
    let mut z = Mat::zeros(n, t.dim());
    for i in 0..n {
        t.sample_iid(&mut rng, &mut x)?;
        for (j, v) in x.iter().enumerate() {
            z[(i, j)] = *v;
        }
    }
    Ok(z)
}

fn run(r: &Replicate) -> Result<Vec<Measurement>> {
    let panels = panels();
    let mut rows = Vec::new();
    for (p, panel) in panels.iter().enumerate() {
        (r.progress)(p as u64, panels.len() as u64);
        let clock = std::time::Instant::now();
        let built = panel.target.build()?;
        let target = built.target();
        let d = target.dim();
        let z = subsample(panel, r.seed)?;
        let (kernel, gamma, nu, setting) = match panel.settings {
            ProposalSettings::Learned => {
                let (kernel, nu) = learned_proposal(target, &z, r, panel.stream)?;
                (kernel, GAMMA, nu, "learned")
            }
            ProposalSettings::Figure {
                length_scale,
                nu2,
                gamma,
                ..
            } => (
                Gaussian::new(length_scale)?,
                gamma,
                nu2.sqrt(),
                "figure code",
            ),
        };
        let bandwidth = kernel.length_scale();
        let key = panel.key();
        rows.push(Measurement {
            target: key.clone(),
            target_label: panel.label.into(),
            method: "KAMH-LS".into(),
            setting: setting.into(),
            wall_time_secs: clock.elapsed().as_secs_f64(),
            metrics: BTreeMap::from([("nu".into(), nu), ("bandwidth".into(), bandwidth)]),
        });
        let mut builder = KamhCovariance::new(d, panel.subsample_size());
        let mut cov = vec![0.0; d * d];
        let points = panel
            .ridge
            .iter()
            .map(|&(y, t)| (y, Some(t)))
            .chain(panel.off.iter().map(|&y| (y, None)));
        for (k, (y, tangent)) in points.enumerate() {
            let mut point = vec![0.0; d];
            point[0] = y.0;
            point[1] = y.1;
            builder.covariance_into(&kernel, &point, z.as_ref(), gamma, nu, &mut cov);
            let (s11, s12, s22) = (cov[0], cov[1], cov[d + 1]);
            let mut metrics = BTreeMap::from([
                ("y1".to_string(), y.0),
                ("y2".to_string(), y.1),
                ("s11".to_string(), s11),
                ("s12".to_string(), s12),
                ("s22".to_string(), s22),
            ]);
            let (major, (l1, l2)) = principal_axis(s11, s12, s22);
            metrics.insert("anisotropy".into(), (l1 / l2).sqrt());
            if let Some(t) = tangent {
                let norm = (t.0 * t.0 + t.1 * t.1).sqrt();
                let cos = (major.0 * t.0 + major.1 * t.1).abs() / norm;
                metrics.insert("alignment".into(), cos);
            }
            rows.push(Measurement {
                target: key.clone(),
                target_label: panel.label.into(),
                method: "KAMH".into(),
                setting: format!(
                    "{} {k} ({:.1}, {:.1})",
                    if tangent.is_some() { "ridge" } else { "off" },
                    y.0,
                    y.1
                ),
                wall_time_secs: 0.0,
                metrics,
            });
        }
    }
    (r.progress)(panels.len() as u64, panels.len() as u64);
    Ok(rows)
}

/// The paper's proposal on the subsample `z`: the Gaussian kernel of the
/// median-heuristic width, and ν as KAMH-LS learns it (Robbins–Monro toward
/// 0.234 from ν² = 0.1) in a chain whose subsample is frozen at `z`.
fn learned_proposal(
    target: &dyn kameleon_samplers::Target,
    z: &Mat<f64>,
    r: &Replicate,
    stream: u64,
) -> Result<(Gaussian, f64)> {
    let d = target.dim();
    let mut rng = chain_rng(r.seed, stream + 3);
    let kernel = Gaussian::new(median_heuristic(z.as_ref(), SUBSAMPLE, &mut rng)?)?;
    let config = KamhConfig::default()
        .with_subsample(
            SubsampleConfig::default()
                .with_subsample_size(SUBSAMPLE)?
                .with_gamma(Gamma::Fixed(GAMMA))?
                .with_refresh(Refresh::Never)?
                .with_bandwidth(Bandwidth::Fixed)?
                .with_warmup_scale(GAMMA)?,
        )?
        .with_scale(Scale::Adaptive(RobbinsMonro::new(
            0.1f64.sqrt(),
            0.234,
            StepSchedule::InverseSqrt,
        )?))?;
    let mut kamh = Kamh::new(d, kernel, config)?;
    kamh.set_subsample(z.as_ref())?;
    let x0: Vec<f64> = (0..d).map(|j| z[(0, j)]).collect();
    let chain = run_chain(
        target,
        kamh,
        &x0,
        RunConfig::new(learning_steps(r.quick), 1),
        r.seed ^ stream,
    )?;
    let nu = chain
        .adaptation
        .scale
        .ok_or_else(|| anyhow::anyhow!("KAMH-LS reported no scale"))?;
    Ok((kernel, nu))
}

/// The unit major axis of the 2 × 2 covariance [[s11, s12], [s12, s22]]
/// and its eigenvalues (larger first), in closed form.
pub fn principal_axis(s11: f64, s12: f64, s22: f64) -> ((f64, f64), (f64, f64)) {
    let mean = 0.5 * (s11 + s22);
    let radius = (0.25 * (s11 - s22).powi(2) + s12 * s12).sqrt();
    let (l1, l2) = (mean + radius, mean - radius);
    // (s12, l1 − s11) is an eigenvector of l1 unless s12 = 0.
    let v = if s12.abs() > 1e-300 {
        (s12, l1 - s11)
    } else if s11 >= s22 {
        (1.0, 0.0)
    } else {
        (0.0, 1.0)
    };
    let n = (v.0 * v.0 + v.1 * v.1).sqrt();
    ((v.0 / n, v.1 / n), (l1, l2))
}

/// KAMH §3 (Figs. 2 and 6): on the ridge the proposals' major axis follows
/// it, and the proposals are elongated; one claim each, decided on the
/// interval over the ridge points (each point's mean over replicates).
fn claims(s: &Summary) -> Vec<ClaimCheck> {
    let mut out = Vec::new();
    for (key, label) in s.targets() {
        let over_ridge = |metric: &str| {
            let values: Vec<f64> = s
                .cells
                .iter()
                .filter(|c| c.target == key && c.setting.starts_with("ridge"))
                .filter_map(|c| c.metrics.get(metric))
                .map(|m| m.mean)
                .collect();
            estimate(format!("{metric} over the ridge points"), &values)
        };
        for (metric, threshold, what) in [
            (
                "alignment",
                ALIGNMENT,
                "their major axis follows the ridge (|cos ∠(major axis, tangent)|)",
            ),
            (
                "anisotropy",
                ANISOTROPY,
                "they are elongated along it (ratio of the axes)",
            ),
        ] {
            out.push(
                ClaimCheck::new(
                    format!(
                        "the proposals encode the local structure of the target: on the ridge \
                         {what}, on {label}"
                    ),
                    compare(
                        over_ridge(metric),
                        Claimed::Above,
                        Ok(Interval::threshold(threshold)),
                    ),
                )
                .caveat("the paper shows pictures; the threshold is ours"),
            );
        }
    }
    out
}

fn figures(s: &Summary, dir: &Path) -> Result<Vec<String>> {
    let seed = replicate_seed(s.params.seed, NAME, 0);
    let mut files = Vec::new();
    for panel in &panels() {
        let key = panel.key();
        let first = |c: &crate::summary::CellSummary, m: &str| c.metrics[m].values[0];
        let ellipses: Vec<Ellipse> = s
            .cells
            .iter()
            .filter(|c| c.target == key && c.sampler == "KAMH")
            .map(|c| Ellipse {
                centre: (first(c, "y1"), first(c, "y2")),
                covariance: (first(c, "s11"), first(c, "s12"), first(c, "s22")),
            })
            .collect();
        let z = subsample(panel, seed)?;
        let samples: Vec<(f64, f64)> = (0..z.nrows()).map(|i| (z[(i, 0)], z[(i, 1)])).collect();
        // The banana's first two coordinates' marginal is its 2-d version;
        // the flower panels are 2-d already.
        let plane = match panel.target {
            TargetSpec::Banana { b, v, .. } => TargetSpec::Banana { dim: 2, b, v },
            flower @ TargetSpec::Flower {
                dim: 2,
                whole_norm: false,
                ..
            } => flower,
            TargetSpec::Flower { .. }
            | TargetSpec::GlassPosterior { .. }
            | TargetSpec::AbcSkewNormal
            | TargetSpec::CkamBimodal
            | TargetSpec::CkamFiveComponents
            | TargetSpec::CkamGrid32 => {
                anyhow::bail!("no proposal panels for {}", panel.target.label())
            }
        }
        .build()?;
        let mut rng = chain_rng(0, 0);
        let file = format!("proposals-{key}.svg");
        proposal_contours(
            &dir.join(&file),
            &format!("KAMH 95% proposal regions, {}", panel.label),
            panel.window,
            &mut |x, y| plane.target().log_density(&[x, y], &mut rng),
            &samples,
            &ellipses,
        )?;
        files.push(file);
    }
    Ok(files)
}
