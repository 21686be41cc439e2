//! Simulators of summary statistics: what a synthetic likelihood (Hamiltonian
//! ABC) needs from a model that is defined only by simulation.

use rand::Rng;

/// A simulator of summary statistics with an observed summary: what a
/// synthetic likelihood needs.
pub trait SummarySimulator: Send + Sync {
    /// The dimension of θ.
    fn parameter_dim(&self) -> usize;
    /// The observed summary `s_obs` (its length is the summary dimension).
    fn observed_summary(&self) -> &[f64];
    /// Simulates one data set at `theta` and writes its summary into `out`
    /// (of the length of [`SummarySimulator::observed_summary`]).
    fn simulate_summary(&self, theta: &[f64], rng: &mut dyn Rng, out: &mut [f64]);
}
