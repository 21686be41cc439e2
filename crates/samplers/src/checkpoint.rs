//! Checked, atomic checkpoint files.
//!
//! A checkpoint file is a header followed by a postcard payload:
//!
//! | bytes | content |
//! | --- | --- |
//! | 8 | the magic `KAMELEON` |
//! | 4 | the format version (little-endian u32) |
//! | 4 | the length k of the kind (little-endian u32) |
//! | k | the kind, UTF-8: what the payload holds, chosen by the writer |
//! | 8 | the payload length (little-endian u64) |
//! | 8 | the CRC-64 (ECMA-182) of every byte before it and of the payload |
//! | … | the payload |
//!
//! The CRC detects every error burst of up to 64 bits, so in particular every
//! single-byte change of the file. [`save`] writes to a fresh temporary file
//! in the same directory, syncs it, renames it over the destination and syncs
//! the directory: a reader sees the old file or the new one, never a mix,
//! even with several writers on one path. [`load`] checks everything before
//! decoding and names the file in every error.

use crate::error::{CheckpointProblem, Result, SamplerError};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The first bytes of every checkpoint file.
const MAGIC: &[u8; 8] = b"KAMELEON";

/// The format version [`save`] writes and [`load`] reads.
pub const FORMAT_VERSION: u32 = 4;

/// Writes `value` to `path` atomically: header (magic, format version, `kind`,
/// payload length, checksum), postcard payload, written to a unique temporary
/// name in the same directory, fsynced, renamed over `path`, dir fsynced.
pub fn save<T: Serialize + ?Sized>(path: &Path, kind: &str, value: &T) -> Result<()> {
    let payload = postcard::to_stdvec(value).map_err(|e| {
        problem(
            path,
            CheckpointProblem::Unencodable {
                reason: e.to_string(),
            },
        )
    })?;
    let kind_len = u32::try_from(kind.len()).map_err(|_| {
        problem(
            path,
            CheckpointProblem::Unencodable {
                reason: format!("kind of {} bytes is too long", kind.len()),
            },
        )
    })?;
    let mut bytes = Vec::with_capacity(32 + kind.len() + payload.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&kind_len.to_le_bytes());
    bytes.extend_from_slice(kind.as_bytes());
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    let crc = crc64_update(crc64_update(CRC_INIT, &bytes), &payload) ^ CRC_INIT;
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes.extend_from_slice(&payload);
    write_atomically(path, &bytes).map_err(|e| problem(path, CheckpointProblem::Io(e)))
}

/// Reads a file written by `save`, checking magic, version, kind, length and
/// checksum; every error names the file and says what is wrong (not a
/// checkpoint / other version / holds a `<kind>` not a `<wanted>` / truncated /
/// corrupt (checksum) / trailing bytes / undecodable payload).
pub fn load<T: DeserializeOwned>(path: &Path, kind: &str) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|e| problem(path, CheckpointProblem::Io(e)))?;
    decode(&bytes, kind).map_err(|p| problem(path, p))
}

/// Checks and decodes the bytes of a checkpoint file.
fn decode<T: DeserializeOwned>(
    bytes: &[u8],
    wanted: &str,
) -> std::result::Result<T, CheckpointProblem> {
    let mut reader = Reader { bytes, at: 0 };
    let magic = reader.take(MAGIC.len());
    if magic != Some(MAGIC.as_slice()) {
        return Err(CheckpointProblem::NotACheckpoint);
    }
    let version = reader.u32()?;
    if version != FORMAT_VERSION {
        return Err(CheckpointProblem::Version {
            found: version,
            expected: FORMAT_VERSION,
        });
    }
    let kind_len = reader.u32()? as usize;
    let kind = reader.take(kind_len).ok_or(CheckpointProblem::Truncated)?;
    let payload_len = reader.u64()?;
    let checked = reader.at;
    let crc = reader.u64()?;
    let rest = bytes.len() - reader.at;
    match u64::try_from(rest) {
        Ok(rest) if rest < payload_len => return Err(CheckpointProblem::Truncated),
        Ok(rest) if rest > payload_len => {
            return Err(CheckpointProblem::TrailingBytes {
                extra: rest - payload_len,
            });
        }
        _ => {}
    }
    let payload = &bytes[reader.at..];
    if crc64_update(crc64_update(CRC_INIT, &bytes[..checked]), payload) ^ CRC_INIT != crc {
        return Err(CheckpointProblem::Corrupt);
    }
    if kind != wanted.as_bytes() {
        return Err(CheckpointProblem::WrongKind {
            found: String::from_utf8_lossy(kind).into_owned(),
            wanted: wanted.to_string(),
        });
    }
    let (value, unread) =
        postcard::take_from_bytes(payload).map_err(|e| CheckpointProblem::Undecodable {
            reason: e.to_string(),
        })?;
    if !unread.is_empty() {
        return Err(CheckpointProblem::Undecodable {
            reason: format!("{} bytes left after the value", unread.len()),
        });
    }
    Ok(value)
}

