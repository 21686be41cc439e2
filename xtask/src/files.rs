//! Output files: every file is written atomically (a temporary file in the
//! same directory, flushed to disk and renamed over the target), and an
//! experiment's output directory is guarded by an OS advisory lock so that
//! two runs never write into it at once.
//!
//! A whole run (or a merge) holds the directory's lock exclusively. A shard
//! `i/N` with `N > 1` holds it shared, plus an exclusive lock of its own
//! shard, so the shards of a job array may share one `--out` while a whole
//! run, a merge or a second copy of the same shard is refused. The locks are
//! released by the operating system when their process ends, however it ends.

use anyhow::{Context, Result, anyhow, bail};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Numbers the temporary files of this process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The file name of the lock of an experiment's output directory.
pub const LOCK_FILE: &str = ".lock";

/// A temporary name beside `path`, unique to this process and call: a
/// hidden file ending in `.tmp` (never taken for a record or a chain).
pub fn temp_path(path: &Path) -> Result<PathBuf> {
    temp_beside(path, "")
}

/// A hidden name beside `path`, unique to this process and call, ending
/// in `.tmp` (after `.<what>`, if `what` is not empty).
fn temp_beside(path: &Path, what: &str) -> Result<PathBuf> {
    let name = path.file_name().ok_or_else(|| {
        anyhow!(
            "{} has no file name to put a temporary name beside",
            path.display()
        )
    })?;
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let what = if what.is_empty() {
        String::new()
    } else {
        format!(".{what}")
    };
    Ok(path.with_file_name(format!(
        ".{}.{}.{n}{what}.tmp",
        name.to_string_lossy(),
        std::process::id()
    )))
}

/// Writes `path` atomically: `write` fills a temporary file in the same
/// directory, which is flushed to disk and renamed over `path`, so that
/// readers (and a run after a crash) see the old file or the new one, never
/// a torn one. The temporary file is removed if anything fails.
pub fn write_atomic(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let tmp = temp_path(path)?;
    let written = (|| -> Result<()> {
        let file = File::create_new(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut out = BufWriter::new(file);
        write(&mut out).with_context(|| format!("writing {}", tmp.display()))?;
        let file = out
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| format!("writing {}", tmp.display()))?;
        file.sync_all()
            .with_context(|| format!("flushing {} to disk", tmp.display()))?;
        std::fs::rename(&tmp, path)
            .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.with_context(|| format!("writing {}", path.display()))?;
    // The rename itself survives a power cut only once the directory is synced.
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        File::open(parent)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("flushing directory {} to disk", parent.display()))?;
    }
    Ok(())
}

/// Writes `bytes` to `path` atomically (see [`write_atomic`]).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic(path, |w| Ok(w.write_all(bytes)?))
}

/// Copies `from` to `to` atomically (see [`write_atomic`]).
pub fn copy_file(from: &Path, to: &Path) -> Result<()> {
    let mut source = File::open(from).with_context(|| format!("opening {}", from.display()))?;
    write_atomic(to, |w| {
        std::io::copy(&mut source, w).with_context(|| format!("reading {}", from.display()))?;
        Ok(())
    })
}

/// Whether `name` is one of [`write_atomic`]'s temporary files.
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

/// Removes the temporary files that killed runs left under `dir`. Call it
/// only while holding `dir`'s lock exclusively (no other process writes
/// there then).
pub fn remove_stale_temps(dir: &Path) -> Result<()> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).with_context(|| format!("listing {}", d.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("listing {}", d.display()))?;
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            } else if is_temp_name(&entry.file_name().to_string_lossy()) {
                std::fs::remove_file(&path)
                    .with_context(|| format!("removing {}", path.display()))?;
            }
        }
    }
    Ok(())
}

/// Creates `dir` and its parents, naming it in the error.
pub fn create_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating directory {}", dir.display()))
}

