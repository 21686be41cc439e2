//! Serde for a dense `faer::Mat<f64>` (faer is built without its serde
//! feature): the shape and the column-major entries, bit-exact in binary
//! formats such as postcard. The serialisers write a triangle-stored matrix
//! (symmetric or lower triangular) in full, with a consistent upper
//! triangle.

use faer::Mat;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The serialised form: rows, columns and the column-major entries.
#[derive(Serialize, Deserialize)]
struct Dense {
    nrows: usize,
    ncols: usize,
    entries: Vec<f64>,
}

/// Serialises the symmetric matrix whose lower triangle (with the diagonal)
/// `mat` holds, whatever its strict upper triangle holds: the upper
/// triangle is written as the mirror of the lower one, so the stored matrix
/// is self-consistent. Read back with [`deserialize`].
pub(crate) fn serialize_symmetric_lower<S: Serializer>(
    mat: &Mat<f64>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serialize_entries(mat, |i, j| mat[(i.max(j), i.min(j))], serializer)
}

/// Serialises the lower triangle (with the diagonal) of `mat` and zeros
/// above it, whatever its strict upper triangle holds: a lower-triangular
/// factor kept in a square matrix. Read back with [`deserialize`].
pub(crate) fn serialize_lower_triangular<S: Serializer>(
    mat: &Mat<f64>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serialize_entries(
        mat,
        |i, j| if i >= j { mat[(i, j)] } else { 0.0 },
        serializer,
    )
}

/// Serialises the shape of `mat` and `entry(i, j)` in column-major order.
fn serialize_entries<S: Serializer>(
    mat: &Mat<f64>,
    entry: impl Fn(usize, usize) -> f64,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let entries = (0..mat.ncols())
        .flat_map(|j| (0..mat.nrows()).map(move |i| (i, j)))
        .map(|(i, j)| entry(i, j))
        .collect();
    Dense {
        nrows: mat.nrows(),
        ncols: mat.ncols(),
        entries,
    }
    .serialize(serializer)
}

/// Reads a matrix written by any of the serialisers above.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Mat<f64>, D::Error> {
    let dense = Dense::deserialize(deserializer)?;
    if dense.nrows.checked_mul(dense.ncols) != Some(dense.entries.len()) {
        return Err(serde::de::Error::custom(
            "matrix entries do not match its shape",
        ));
    }
    Ok(Mat::from_fn(dense.nrows, dense.ncols, |i, j| {
        dense.entries[i + j * dense.nrows]
    }))
}