/// A cursor over the header's fields.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let field = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(field)
    }

    fn array<const N: usize>(&mut self) -> std::result::Result<[u8; N], CheckpointProblem> {
        let field = self.take(N).ok_or(CheckpointProblem::Truncated)?;
        Ok(field.try_into().expect("take returns N bytes"))
    }

    fn u32(&mut self) -> std::result::Result<u32, CheckpointProblem> {
        self.array().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> std::result::Result<u64, CheckpointProblem> {
        self.array().map(u64::from_le_bytes)
    }
}

fn problem(path: &Path, problem: CheckpointProblem) -> SamplerError {
    SamplerError::Checkpoint {
        path: path.to_path_buf(),
        problem,
    }
}

/// Distinguishes the temporary files of one process.
static TEMPORARY_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to a new temporary file next to `path`, syncs it, renames
/// it over `path` and syncs the directory.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file")
    })?;
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        TEMPORARY_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = dir.join(tmp_name);
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut file| {
            file.write_all(bytes)?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        // best effort: the temporary file is ours and useless now
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    remove_stale_temporaries(&dir, name);
    sync_dir(&dir)
}

/// Removes the temporary files of earlier saves to the same name whose
/// process has ended (killed between creating and renaming its file):
/// `.<name>.<pid>.<counter>.tmp` with a pid other than ours that no longer
/// runs. Best effort; files of running processes are theirs to finish.
fn remove_stale_temporaries(dir: &Path, name: &std::ffi::OsStr) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{}.", name.to_string_lossy());
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(rest) = file
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix))
            .and_then(|r| r.strip_suffix(".tmp"))
        else {
            continue;
        };
        let Some((pid, counter)) = rest.split_once('.') else {
            continue;
        };
        if let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), counter.parse::<u64>())
            && pid != std::process::id()
            && !process_runs(pid)
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether process `pid` runs (Linux: it has a `/proc` entry).
#[cfg(target_os = "linux")]
fn process_runs(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Elsewhere a process cannot be looked up portably: assume it runs, so
/// that no file another process may still rename is removed.
#[cfg(not(target_os = "linux"))]
fn process_runs(_pid: u32) -> bool {
    true
}

/// Makes the rename durable (directories can be opened and synced on Unix).
#[cfg(unix)]
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Directories cannot be synced portably elsewhere; the rename is still atomic.
#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> std::io::Result<()> {
    Ok(())
}

/// The CRC-64/XZ register's initial value (and final xor).
const CRC_INIT: u64 = u64::MAX;

/// The reflected ECMA-182 polynomial.
const CRC_POLY: u64 = 0xC96C_5795_D787_0F42;

/// The byte-at-a-time table of the reflected CRC-64.
const CRC_TABLE: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ CRC_POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// Feeds `bytes` into the CRC-64 register `crc`.
fn crc64_update(mut crc: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        crc = CRC_TABLE[((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_matches_the_standard_check_value() {
        // CRC-64/XZ of "123456789" is 0x995DC9BBDF1939FA (the catalogue's check value)
        let crc = crc64_update(CRC_INIT, b"123456789") ^ CRC_INIT;
        assert_eq!(crc, 0x995D_C9BB_DF19_39FA);
    }
}
