//! Serde for a dense `faer::Mat<f64>` (faer is built without its serde
//! feature): the shape and the column-major entries, bit-exact in binary
//! formats such as postcard.

use faer::Mat;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The serialised form: rows, columns and the column-major entries.
#[derive(Serialize, Deserialize)]
struct Dense {
    nrows: usize,
    ncols: usize,
    entries: Vec<f64>,
}

pub(crate) fn serialize<S: Serializer>(mat: &Mat<f64>, serializer: S) -> Result<S::Ok, S::Error> {
    let entries = (0..mat.ncols())
        .flat_map(|j| (0..mat.nrows()).map(move |i| mat[(i, j)]))
        .collect();
    Dense {
        nrows: mat.nrows(),
        ncols: mat.ncols(),
        entries,
    }
    .serialize(serializer)
}

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
