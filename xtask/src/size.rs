//! How large a run is: `--size quick|full|paper`.

/// How large a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// Seconds per experiment: a smoke test, too small to judge any claim.
    Quick,
    /// `xtask`'s full size: the papers' size, except where that takes
    /// cluster hours (the Glass experiments), which run smaller.
    Full,
    /// The papers' size everywhere (the same as `Full` where `Full` already is).
    Paper,
}

impl Size {
    /// Every size, smallest first.
    pub const ALL: [Size; 3] = [Self::Quick, Self::Full, Self::Paper];

    /// The size of a command-line name (see [`Size::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether this is the smoke-test size.
    pub fn is_quick(self) -> bool {
        self == Self::Quick
    }

    /// The name used on the command line and in output directories.
    pub fn name(self) -> &'static str {
        match self {
            Self::Quick => "quick",
            Self::Full => "full",
            Self::Paper => "paper",
        }
    }
}
