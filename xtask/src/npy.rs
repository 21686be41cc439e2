//! Raw chains as NumPy `.npy` files (little-endian f64, C order, n × d):
//! written atomically, and read back with every header field and the body's
//! length checked, so a damaged file gives an error naming it.

use crate::files::write_atomic;
use anyhow::{Context, Result, bail, ensure};
use std::io::{Read, Write};
use std::path::Path;

/// The longest header we read: NumPy's own default limit
/// (`max_header_size`).
const MAX_HEADER: usize = 10_000;

/// The magic string that starts every `.npy` file.
pub const MAGIC: &[u8] = b"\x93NUMPY";

/// Writes row-major `samples` (n rows of `dim` values) as an n × d `<f8`
/// array, atomically.
pub fn write_chain(path: &Path, samples: &[f64], dim: usize) -> Result<()> {
    ensure!(
        dim > 0 && samples.len().is_multiple_of(dim),
        "{}: {} values do not form rows of {dim}",
        path.display(),
        samples.len()
    );
    write_atomic(path, |out| encode_chain(out, samples, dim))
}

/// Writes row-major `values` as a `<f8` array of `shape` (empty: a scalar),
/// atomically.
pub fn write_array(path: &Path, values: &[f64], shape: &[usize]) -> Result<()> {
    ensure!(
        shape.iter().product::<usize>() == values.len(),
        "{}: {} values do not fill the shape {shape:?}",
        path.display(),
        values.len()
    );
    let shape: Vec<u64> = shape.iter().map(|&s| s as u64).collect();
    write_atomic(path, |out| encode(out, values, &shape))
}

/// Writes the `.npy` encoding of `samples` as rows of `dim` (> 0) values.
pub fn encode_chain(out: &mut dyn Write, samples: &[f64], dim: usize) -> Result<()> {
    encode(out, samples, &[(samples.len() / dim) as u64, dim as u64])
}

/// Writes the `.npy` encoding of row-major `values` of `shape`: format 1.0,
/// the header dictionary NumPy writes (`'shape': (n, d)`, `(n,)` or `()`)
/// padded with spaces and a newline so that the data start at a multiple
/// of 64 bytes, then the values as little-endian f64.
fn encode(out: &mut dyn Write, values: &[f64], shape: &[u64]) -> Result<()> {
    out.write_all(&header_bytes(shape)?)?;
    let mut buffer = Vec::with_capacity(8 * values.len().min(1 << 16));
    for chunk in values.chunks(1 << 16) {
        buffer.clear();
        for v in chunk {
            buffer.extend_from_slice(&v.to_le_bytes());
        }
        out.write_all(&buffer)?;
    }
    Ok(())
}

/// The magic, version, header length and padded header dictionary of a
/// `<f8` C-order array of `shape`.
pub fn header_bytes(shape: &[u64]) -> Result<Vec<u8>> {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut dict = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}");
    // magic (6) + version (2) + length (2) + dictionary + '\n' ≡ 0 mod 64
    let unpadded = MAGIC.len() + 4 + dict.len() + 1;
    dict.extend(std::iter::repeat_n(
        ' ',
        unpadded.next_multiple_of(64) - unpadded,
    ));
    dict.push('\n');
    let length = u16::try_from(dict.len()).context("the .npy header is too long")?;
    let mut bytes = MAGIC.to_vec();
    bytes.extend([1, 0]);
    bytes.extend(length.to_le_bytes());
    bytes.extend(dict.as_bytes());
    Ok(bytes)
}

/// The shape of a chain file and where its data start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainHeader {
    /// Rows (draws).
    pub rows: usize,
    /// Columns (the dimension).
    pub cols: usize,
    /// The byte offset of the first value.
    pub data_offset: usize,
}

impl ChainHeader {
    /// The number of data bytes the shape needs, if it fits in memory.
    fn body_len(&self) -> Option<usize> {
        self.rows.checked_mul(self.cols)?.checked_mul(8)
    }

    /// Checks that a body of `len` bytes is exactly the shape's.
    fn check_body(&self, len: usize) -> Result<()> {
        match self.body_len() {
            Some(needed) if needed == len => Ok(()),
            Some(needed) => bail!(
                "the shape ({}, {}) needs {needed} data bytes but the file has {len} \
                 (a truncated or damaged file: delete it and rerun)",
                self.rows,
                self.cols
            ),
            None => bail!("the shape ({}, {}) is too large", self.rows, self.cols),
        }
    }
}

/// Reads a chain file: its values (row-major) and its dimension.
pub fn read_chain(path: &Path) -> Result<(Vec<f64>, usize)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    parse_chain(&bytes).with_context(|| format!("reading the chain {}", path.display()))
}

/// Reads a chain file's header and checks that the file has exactly the
/// data its shape needs (the values themselves are not read).
pub fn read_chain_header(path: &Path) -> Result<ChainHeader> {
    let checked = || -> Result<ChainHeader> {
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        let mut prefix = Vec::new();
        file.take((12 + MAX_HEADER) as u64)
            .read_to_end(&mut prefix)?;
        let header = parse_header(&prefix)?;
        let body = usize::try_from(len)?.saturating_sub(header.data_offset);
        header.check_body(body)?;
        Ok(header)
    };
    checked().with_context(|| format!("reading the chain {}", path.display()))
}

