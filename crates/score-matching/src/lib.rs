//! Score-matching estimators of infinite-dimensional kernel exponential families (KMC lite and finite). Under construction.
