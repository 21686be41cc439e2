//! Tests of `xtask::files`.

use anyhow::bail;
use std::path::PathBuf;
use xtask::files::*;

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xtask-files-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Two threads writing the same file many times never collide on a
/// temporary name (a shared one made renames fail with "No such file or
/// directory"), every read sees one whole version, and no temporary
/// file is left behind.
#[test]
fn concurrent_atomic_writes_never_tear_or_collide() {
    let dir = temp_dir("concurrent");
    let path = dir.join("record.json");
    let versions: Vec<Vec<u8>> = (0..2u8).map(|k| vec![b'a' + k; 64 * 1024]).collect();
    std::thread::scope(|s| {
        for v in &versions {
            let path = &path;
            s.spawn(move || {
                for _ in 0..50 {
                    write_file(path, v).unwrap();
                }
            });
        }
        s.spawn(|| {
            for _ in 0..200 {
                if let Ok(bytes) = std::fs::read(&path) {
                    assert!(versions.contains(&bytes), "torn read");
                }
            }
        });
    });
    assert!(versions.contains(&std::fs::read(&path).unwrap()));
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("record.json")]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Temporary names are hidden `.tmp` files beside their target, and
/// clearing stale ones removes only those.
#[test]
fn stale_temporary_files_are_removed() {
    let dir = temp_dir("stale");
    let sub = dir.join("chains").join("t");
    std::fs::create_dir_all(&sub).unwrap();
    let tmp = temp_path(&sub.join("0.npy")).unwrap();
    assert_eq!(tmp.parent(), Some(sub.as_path()));
    assert!(is_temp_name(&tmp.file_name().unwrap().to_string_lossy()));
    std::fs::write(&tmp, b"torn").unwrap();
    write_file(&sub.join("1.npy"), b"whole").unwrap();
    remove_stale_temps(&dir).unwrap();
    let left: Vec<_> = std::fs::read_dir(&sub)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("1.npy")]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A failed write leaves the old file and no temporary file, and the