/// How a run uses an experiment's output directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A whole run or a merge: nobody else may write there.
    Whole,
    /// Shard `index` of `count` (`count > 1`): other shards may write
    /// there too, but no whole run and no second copy of this shard.
    Shard {
        /// 1-based index.
        index: usize,
        /// Number of shards.
        count: usize,
    },
}

/// The lock of an experiment's output directory, released when dropped (or
/// when the process ends).
#[derive(Debug)]
pub struct DirLock {
    _files: Vec<File>,
}

/// Who holds a lock: the pid, the host and the start time, and the command.
fn holder_line() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "an unknown host".into());
    let command: Vec<String> = std::env::args().collect();
    format!(
        "pid {} on {host} since {} (`{}`)",
        std::process::id(),
        utc_now(),
        command.join(" ")
    )
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_now() -> String {
    utc(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()))
}

/// `secs` after the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian calendar).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn open_lock_file(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("opening the lock file {}", path.display()))
}

/// Records this process as the holder of the lock `file` at `path`.
fn write_holder(file: &mut File, path: &Path) -> Result<()> {
    file.set_len(0)
        .and_then(|()| {
            use std::io::Seek;
            file.seek(std::io::SeekFrom::Start(0))?;
            writeln!(file, "{}", holder_line())
        })
        .with_context(|| format!("writing the lock file {}", path.display()))
}

/// What a lock file says about its holder.
fn read_holder(path: &Path) -> String {
    let mut text = String::new();
    let _ = File::open(path).and_then(|mut f| f.read_to_string(&mut text));
    let text = text.trim();
    if text.is_empty() {
        "another process".into()
    } else {
        text.to_string()
    }
}

/// Whether `file` could be locked as asked (`Ok(false)`: someone holds it).
fn try_lock(file: &File, path: &Path, shared: bool) -> Result<bool> {
    let attempt = if shared {
        file.try_lock_shared()
    } else {
        file.try_lock()
    };
    match attempt {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(anyhow!(
            "cannot lock {}: {e} (the filesystem may not support file locks; \
             use an --out on a local disk)",
            path.display()
        )),
    }
}

/// The lock file of shard `index` of `count` in `dir`.
fn shard_lock_path(dir: &Path, index: usize, count: usize) -> PathBuf {
    dir.join(format!("{LOCK_FILE}-shard-{index}-of-{count}"))
}

/// The holders of the shard locks in `dir` that are held now.
fn shard_holders(dir: &Path) -> Vec<String> {
    let prefix = format!("{LOCK_FILE}-shard-");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut holders: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
        })
        .filter(|p| {
            File::open(p)
                .ok()
                .is_some_and(|f| matches!(f.try_lock_shared(), Err(TryLockError::WouldBlock)))
        })
        .map(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            format!("{} ({})", read_holder(&p), name.unwrap_or_default())
        })
        .collect();
    holders.sort();
    holders
}

/// The advice in a lock error.
fn lock_advice(path: &Path) -> String {
    format!(
        "wait for it to finish, or write elsewhere with --out. The lock is released when \
         its process exits; if that process is gone and the lock stays (a filesystem that \
         keeps locks of dead processes), delete {}",
        path.display()
    )
}

