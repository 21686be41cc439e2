//! The error type of the samplers crate.

use kameleon_core::TargetError;

/// What can go wrong when building, running, checkpointing or resuming a sampler.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SamplerError {
    /// A parameter was non-finite or outside its domain.
    #[error("invalid sampler parameter `{name}`: {reason}")]
    InvalidParameter {
        /// The parameter's name.
        name: &'static str,
        /// What the parameter must satisfy.
        reason: String,
    },
    /// Points, targets or proposals of different dimensions were combined.
    #[error("dimension mismatch: {what} is {got}, {against} is {expected}")]
    DimensionMismatch {
        /// What was given, e.g. "the target's dimension".
        what: &'static str,
        /// Its size.
        got: usize,
        /// What it must equal, e.g. "the sampler's".
        against: &'static str,
        /// That size.
        expected: usize,
    },
    /// The starting point has a log density that is not finite (outside the
    /// support, or NaN, or a likelihood estimate that failed there): a chain
    /// cannot start there.
    #[error(
        "the starting point has log density {0}; start inside the support (a noisy likelihood \
         estimate can also fail there: e.g. simulated summaries far from the observed ones, or \
         with a singular covariance)"
    )]
    StartOutsideSupport(f64),
    /// A coordinate of the starting point is NaN or infinite.
    #[error("the starting point's coordinate {index} is {value}; start at a finite point")]
    NonFiniteStart {
        /// The first non-finite coordinate.
        index: usize,
        /// Its value.
        value: f64,
    },
    /// A walker of an ensemble cannot start where it is: its coordinate is
    /// non-finite ([`SamplerError::NonFiniteStart`]) or its log density is
    /// ([`SamplerError::StartOutsideSupport`]).
    #[error("walker {walker}: {source}")]
    WalkerStart {
        /// The walker's index.
        walker: usize,
        /// What is wrong with its start.
        source: Box<SamplerError>,
    },
    /// The target lacks a capability the sampler needs (e.g. a gradient for HMC).
    #[error(transparent)]
    Target(#[from] TargetError),
    /// A kernel could not be built. The samplers never return it
    /// themselves: it lets `?` on a kernel's constructor work where a
    /// sampler's error is expected, e.g. in the `setup` of
    /// [`crate::run_chains`].
    #[error(transparent)]
    Kernel(#[from] kameleon_kernels::KernelError),
    /// A feature map could not be built (`?` on its constructor, as for
    /// [`SamplerError::Kernel`]).
    #[error(transparent)]
    Features(#[from] kameleon_features::FeatureError),
    /// A score-matching estimator could not be built (`?` on its
    /// constructor, as for [`SamplerError::Kernel`]).
    #[error(transparent)]
    ScoreMatching(#[from] kameleon_score_matching::ScoreMatchingError),
    /// A covariance matrix could not be Cholesky-factored even after jitter.
    #[error("covariance is not positive definite even after adding jitter {jitter:e}")]
    NotPositiveDefinite {
        /// The largest jitter tried.
        jitter: f64,
    },
    /// A run read from a checkpoint does not fit the target it is to
    /// continue on.
    #[error("checkpoint {}: the run (seed {seed}, chain {chain_index}) has dimension {recorded}, the target dimension {target}", path.display())]
    ResumeDimension {
        /// The checkpoint file.
        path: std::path::PathBuf,
        /// The run's base seed.
        seed: u64,
        /// The run's chain index.
        chain_index: u64,
        /// The run's dimension.
        recorded: usize,
        /// The target's dimension.
        target: usize,
    },
    /// A run was asked to take steps on a target of another dimension.
    #[error(
        "the run (seed {seed}, chain {chain_index}) has dimension {run}, the target dimension {target}"
    )]
    RunDimension {
        /// The run's base seed.
        seed: u64,
        /// The run's chain index.
        chain_index: u64,
        /// The run's dimension.
        run: usize,
        /// The target's dimension.
        target: usize,
    },
    /// A chain's evaluation limit ([`crate::RunConfig::max_evaluations`])
    /// is too small for its start and the steps to its first draw.
    #[error("the evaluation limit of {limit} per chain {problem}")]
    EvaluationLimit {
        /// The limit.
        limit: u64,
        /// What it does not cover.
        problem: String,
    },
    /// A buffer the settings ask for cannot be allocated: its size
    /// overflows, or the allocator refuses it (e.g. a subsample of 2⁴⁰
    /// points, or d × d matrices at d = 10⁶).
    #[error(transparent)]
    TooLarge(#[from] kameleon_core::buffer::BufferTooLarge),
    /// A checkpoint file could not be written or read back.
    #[error("checkpoint {}: {problem}", path.display())]
    Checkpoint {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        #[source]
        problem: CheckpointProblem,
    },
}

/// What is wrong with a checkpoint file (see [`crate::checkpoint`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointProblem {
    /// The file could not be read, written, synced or renamed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The value could not be encoded.
    #[error("cannot encode the value: {reason}")]
    Unencodable {
        /// The encoder's message.
        reason: String,
    },
    /// The file does not start with the checkpoint magic.
    #[error("not a checkpoint file (wrong magic bytes)")]
    NotACheckpoint,
    /// The file has another format version.
    #[error("checkpoint format version {found}, this build reads version {expected}")]
    Version {
        /// The version in the file.
        found: u32,
        /// The version this build reads.
        expected: u32,
    },
    /// The file holds another kind of value.
    #[error("holds a `{found}`, not a `{wanted}`")]
    WrongKind {
        /// The kind in the file.
        found: String,
        /// The kind asked for.
        wanted: String,
    },
    /// The file ends before its header or its payload does.
    #[error("truncated (the file is shorter than its header says)")]
    Truncated,
    /// The checksum does not match the contents.
    #[error("corrupt (checksum mismatch)")]
    Corrupt,
    /// The file goes on after its payload.
    #[error("{extra} trailing bytes after the payload")]
    TrailingBytes {
        /// How many bytes follow the payload.
        extra: u64,
    },
    /// The payload passed the checks but does not decode as the wanted type.
    #[error("undecodable payload: {reason}")]
    Undecodable {
        /// The decoder's message.
        reason: String,
    },
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, SamplerError>;

/// Returns an [`SamplerError::InvalidParameter`] unless `ok`.
pub(crate) fn ensure(ok: bool, name: &'static str, reason: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(SamplerError::InvalidParameter {
            name,
            reason: reason.to_string(),
        })
    }
}

/// Returns [`SamplerError::DimensionMismatch`] unless `got == expected`:
/// `what` (of size `got`) must match `against` (of size `expected`).
pub(crate) fn check_dim(
    what: &'static str,
    got: usize,
    against: &'static str,
    expected: usize,
) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(SamplerError::DimensionMismatch {
            what,
            got,
            against,
            expected,
        })
    }
}

/// [`check_dim`] of `target`'s dimension against the sampler's `dim`.
pub(crate) fn check_target_dim(target: &dyn kameleon_core::Target, dim: usize) -> Result<()> {
    check_dim("the target's dimension", target.dim(), "the sampler's", dim)
}

/// Checks that the buffers of the given shapes can be allocated
/// ([`kameleon_core::buffer::ensure_room`]), as [`SamplerError::TooLarge`].
pub(crate) fn ensure_room(what: &'static str, shapes: &[&[usize]]) -> Result<()> {
    Ok(kameleon_core::buffer::ensure_room(what, shapes)?)
}
