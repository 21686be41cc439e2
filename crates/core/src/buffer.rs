//! Buffers whose size comes from the caller: sized with checked arithmetic
//! and allocated fallibly, so that an absurd size (2⁴⁰ features, a
//! dimension of 10⁶ with a d × d matrix) is an error the caller can report
//! instead of an abort of the whole process (which, inside Python, kills
//! the interpreter).

/// A buffer that cannot be allocated: its size overflows the address space,
/// or the allocator refused it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {values} values ({bytes}), more than can be allocated")]
pub struct BufferTooLarge {
    /// What the buffer holds (e.g. "the features' frequencies, m × d").
    pub what: &'static str,
    /// The number of `f64` values asked for (saturated at `u128::MAX`).
    pub values: u128,
    /// The same size in readable bytes, e.g. "16 TiB".
    pub bytes: String,
}

impl BufferTooLarge {
    fn new(what: &'static str, values: u128) -> Self {
        Self {
            what,
            values,
            bytes: readable_bytes(values.saturating_mul(8)),
        }
    }
}

fn readable_bytes(bytes: u128) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit + 1 == UNITS.len() && value >= 1024.0 {
        return format!("{bytes} B");
    }
    format!("{value:.0} {}", UNITS[unit])
}

/// The number of `f64` values in a buffer of the given `factors` (e.g.
/// `[rows, cols]`), or an error if the product overflows or exceeds the
/// largest allocation (`isize::MAX` bytes).
///
/// ```
/// use kameleon_core::buffer::checked_len;
/// assert_eq!(checked_len("a 3 × 4 matrix", &[3, 4]), Ok(12));
/// assert!(checked_len("a huge matrix", &[1 << 40, 1 << 40]).is_err());
/// ```
pub fn checked_len(what: &'static str, factors: &[usize]) -> Result<usize, BufferTooLarge> {
    let exact = factors
        .iter()
        .try_fold(1u128, |acc, &f| acc.checked_mul(f as u128));
    match exact {
        Some(values) if values <= (isize::MAX as u128) / 8 => Ok(values as usize),
        Some(values) => Err(BufferTooLarge::new(what, values)),
        None => Err(BufferTooLarge::new(what, u128::MAX)),
    }
}

/// A zeroed buffer of the product of `factors` values, allocated fallibly:
/// an error, not an abort, when the size overflows or the allocator
/// refuses it.
///
/// ```
/// use kameleon_core::buffer::zeros;
/// assert_eq!(zeros("a 2 × 3 matrix", &[2, 3]).unwrap(), vec![0.0; 6]);
/// assert!(zeros("2⁴⁰ × 2⁴⁰ values", &[1 << 40, 1 << 40]).is_err());
/// ```
pub fn zeros(what: &'static str, factors: &[usize]) -> Result<Vec<f64>, BufferTooLarge> {
    let len = checked_len(what, factors)?;
    let mut buffer = Vec::new();
    buffer
        .try_reserve_exact(len)
        .map_err(|_| BufferTooLarge::new(what, len as u128))?;
    buffer.resize(len, 0.0);
    Ok(buffer)
}

/// Checks, before a structure allocates its buffers, that they can be had:
/// the total of the products in `shapes` (one `&[rows, cols, …]` per
/// buffer) must not overflow and the allocator must grant that many `f64`s
/// at once (asked and released again; nothing is written). Constructors
/// whose buffers are many and small call this once instead of allocating
/// each fallibly.
///
/// ```
/// use kameleon_core::buffer::ensure_room;
/// assert!(ensure_room("a d × d and a d × n buffer", &[&[8, 8], &[8, 1000]]).is_ok());
/// assert!(ensure_room("a d × n buffer", &[&[4, 1 << 62]]).is_err());
/// ```
pub fn ensure_room(what: &'static str, shapes: &[&[usize]]) -> Result<(), BufferTooLarge> {
    let mut total = 0usize;
    for shape in shapes {
        let len = checked_len(what, shape)?;
        total = match total.checked_add(len) {
            Some(t) => t,
            None => return Err(BufferTooLarge::new(what, u128::MAX)),
        };
    }
    let total = checked_len(what, &[total])?;
    let mut probe: Vec<f64> = Vec::new();
    probe
        .try_reserve_exact(total)
        .map_err(|_| BufferTooLarge::new(what, total as u128))
}

/// Reserves room for `additional` more values in `buffer` fallibly (an
/// error, not an abort, when the allocator refuses).
pub fn reserve(
    what: &'static str,
    buffer: &mut Vec<f64>,
    additional: usize,
) -> Result<(), BufferTooLarge> {
    let total = buffer
        .len()
        .checked_add(additional)
        .map_or(u128::MAX, |t| t as u128);
    if total > (isize::MAX as u128) / 8 {
        return Err(BufferTooLarge::new(what, total));
    }
    buffer
        .try_reserve(additional)
        .map_err(|_| BufferTooLarge::new(what, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_that_overflow_or_exceed_the_address_space_are_errors() {
        assert_eq!(checked_len("x", &[]), Ok(1));
        assert_eq!(checked_len("x", &[0, usize::MAX]), Ok(0));
        // wraps in usize arithmetic: (2⁶²)·4 = 2⁶⁴ ≡ 0
        let wrapped = checked_len("x", &[1 << 62, 4]).unwrap_err();
        assert_eq!(wrapped.values, 1 << 64);
        assert!(
            wrapped
                .to_string()
                .starts_with("x: 18446744073709551616 values (128 EiB)"),
            "{wrapped}"
        );
        // fits in usize but not in isize::MAX bytes of f64
        assert!(checked_len("x", &[1 << 61]).is_err());
        assert!(checked_len("x", &[usize::MAX, usize::MAX, 2]).is_err());
    }

    #[test]
    fn a_refused_allocation_is_an_error_not_an_abort() {
        // 2⁵⁸ f64s (2 EiB) pass the address-space check but no allocator
        // grants them
        let err = zeros("the test's buffer", &[1 << 58]).unwrap_err();
        assert_eq!(err.bytes, "2 EiB");
        let mut buffer = vec![1.0];
        assert!(reserve("the test's buffer", &mut buffer, 1 << 58).is_err());
        assert!(reserve("the test's buffer", &mut buffer, usize::MAX).is_err());
        reserve("the test's buffer", &mut buffer, 3).unwrap();
        assert!(buffer.capacity() >= 4);
        // each of two 2⁵⁷-value buffers passes the address-space check,
        // their sum is refused
        assert!(ensure_room("two buffers", &[&[1 << 57], &[1 << 57]]).is_err());
        assert!(ensure_room("two buffers", &[&[usize::MAX], &[2]]).is_err());
        ensure_room("two buffers", &[&[1000, 1000], &[]]).unwrap();
    }

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(readable_bytes(0), "0 B");
        assert_eq!(readable_bytes(16 << 40), "16 TiB");
        assert_eq!(readable_bytes(1536), "2 KiB");
    }
}
