//! Tests of `xtask::npy`.

use crate::fuzz::{for_each_case, mutated, random_bytes};
use rand::RngExt;
use xtask::npy::*;

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("xtask-npy-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A valid 5 × 3 chain file.
fn valid_file() -> (Vec<u8>, Vec<f64>) {
    let samples: Vec<f64> = (0..15).map(|i| i as f64 * 0.5 - 3.0).collect();
    let mut bytes = Vec::new();
    encode_chain(&mut bytes, &samples, 3).unwrap();
    (bytes, samples)
}

/// The header is byte for byte the one NumPy writes for an n × d `<f8`
/// array (spelled out here from the format's definition: magic, version
/// 1.0, little-endian u16 length, the dictionary padded with spaces to a
/// 64-byte boundary and a newline); the values follow as little-endian
/// f64 and read back unchanged.
#[test]
fn chains_round_trip_with_the_numpy_header() {
    let dir = temp_dir("round-trip");
    let path = dir.join("chain.npy");
    let samples: Vec<f64> = (0..15).map(|i| i as f64 * 0.5 - 3.0).collect();
    write_chain(&path, &samples, 3).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (5, 3), }";
    let mut expected = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
    expected.extend(dict.as_bytes());
    expected.extend([b' '; 128 - 10 - 59 - 1]);
    expected.push(b'\n');
    assert_eq!(dict.len(), 59);
    assert_eq!(&bytes[..128], &expected[..]);
    for (i, v) in samples.iter().enumerate() {
        let at = 128 + 8 * i;
        assert_eq!(bytes[at..at + 8], v.to_le_bytes());
    }
    assert_eq!(bytes.len(), 128 + 15 * 8);
    assert_eq!(read_chain(&path).unwrap(), (samples.clone(), 3));
    let h = read_chain_header(&path).unwrap();
    assert_eq!(
        (h.rows, h.cols, h.data_offset + 15 * 8),
        (5, 3, bytes.len())
    );
    let err = format!("{:#}", write_chain(&path, &samples[..14], 3).unwrap_err());
    assert!(err.contains("chain.npy"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One-dimensional arrays and scalars get NumPy's `(n,)` and `()`.
#[test]
fn vectors_and_scalars_get_numpy_shapes() {
    for (shape, text) in [
        (&[7u64][..], "(7,)"),
        (&[][..], "()"),
        (&[2, 3, 4][..], "(2, 3, 4)"),
    ] {
        let bytes = header_bytes(shape).unwrap();
        assert_eq!(bytes.len() % 64, 0);
        assert_eq!(*bytes.last().unwrap(), b'\n');
        let dict = String::from_utf8(bytes[10..].to_vec()).unwrap();
        assert!(dict.starts_with(&format!(
            "{{'descr': '<f8', 'fortran_order': False, 'shape': {text}, }}"
        )));
        assert_eq!(
            usize::from(u16::from_le_bytes([bytes[8], bytes[9]])),
            dict.len()
        );
    }
}

/// A truncated file (a torn write) and a file with bytes appended are
/// rejected by both readers, naming the file.
#[test]
fn torn_chains_are_rejected() {
    let (bytes, _) = valid_file();
    let dir = temp_dir("torn");
    let path = dir.join("0.npy");
    for len in [0, 9, 60, bytes.len() - 8, bytes.len() - 1, bytes.len() + 8] {
        let mut b = bytes.clone();
        b.resize(len, 0);
        std::fs::write(&path, &b).unwrap();
        for err in [
            read_chain(&path).map(|_| ()).unwrap_err(),
            read_chain_header(&path).map(|_| ()).unwrap_err(),
        ] {
            assert!(format!("{err:#}").contains("0.npy"), "{err:#}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Headers NumPy may write for other arrays are refused with a reason.
#[test]
fn other_arrays_are_refused() {
    let header = |dict: &str| {
        let mut b = MAGIC.to_vec();
        b.extend([1, 0]);
        b.extend((dict.len() as u16).to_le_bytes());
        b.extend(dict.as_bytes());
        b
    };
    for (dict, why) in [
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1), }",
            "<f8",
        ),
        (
            "{'descr': '<f8', 'fortran_order': True, 'shape': (0, 1), }",
            "C order",
        ),
        (
            "{'descr': '<f8', 'fortran_order': False, 'shape': (0,), }",
            "2-d",
        ),
        (
            "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 0), }",
            "column",
        ),
        (
            "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999, 1), }",
            "shape",
        ),
        (
            "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
            "too large",
        ),
    ] {
        let err = format!("{:#}", parse_chain(&header(dict)).unwrap_err());
        assert!(err.contains(why), "{dict}: {err}");
    }
    let ok = "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 2), }  \n";
    assert_eq!(parse_chain(&header(ok)).unwrap(), (vec![], 2));
}

/// Arbitrary bytes give an error or a chain, never a panic.
#[test]
fn arbitrary_bytes_never_panic() {
    for_each_case(
        1,
        512,
        |rng| random_bytes(rng, 256, &[]),
        |bytes| {
            let _ = parse_chain(bytes);
            let mut with_magic = MAGIC.to_vec();
            with_magic.extend(bytes);
            let _ = parse_chain(&with_magic);
        },
    );
}

/// Valid files with bytes overwritten, cut or inserted give an error or a
/// chain of the right size, never a panic.
#[test]
fn mutated_chains_never_panic() {
    for_each_case(
        2,
        512,
        |rng| {
            let bytes = mutated(rng, valid_file().0, 7);
            let cut = rng.random_range(0..=bytes.len());
            (bytes, cut)
        },
        |(bytes, cut)| {
            if let Ok((values, cols)) = parse_chain(bytes) {
                assert!(cols >= 1 && values.len() % cols == 0);
            }
            let _ = parse_chain(&bytes[..*cut]);
        },
    );
}