/// error names the file first.
#[test]
fn failed_writes_keep_the_old_file() {
    let dir = temp_dir("failed");
    let path = dir.join("summary.json");
    write_file(&path, b"old").unwrap();
    let err = write_atomic(&path, |w| {
        w.write_all(b"half")?;
        bail!("interrupted")
    })
    .unwrap_err();
    assert!(format!("{err:#}").contains("summary.json"), "{err:#}");
    assert_eq!(std::fs::read(&path).unwrap(), b"old");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    let missing = dir.join("no-such-dir").join("x.json");
    let err = format!("{:#}", write_file(&missing, b"x").unwrap_err());
    // the file asked for comes first, not only the temporary one beside it
    assert!(
        err.starts_with(&format!("writing {}: ", missing.display())),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A whole run excludes everything else; shards exclude whole runs and
/// their own copies but not each other; errors name the holder's pid
/// and the lock file; dropping a lock releases it.
#[test]
fn locks_exclude_conflicting_runs() {
    let dir = temp_dir("lock");
    let pid = format!("pid {}", std::process::id());
    let whole = lock_dir(&dir, Access::Whole).unwrap();
    for access in [Access::Whole, Access::Shard { index: 1, count: 2 }] {
        let err = format!("{:#}", lock_dir(&dir, access).unwrap_err());
        assert!(err.contains(&pid) && err.contains(".lock"), "{err}");
        assert!(err.contains("delete"), "{err}");
    }
    drop(whole);
    let one = lock_dir(&dir, Access::Shard { index: 1, count: 2 }).unwrap();
    let two = lock_dir(&dir, Access::Shard { index: 2, count: 2 }).unwrap();
    let err = format!(
        "{:#}",
        lock_dir(&dir, Access::Shard { index: 1, count: 2 }).unwrap_err()
    );
    assert!(
        err.contains("shard 1/2 is already running") && err.contains(&pid),
        "{err}"
    );
    let err = format!("{:#}", lock_dir(&dir, Access::Whole).unwrap_err());
    assert!(
        err.contains("running shard(s)") && err.contains(&pid),
        "{err}"
    );
    drop((one, two));
    drop(lock_dir(&dir, Access::Whole).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Reference values from `date -u -d @secs`, including a leap day and
/// a century that is not a leap year.
#[test]
fn utc_times_are_iso_8601() {
    assert_eq!(utc(0), "1970-01-01T00:00:00Z");
    assert_eq!(utc(951_825_599), "2000-02-29T11:59:59Z");
    assert_eq!(utc(4_102_444_800), "2100-01-01T00:00:00Z");
}

/// A replacement of `exp` killed between its two renames left `exp`
/// missing, its old copy and the staging copy beside it: locking `exp`
/// puts the old copy back and clears the staging one, and leaves alone
/// what belongs to another directory whose name starts the same.
#[test]
fn a_replacement_killed_between_its_renames_is_put_back() {
    let parent = temp_dir("killed-swap");
    let dir = parent.join("exp");
    std::fs::create_dir(&dir).unwrap();
    write_file(&dir.join("summary.json"), b"old").unwrap();
    drop(lock_dir(&dir, Access::Whole).unwrap());
    let old = parent.join(".exp.4242.7.old.tmp");
    let staging = parent.join(".exp.4242.6.new.tmp");
    let other = parent.join(".exp.b.4242.9.old.tmp");
    std::fs::rename(&dir, &old).unwrap();
    std::fs::create_dir(&staging).unwrap();
    std::fs::write(staging.join("summary.json"), b"new").unwrap();
    std::fs::create_dir(&other).unwrap();

    // a shard puts the directory back but clears nothing
    let shard = lock_dir(&dir, Access::Shard { index: 1, count: 2 }).unwrap();
    assert_eq!(std::fs::read(dir.join("summary.json")).unwrap(), b"old");
    assert!(!old.exists() && staging.exists());
    drop(shard);
    // a whole run clears this directory's leftovers, not another's
    drop(lock_dir(&dir, Access::Whole).unwrap());
    assert!(!staging.exists() && other.exists());
    std::fs::remove_dir_all(&parent).unwrap();
}

/// The shards of a job array start together: after a kill left the
/// directory aside, all of them find it missing, one puts it back, and the
/// others (whose lock or rename of the old copy then fails) go on.
#[test]
fn shards_starting_together_put_the_directory_back_once() {
    let parent = temp_dir("shards-swap");
    let dir = parent.join("exp");
    for round in 0..20 {
        std::fs::create_dir(&dir).unwrap();
        write_file(&dir.join("summary.json"), b"old").unwrap();
        std::fs::rename(&dir, parent.join(format!(".exp.4242.{round}.old.tmp"))).unwrap();
        let start = std::sync::Barrier::new(8);
        let locks: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (1..=8)
                .map(|index| {
                    let (dir, start) = (&dir, &start);
                    s.spawn(move || {
                        start.wait();
                        lock_dir(dir, Access::Shard { index, count: 8 })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for lock in &locks {
            assert!(
                lock.is_ok(),
                "round {round}: {:#}",
                lock.as_ref().unwrap_err()
            );
        }
        drop(locks);
        assert_eq!(std::fs::read(dir.join("summary.json")).unwrap(), b"old");
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::remove_dir_all(&parent).unwrap();
}

/// While the process that renamed the old copy aside still holds its
/// lock, the replacement is under way: nothing is moved and the error
/// says so. A directory that is missing with nothing beside it is an
/// error naming it.
#[test]
fn a_replacement_under_way_is_left_alone() {
    let parent = temp_dir("live-swap");
    let dir = parent.join("exp");
    let err = format!("{:#}", lock_dir(&dir, Access::Whole).unwrap_err());
    assert!(err.contains("exp does not exist"), "{err}");
    std::fs::create_dir(&dir).unwrap();
    let held = lock_dir(&dir, Access::Whole).unwrap();
    let old = parent.join(".exp.4242.7.old.tmp");
    std::fs::rename(&dir, &old).unwrap();
    let err = format!("{:#}", lock_dir(&dir, Access::Whole).unwrap_err());
    assert!(err.contains("is being replaced by pid"), "{err}");
    assert!(old.exists() && !dir.exists());
    drop(held);
    drop(lock_dir(&dir, Access::Whole).unwrap());
    assert!(dir.exists() && !old.exists());
    std::fs::remove_dir_all(&parent).unwrap();
}
