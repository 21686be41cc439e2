//! MCMC diagnostics: effective sample size, split R-hat, autocorrelation, MMD, quantile coverage and KL divergence. Under construction.
