//! The two figures that are not per-call timings: the throughput of 2
//! chains on 2 threads relative to 1 chain on 1 thread, and the peak
//! resident memory (VmHWM) of a long KAMH chain, measured in a child process
//! (this binary re-invoked with the hidden `--memory-child N`) so that
//! nothing else inflates it.

use super::Sizes;
use super::paths::{DIM, banana, iid_draws, kamh_proposal};
use anyhow::{Context, Result, bail};
use kameleon_diagnostics::quantile_sorted;
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptProbability, AdaptationStop, Kamh, KamhConfig, Refresh, RunConfig, run_chain, run_chains,
};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::time::Instant;

/// The goal for the throughput of 2 chains over 1.
pub const PARALLEL_GOAL: f64 = 1.85;

/// 2 chains on 2 threads against 1 chain on 1 thread.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Parallelism {
    /// Steps per chain.
    pub steps_per_chain: u64,
    /// Seconds for one chain alone (median over repetitions).
    pub one_chain_secs: f64,
    /// Wall seconds for two chains on two threads (median).
    pub two_chains_secs: f64,
    /// Throughput ratio `2 · one_chain_secs / two_chains_secs`.
    pub throughput_ratio: f64,
}

/// The resident memory of a long chain.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// Chain iterations (adaptation on throughout, so the history grows too).
    pub iterations: u64,
    /// Peak resident set (VmHWM) in MB (10⁶ bytes).
    pub peak_resident_mb: f64,
    /// Whether it was measured in a separate process.
    pub isolated: bool,
    /// What the states alone take, in MB.
    pub states_mb: f64,
}

/// Runs frozen KAMH chains of `s.parallel_steps` steps, one alone and two on
/// two threads, repeated; compares the medians.
pub fn parallel_throughput(s: &Sizes) -> Result<Parallelism> {
    let target = banana()?;
    let proposal = kamh_proposal(&iid_draws(&target, s.n, 1)?)?;
    let steps = s.parallel_steps;
    let run = |chains: usize| -> Result<f64> {
        let start = Instant::now();
        let config = RunConfig::new(200, steps);
        let setup = |_: usize, _: &mut Xoshiro256PlusPlus| Ok((proposal.clone(), vec![0.0; DIM]));
        black_box(run_chains(&target, chains, 2, config, setup, None)?);
        Ok(start.elapsed().as_secs_f64())
    };
    let reps = (s.repetitions / 4).max(3);
    let mut one = Vec::new();
    let mut two = Vec::new();
    for _ in 0..reps {
        one.push(run(1)?);
        two.push(run(2)?);
    }
    one.sort_by(f64::total_cmp);
    two.sort_by(f64::total_cmp);
    let (one_chain_secs, two_chains_secs) =
        (quantile_sorted(&one, 0.5)?, quantile_sorted(&two, 0.5)?);
    Ok(Parallelism {
        steps_per_chain: steps,
        one_chain_secs,
        two_chains_secs,
        throughput_ratio: 2.0 * one_chain_secs / two_chains_secs,
    })
}

/// The memory chain: KAMH (n = 1000, the subsample redrawn with probability
/// t^−½) adapting for `iterations` steps, keeping every state.
pub fn memory_chain(iterations: u64) -> Result<()> {
    let target = banana()?;
    let mut config = KamhConfig::paper(1000)?;
    config.subsample.refresh = Refresh::Probability(AdaptProbability::Power { kappa: 0.5 });
    let kamh = Kamh::new(DIM, Gaussian::new(1.0)?, config)?;
    let run = RunConfig::new(0, iterations).adaptation(AdaptationStop::Never);
    let chain = run_chain(&target, kamh, &[0.0; DIM], run, 9)?;
    black_box(&chain);
    Ok(())
}

/// The hidden `--memory-child N`: runs the memory chain and prints VmHWM.
pub fn memory_child(iterations: u64) -> Result<()> {
    memory_chain(iterations)?;
    say!("{}", vm_hwm_kb()?);
    Ok(())
}

/// The memory chain's peak, in a child process if `isolate`, else in this
/// one (then everything the process did before counts too).
pub fn memory(iterations: u64, isolate: bool) -> Result<Memory> {
    let kb = if isolate {
        let exe = std::env::current_exe()?;
        let output = std::process::Command::new(exe)
            .args(["bench-report", "--memory-child", &iterations.to_string()])
            .output()
            .context("re-invoking xtask for the memory chain")?;
        if !output.status.success() {
            bail!(
                "memory child failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        String::from_utf8_lossy(&output.stdout).trim().parse()?
    } else {
        memory_chain(iterations)?;
        vm_hwm_kb()?
    };
    Ok(Memory {
        iterations,
        peak_resident_mb: kb as f64 * 1024.0 / 1e6,
        isolated: isolate,
        states_mb: (iterations * DIM as u64 * 8) as f64 / 1e6,
    })
}

/// The process's peak resident set size (VmHWM) in kB.
fn vm_hwm_kb() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmHWM in /proc/self/status")
}
