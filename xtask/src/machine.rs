//! The machine a run happens on, as reports and result files name it.

/// The CPU (model name, family and model from `/proc/cpuinfo`), its SIMD
/// width and core count, with a warning on first-generation Zen, whose
/// 256-bit operations run as two 128-bit halves: the goals assume full-width
/// AVX2, so there the floor column is the fairer yardstick.
pub fn description() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |key: &str| {
        info.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    let cpu = field("model name").unwrap_or_else(|| "unknown CPU".into());
    let (family, model) = (field("cpu family"), field("model"));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut out = cpu;
    if let (Some(f), Some(m)) = (&family, &model) {
        out += &format!(" (family {f}, model {m})");
    }
    out += &format!(", {}, {cores} logical cores", simd_width());
    let zen1 = info.contains("AuthenticAMD")
        && family.as_deref() == Some("23")
        && model
            .and_then(|m| m.parse::<u32>().ok())
            .is_some_and(|m| m < 0x30);
    if zen1 {
        out += ". This is a first-generation Zen (Zen/Zen+) CPU: each 256-bit \
                AVX operation runs as two 128-bit halves, so vectorised code gains \
                about half of what the goals (set for full-width AVX2) assume";
    }
    out
}

/// Whether the running CPU has vectors wider than 256 bits (AVX-512), which
/// the kernels use unless capped (`kameleon_core::simd`).
pub fn has_wider_vectors_than_256_bits() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        pulp::x86::V4::try_new().is_some()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The widest SIMD instruction set the running CPU offers to our kernels.
fn simd_width() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if has_wider_vectors_than_256_bits() {
            return "AVX-512";
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return "AVX2 + FMA";
        }
        "SSE2"
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        "no x86 SIMD"
    }
}

/// The 1-, 5- and 15-minute load averages from `/proc/loadavg`, if the
/// system has it.
pub fn load_average() -> Option<[f64; 3]> {
    parse_load_average(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

/// The first three fields of a `/proc/loadavg` line.
pub fn parse_load_average(text: &str) -> Option<[f64; 3]> {
    let mut fields = text.split_whitespace().map(str::parse::<f64>);
    let mut next = || fields.next()?.ok().filter(|v| v.is_finite() && *v >= 0.0);
    Some([next()?, next()?, next()?])
}
