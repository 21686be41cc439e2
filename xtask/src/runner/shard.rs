//! One shard i/N of a grid's jobs, from the command line or from Slurm.

use anyhow::{Result, bail};

/// One shard i/N (1-based i) of a grid's jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 1-based index.
    pub index: usize,
    /// Number of shards.
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("expected i/N, got `{s}`"))?;
        let index: usize = i.trim().parse().map_err(|e| format!("shard index: {e}"))?;
        let count: usize = n.trim().parse().map_err(|e| format!("shard count: {e}"))?;
        if count == 0 || index == 0 || index > count {
            return Err(format!("need 1 ≤ i ≤ N, got {index}/{count}"));
        }
        Ok(Self { index, count })
    }
}

impl Shard {
    /// Whether the job at position `job` of the canonical job list belongs
    /// to this shard (round robin, so shards get balanced mixes of cells).
    pub fn contains(&self, job: usize) -> bool {
        job % self.count == self.index - 1
    }

    /// The shard of this process from Slurm's environment (see
    /// [`Shard::from_vars`]).
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()))
    }

    /// The shard from Slurm's variables, read through `var`:
    ///
    /// 1. In a job array (`SLURM_ARRAY_TASK_ID` is set): shard
    ///    `1 + (SLURM_ARRAY_TASK_ID − SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP`
    ///    of `SLURM_ARRAY_TASK_COUNT`, so `--array=0-7`, `1-8` and `1-15:2`
    ///    all give shards 1/8 … 8/8 (`MIN` defaults to 0 and `STEP` to 1
    ///    when unset).
    /// 2. Otherwise in an `srun` step of several tasks: shard
    ///    `SLURM_PROCID + 1` of `SLURM_NTASKS`.
    ///
    /// Every variable is parsed strictly; an error names the variable, its
    /// value and what was expected.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let number = |name: &str| -> Result<Option<usize>> {
            var(name)
                .map(|v| {
                    v.trim()
                        .parse::<usize>()
                        .map_err(|_| anyhow::anyhow!("{name}={v:?} is not a non-negative integer"))
                })
                .transpose()
        };
        let required = |name: &str, why: &str| -> Result<usize> {
            number(name)?.ok_or_else(|| anyhow::anyhow!("{name} is not set ({why})"))
        };
        let (index, count) = if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
            let why = "SLURM_ARRAY_TASK_ID is set, so this is taken for a job array";
            let count = required("SLURM_ARRAY_TASK_COUNT", why)?;
            let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let step = number("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1);
            if step == 0 {
                bail!("SLURM_ARRAY_TASK_STEP=0: the array's step must be at least 1");
            }
            let Some(offset) = id.checked_sub(min) else {
                bail!("SLURM_ARRAY_TASK_ID={id} is below SLURM_ARRAY_TASK_MIN={min}");
            };
            if offset % step != 0 {
                bail!(
                    "SLURM_ARRAY_TASK_ID={id} is not SLURM_ARRAY_TASK_MIN={min} plus a multiple \
                     of SLURM_ARRAY_TASK_STEP={step}: --shard-from-env needs an array of evenly \
                     spaced ids (e.g. --array=1-8); pass --shard i/N instead"
                );
            }
            let index = offset / step + 1;
            if index > count {
                bail!(
                    "SLURM_ARRAY_TASK_ID={id} is task {index} of the array, but \
                     SLURM_ARRAY_TASK_COUNT={count}: --shard-from-env needs an array of evenly \
                     spaced ids (e.g. --array=1-8); pass --shard i/N instead"
                );
            }
            (index, count)
        } else if let Some(rank) = number("SLURM_PROCID")? {
            let count = required(
                "SLURM_NTASKS",
                "SLURM_PROCID is set, so this is taken for an srun step",
            )?;
            if rank >= count {
                bail!("SLURM_PROCID={rank} must be below SLURM_NTASKS={count}");
            }
            (rank + 1, count)
        } else {
            bail!(
                "--shard-from-env needs SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT (a job \
                 array) or SLURM_PROCID and SLURM_NTASKS (an srun step), and none is set; \
                 pass --shard i/N outside Slurm"
            );
        };
        if count == 0 {
            bail!("the number of Slurm tasks is 0");
        }
        Ok(Self { index, count })
    }
}
