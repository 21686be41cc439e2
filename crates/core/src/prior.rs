//! Log prior densities: the prior half of a pseudo-marginal posterior
//! `log p(θ) + log p̂(y | θ)`, and of the Hamiltonian ABC posterior.

use crate::TargetError;

/// A log prior density `log p(θ)`, up to an additive constant.
///
/// Any `Fn(&[f64]) -> f64 + Send + Sync` closure is a `LogPrior`.
pub trait LogPrior: Send + Sync {
    /// `log p(θ)`; `-inf` outside the support.
    fn log_prior(&self, theta: &[f64]) -> f64;
}

impl<F: Fn(&[f64]) -> f64 + Send + Sync> LogPrior for F {
    fn log_prior(&self, theta: &[f64]) -> f64 {
        self(theta)
    }
}

/// The isotropic Gaussian prior `N(0, variance · I)`, normalised.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IsotropicGaussianPrior {
    variance: f64,
}

impl IsotropicGaussianPrior {
    /// `N(0, variance · I)`; `variance` must be finite and positive.
    pub fn new(variance: f64) -> Result<Self, TargetError> {
        if !(variance.is_finite() && variance > 0.0) {
            return Err(TargetError::InvalidParameter {
                name: "variance",
                reason: format!("must be finite and positive, got {variance}"),
            });
        }
        Ok(Self { variance })
    }

    /// The prior variance of each coordinate.
    pub fn variance(&self) -> f64 {
        self.variance
    }
}

impl LogPrior for IsotropicGaussianPrior {
    fn log_prior(&self, theta: &[f64]) -> f64 {
        let squared_norm: f64 = theta.iter().map(|t| t * t).sum();
        let two_pi_variance = 2.0 * std::f64::consts::PI * self.variance;
        // 2π·variance overflows for a variance beyond about 2.9e307
        let log_two_pi_variance = if two_pi_variance.is_finite() {
            two_pi_variance.ln()
        } else {
            (2.0 * std::f64::consts::PI).ln() + self.variance.ln()
        };
        -0.5 * squared_norm / self.variance - 0.5 * theta.len() as f64 * log_two_pi_variance
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isotropic_prior_is_the_normalised_gaussian() {
        let prior = IsotropicGaussianPrior::new(5.0).unwrap();
        let theta = [0.3, -1.2];
        let per_coordinate: f64 = theta
            .iter()
            .map(|t: &f64| (-0.5 * t * t / 5.0).exp() / (2.0 * std::f64::consts::PI * 5.0).sqrt())
            .product();
        assert!((prior.log_prior(&theta) - per_coordinate.ln()).abs() < 1e-13);
        assert!(IsotropicGaussianPrior::new(0.0).is_err());
        // a variance whose 2π multiple overflows is still a proper prior
        // (the log density was −∞ everywhere)
        let wide = IsotropicGaussianPrior::new(1e308).unwrap();
        let expected = -0.5e-8 - 0.5 * (2.0 * std::f64::consts::PI).ln() - 0.5 * 1e308f64.ln();
        let got = wide.log_prior(&[1e150]);
        assert!((got - expected).abs() < 1e-13 * expected.abs(), "{got}");
        assert!(IsotropicGaussianPrior::new(f64::NAN).is_err());
    }
}