/// Parses a whole chain file held in memory.
pub fn parse_chain(bytes: &[u8]) -> Result<(Vec<f64>, usize)> {
    let header = parse_header(bytes)?;
    let body = &bytes[header.data_offset..];
    header.check_body(body.len())?;
    let values = body
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().expect("chunks of 8 bytes")))
        .collect();
    Ok((values, header.cols))
}

/// Parses the header at the start of `bytes` (which must hold all of it):
/// the magic string, a version 1–3, and a dictionary that says `<f8`, C
/// order and a 2-d shape with at least one column.
fn parse_header(bytes: &[u8]) -> Result<ChainHeader> {
    ensure!(
        bytes.len() >= 10 && bytes.starts_with(MAGIC),
        "not a .npy file (no NumPy magic string)"
    );
    let (major, minor) = (bytes[6], bytes[7]);
    let (len, offset) = match major {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 => {
            ensure!(bytes.len() >= 12, "truncated .npy header");
            let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            (usize::try_from(len)?, 12)
        }
        _ => bail!("unsupported .npy format version {major}.{minor}"),
    };
    ensure!(
        len <= MAX_HEADER,
        "the .npy header claims {len} bytes (at most {MAX_HEADER} allowed)"
    );
    let Some(text) = bytes.get(offset..offset + len) else {
        bail!("truncated .npy header");
    };
    let dict = HeaderDict::parse(text)?;
    ensure!(
        dict.descr == Some("<f8"),
        "the values must be little-endian f64 ('<f8'), found {:?}",
        dict.descr
    );
    ensure!(
        dict.fortran_order == Some(false),
        "the values must be in C order ('fortran_order': False)"
    );
    let Some(shape) = dict.shape else {
        bail!("the .npy header has no shape");
    };
    let &[rows, cols] = shape.as_slice() else {
        bail!("a chain must be a 2-d array (draws × dimension), found shape {shape:?}");
    };
    ensure!(cols >= 1, "a chain needs at least one column");
    Ok(ChainHeader {
        rows,
        cols,
        data_offset: offset + len,
    })
}

/// The fields of a `.npy` header dictionary that chains use.
#[derive(Debug, Default)]
struct HeaderDict<'a> {
    descr: Option<&'a str>,
    fortran_order: Option<bool>,
    shape: Option<Vec<usize>>,
}

impl<'a> HeaderDict<'a> {
    /// Parses `{'descr': '<f8', 'fortran_order': False, 'shape': (n, d), }`
    /// (any key order, any spacing, optional trailing commas), padded with
    /// spaces and a newline as NumPy writes it.
    fn parse(text: &'a [u8]) -> Result<Self> {
        let text = std::str::from_utf8(text).context("the .npy header is not text")?;
        let mut p = Parser { text, pos: 0 };
        let mut dict = HeaderDict::default();
        p.expect('{')?;
        loop {
            if p.eat('}') {
                break;
            }
            let key = p.string()?;
            p.expect(':')?;
            match key {
                "descr" => dict.descr = Some(p.string()?),
                "fortran_order" => {
                    dict.fortran_order = Some(match p.word() {
                        "True" => true,
                        "False" => false,
                        other => bail!("fortran_order must be True or False, found `{other}`"),
                    })
                }
                "shape" => dict.shape = Some(p.tuple()?),
                other => bail!("unexpected key `{other}` in the .npy header"),
            }
            if !p.eat(',') {
                p.expect('}')?;
                break;
            }
        }
        p.skip_space();
        ensure!(
            p.pos == text.len(),
            "unexpected text after the .npy header's dictionary"
        );
        Ok(dict)
    }
}

/// A cursor over a header's text.
struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    /// Consumes `c` (after spaces) if it comes next.
    fn eat(&mut self, c: char) -> bool {
        self.skip_space();
        if self.rest().starts_with(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<()> {
        ensure!(
            self.eat(c),
            "malformed .npy header: expected `{c}` at byte {}",
            self.pos
        );
        Ok(())
    }

    /// A quoted string without escapes.
    fn string(&mut self) -> Result<&'a str> {
        self.skip_space();
        let Some(quote) = self
            .rest()
            .chars()
            .next()
            .filter(|&c| c == '\'' || c == '"')
        else {
            bail!(
                "malformed .npy header: expected a string at byte {}",
                self.pos
            );
        };
        let body = &self.rest()[1..];
        let Some(end) = body.find(quote) else {
            bail!("malformed .npy header: unterminated string");
        };
        self.pos += end + 2;
        Ok(&body[..end])
    }

    /// A run of letters.
    fn word(&mut self) -> &'a str {
        self.skip_space();
        let rest = self.rest();
        let end = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        self.pos += end;
        &rest[..end]
    }

    /// A tuple of non-negative integers: `()`, `(n,)`, `(n, d)`, `(n, d, )`.
    fn tuple(&mut self) -> Result<Vec<usize>> {
        self.expect('(')?;
        let mut values = Vec::new();
        loop {
            if self.eat(')') {
                return Ok(values);
            }
            let rest = self.rest();
            let end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            let digits = &rest[..end];
            let value = digits.parse::<usize>().with_context(|| {
                format!("malformed .npy shape: `{digits}` at byte {}", self.pos)
            })?;
            self.pos += end;
            values.push(value);
            ensure!(values.len() <= 32, "the .npy shape has too many dimensions");
            if !self.eat(',') {
                self.expect(')')?;
                return Ok(values);
            }
        }
    }
}
