//! Raw chains as NumPy `.npy` files (little-endian f64, C order, n × d).

use anyhow::{Context, Result, ensure};
use npyz::WriterBuilder;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

/// Writes row-major `samples` (n rows of `dim` values) as an n × d `<f8` array.
pub fn write_chain(path: &Path, samples: &[f64], dim: usize) -> Result<()> {
    ensure!(
        dim > 0 && samples.len().is_multiple_of(dim),
        "{} values do not form rows of {dim}",
        samples.len()
    );
    let rows = (samples.len() / dim) as u64;
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = BufWriter::new(file);
    let mut writer = npyz::WriteOptions::<f64>::new()
        .default_dtype()
        .shape(&[rows, dim as u64])
        .writer(&mut out)
        .begin_nd()?;
    writer.extend(samples.iter().copied())?;
    writer.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file reads back (with npyz's reader) as the same n × d array with
    /// the little-endian f64 descriptor NumPy expects.
    #[test]
    fn chains_round_trip_with_the_numpy_header() {
        let dir = std::env::temp_dir().join(format!("xtask-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("chain.npy");
        let samples: Vec<f64> = (0..15).map(|i| i as f64 * 0.5 - 3.0).collect();
        write_chain(&path, &samples, 3).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..6], b"\x93NUMPY");
        let header = String::from_utf8_lossy(&bytes[..128]);
        assert!(header.contains("'descr': '<f8'"), "{header}");
        assert!(header.contains("'fortran_order': False"), "{header}");
        // NumPy accepts the trailing comma npyz writes: (5, 3, ).
        assert!(header.contains("'shape': (5, 3"), "{header}");
        let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
        assert_eq!(npy.shape(), &[5, 3]);
        let back: Vec<f64> = npy.into_vec().unwrap();
        assert_eq!(back, samples);
        assert!(write_chain(&path, &samples[..14], 3).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