/// Locks the experiment output directory `dir` (which must exist) for
/// `access`; fails at once, naming the holder, if the lock is taken.
///
/// First puts back a `dir` that a killed [`replace_dir`] left renamed
/// aside (see [`restore_interrupted_replacement`]); with [`Access::Whole`],
/// then removes what killed replacements of `dir` left beside it (their
/// staging directories and old copies), which nobody else can be writing
/// while the lock is held.
pub fn lock_dir(dir: &Path, access: Access) -> Result<DirLock> {
    restore_interrupted_replacement(dir)?;
    if !dir.is_dir() {
        bail!("{} does not exist (run `reproduce` first)", dir.display());
    }
    let path = dir.join(LOCK_FILE);
    let mut file = open_lock_file(&path)?;
    match access {
        Access::Whole => {
            if !try_lock(&file, &path, false)? {
                let holders = shard_holders(dir);
                let holder = if holders.is_empty() {
                    read_holder(&path)
                } else {
                    format!("running shard(s): {}", holders.join("; "))
                };
                bail!(
                    "{} is in use: its lock {} is held by {holder}; {}",
                    dir.display(),
                    path.display(),
                    lock_advice(&path)
                );
            }
            write_holder(&mut file, &path)?;
            for (leftover, _) in replacement_leftovers(dir)? {
                std::fs::remove_dir_all(&leftover).with_context(|| {
                    format!(
                        "removing {}, left by a killed replacement of {}",
                        leftover.display(),
                        dir.display()
                    )
                })?;
            }
            Ok(DirLock { _files: vec![file] })
        }
        Access::Shard { index, count } => {
            if !try_lock(&file, &path, true)? {
                bail!(
                    "{} is in use: its lock {} is held by {} (a whole run or a merge); {}",
                    dir.display(),
                    path.display(),
                    read_holder(&path),
                    lock_advice(&path)
                );
            }
            // No whole run holds the lock, so what it says is stale.
            let _ = file.set_len(0);
            let shard_path = shard_lock_path(dir, index, count);
            let mut shard = open_lock_file(&shard_path)?;
            if !try_lock(&shard, &shard_path, false)? {
                bail!(
                    "shard {index}/{count} is already running in {}: its lock {} is held by {}; {}",
                    dir.display(),
                    shard_path.display(),
                    read_holder(&shard_path),
                    lock_advice(&shard_path)
                );
            }
            write_holder(&mut shard, &shard_path)?;
            Ok(DirLock {
                _files: vec![file, shard],
            })
        }
    }
}

/// Replaces the directory `dir` by what `build` makes of a copy of it, or
/// leaves it as it was if `build` (or the replacement) fails.
///
/// `build` gets a staging directory beside `dir` (in the same parent, so
/// that renames put it in `dir`'s place) holding `dir`'s files as hard
/// links, or copies where the filesystem has none. Every file this crate
/// writes is written atomically, by renaming a new file over the old name,
/// never through it, so `dir`'s files stay as they were while `build`
/// rewrites the staging directory's. Once `build` succeeds, `dir` is
/// renamed aside, the staging directory renamed to `dir`, and the old one
/// removed; if anything fails, the staging directory is removed and `dir`
/// is left in place. Call it holding `dir`'s lock exclusively (the lock
/// file is linked too, so the lock holds in the new directory).
pub fn replace_dir<T>(dir: &Path, build: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
    let staging = temp_beside(dir, "new")?;
    let built = link_tree(dir, &staging)
        .and_then(|()| build(&staging))
        .and_then(|value| {
            swap_in(dir, &staging)?;
            Ok(value)
        });
    if built.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    built
}

/// What [`replace_dir`] leaves beside `dir` while it runs: its staging
/// directory or `dir`'s old copy renamed aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Leftover {
    Staging,
    Old,
}

/// The directories beside `dir` that a [`replace_dir`] of `dir` made
/// (hidden names `.<name>.<pid>.<n>.new.tmp` and `….old.tmp`), with what
/// each is; none if `dir` has no parent to look in.
fn replacement_leftovers(dir: &Path) -> Result<Vec<(PathBuf, Leftover)>> {
    let (Some(name), Some(parent)) = (dir.file_name(), dir.parent()) else {
        return Ok(Vec::new());
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let prefix = format!(".{}.", name.to_string_lossy());
    let entries = match std::fs::read_dir(parent) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("listing {}", parent.display())),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", parent.display()))?;
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = file_name.strip_prefix(&prefix) else {
            continue;
        };
        let (numbers, kind) = if let Some(n) = rest.strip_suffix(".new.tmp") {
            (n, Leftover::Staging)
        } else if let Some(n) = rest.strip_suffix(".old.tmp") {
            (n, Leftover::Old)
        } else {
            continue;
        };
        // `<pid>.<n>`: anything else belongs to another name with dots
        let is_number = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        let ours = numbers
            .split_once('.')
            .is_some_and(|(pid, n)| is_number(pid) && is_number(n));
        if ours && entry.file_type().is_ok_and(|t| t.is_dir()) {
            found.push((entry.path(), kind));
        }
    }
    found.sort();
    Ok(found)
}

