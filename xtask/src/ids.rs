//! The names and seeds of jobs: a job's record file stem and the seed of a
//! study replicate's streams, stable across platforms, Rust versions, shard
//! counts and thread counts.

/// The id of a job (its record's file stem).
pub fn job_id(target: &str, sampler: &str, setting: &str, chain: usize) -> String {
    let setting = if setting.is_empty() { "-" } else { setting };
    sanitize(&format!("{target}__{sampler}__{setting}__{chain}"))
}

/// `s` with every character other than ASCII letters, digits and `-_.=`
/// replaced by `_`, safe as a file name.
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.=".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// SplitMix64 finaliser: decorrelates nearby seeds.
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a hash of a string: stable across platforms and Rust versions.
pub fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The id of a study's replicate (its record's file stem).
pub fn replicate_id(replicate: usize) -> String {
    format!("replicate-{replicate}")
}

/// The seed of a study's replicate: from the master seed, the experiment's
/// name and the replicate's index.
pub fn replicate_seed(master: u64, experiment: &str, replicate: usize) -> u64 {
    splitmix64(splitmix64(master ^ fnv1a(experiment)) ^ replicate as u64)
}