/// Puts back `dir` where a [`replace_dir`] of it was killed between its
/// two renames: `dir` is missing and its old copy lies beside it. The old
/// copy is renamed back (the replacement is lost, as if it had failed),
/// unless a live process still holds its lock (that replacement is under
/// way: an error). Nothing happens if `dir` exists or no old copy does,
/// and it is no error if another process (the shards of one job array
/// start together) put `dir` back first.
pub fn restore_interrupted_replacement(dir: &Path) -> Result<()> {
    if dir.exists() {
        return Ok(());
    }
    restore_old_copy(dir).or_else(|e| if dir.exists() { Ok(()) } else { Err(e) })
}

/// [`restore_interrupted_replacement`] for a missing `dir`.
fn restore_old_copy(dir: &Path) -> Result<()> {
    let olds: Vec<PathBuf> = replacement_leftovers(dir)?
        .into_iter()
        .filter(|(_, kind)| *kind == Leftover::Old)
        .map(|(path, _)| path)
        .collect();
    let old = match olds.as_slice() {
        [] => return Ok(()),
        [old] => old,
        _ => bail!(
            "{} is missing and several old copies of it lie beside it ({}): \
             rename the one to keep to {}",
            dir.display(),
            olds.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            dir.display()
        ),
    };
    let lock_path = old.join(LOCK_FILE);
    let _held = if lock_path.exists() {
        let file = open_lock_file(&lock_path)?;
        if !try_lock(&file, &lock_path, false)? {
            bail!(
                "{} is being replaced by {}; {}",
                dir.display(),
                read_holder(&lock_path),
                lock_advice(&lock_path)
            );
        }
        Some(file)
    } else {
        None
    };
    std::fs::rename(old, dir).with_context(|| {
        format!(
            "putting back {} from {}, where a killed run left it",
            dir.display(),
            old.display()
        )
    })
}

/// Recreates the tree `from` at `to` (which must not exist), each file a
/// hard link to `from`'s, or a copy where linking fails; temporary files
/// are left out.
fn link_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir(to).with_context(|| format!("creating directory {}", to.display()))?;
    let entries = std::fs::read_dir(from).with_context(|| format!("listing {}", from.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", from.display()))?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            link_tree(&source, &target)?;
        } else if !is_temp_name(&entry.file_name().to_string_lossy()) {
            std::fs::hard_link(&source, &target)
                .or_else(|_| std::fs::copy(&source, &target).map(|_| ()))
                .with_context(|| format!("copying {} to {}", source.display(), target.display()))?;
        }
    }
    Ok(())
}

/// Puts `staging` in the place of `dir`, removing the old `dir`: `dir` is
/// renamed aside, then `staging` renamed to it (if that fails, `dir` is
/// renamed back).
fn swap_in(dir: &Path, staging: &Path) -> Result<()> {
    let old = temp_beside(dir, "old")?;
    std::fs::rename(dir, &old)
        .with_context(|| format!("renaming {} to {}", dir.display(), old.display()))?;
    if let Err(e) = std::fs::rename(staging, dir) {
        let _ = std::fs::rename(&old, dir);
        return Err(e)
            .with_context(|| format!("renaming {} to {}", staging.display(), dir.display()));
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        File::open(parent)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("flushing directory {} to disk", parent.display()))?;
    }
    std::fs::remove_dir_all(&old).with_context(|| {
        format!(
            "removing {}, the old {} (the new one is in place)",
            old.display(),
            dir.display()
        )
    })
}
