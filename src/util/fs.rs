//! The one atomic file write: a fresh temporary file beside the target (created exclusively,
//! with its final mode from the start), written, fsynced, then renamed over the target, so a
//! reader sees the old file or the new one, never half of one. Used for draft operation files
//! (`record`), discovered operation files (`discover`) and the CA's key and certificate;
//! [`write_atomic_all`] does the same for the thousands of files of one import at once.
//!
//! And path confinement ([`confined_dir`], [`links_stay_inside`]): a directory a command
//! writes into must lie inside the project, reached without a symbolic link and without a
//! `..` that climbs out; a directory a command reads must not hold a symbolic link that
//! leads outside it. Each refusal names the path.

use std::io::Write;
use std::path::{Component, Path, PathBuf};

/// Writes `bytes` to `path` atomically (see the module doc), with the default mode (0666
/// less the umask, as `File::create`).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_mode(path, bytes, 0o666)
}

/// [`write_atomic`] with the file created in `mode` (Unix; ignored elsewhere), so a private
/// key is never readable by others, not even for a moment.
pub fn write_atomic_mode(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let mut rnd = [0u8; 6];
    getrandom::fill(&mut rnd).map_err(|e| std::io::Error::other(e.to_string()))?;
    let suffix: String = rnd.iter().map(|b| format!("{b:02x}")).collect();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Hidden, and ending in the real name: directory loaders skip dot files, and ignore rules
    // such as `*.pem` cover a leftover too.
    let tmp = path.with_file_name(format!(".tmp-{suffix}-{name}"));
    let result = (|| {
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, mode);
        #[cfg(not(unix))]
        let _ = mode;
        let mut f = opts.open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// [`write_atomic`] for many files at once (an import writes thousands): every temporary file
/// is written first, then all are fsynced together from a few threads (one fsync after
/// another was most of a large import's time: each waits for its own journal commit, while
/// concurrent ones share commits), then each is renamed over its target. A reader still sees
/// each old file or the new one, never half of one. On an error the temporary files left are
/// removed; the targets renamed before it stay written. The error names its file.
pub fn write_atomic_all(files: &[(PathBuf, Vec<u8>)]) -> Result<(), (PathBuf, std::io::Error)> {
    let mut tmps: Vec<PathBuf> = Vec::with_capacity(files.len());
    let cleanup = |tmps: &[PathBuf]| {
        for t in tmps {
            let _ = std::fs::remove_file(t);
        }
    };
    for (path, bytes) in files {
        let made = (|| {
            let tmp = temporary_beside(path)?;
            tmps.push(tmp.clone());
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            f.write_all(bytes)
        })();
        if let Err(e) = made {
            cleanup(&tmps);
            return Err((path.clone(), e));
        }
    }
    const THREADS: usize = 16;
    let failed: std::sync::Mutex<Option<(PathBuf, std::io::Error)>> = Default::default();
    std::thread::scope(|s| {
        for chunk in tmps.chunks(tmps.len().div_ceil(THREADS).max(1)) {
            let failed = &failed;
            s.spawn(move || {
                for t in chunk {
                    if let Err(e) = std::fs::File::open(t).and_then(|f| f.sync_all()) {
                        let mut slot = failed.lock().unwrap_or_else(|p| p.into_inner());
                        slot.get_or_insert((t.clone(), e));
                        return;
                    }
                }
            });
        }
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        cleanup(&tmps);
        return Err(e);
    }
    for (i, ((path, _), tmp)) in files.iter().zip(&tmps).enumerate() {
        if let Err(e) = std::fs::rename(tmp, path) {
            cleanup(&tmps[i..]);
            return Err((path.clone(), e));
        }
    }
    Ok(())
}

/// A fresh hidden temporary name beside `path`, ending in its name (see [`write_atomic_mode`]).
fn temporary_beside(path: &Path) -> std::io::Result<PathBuf> {
    let mut rnd = [0u8; 6];
    getrandom::fill(&mut rnd).map_err(|e| std::io::Error::other(e.to_string()))?;
    let suffix: String = rnd.iter().map(|b| format!("{b:02x}")).collect();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(path.with_file_name(format!(".tmp-{suffix}-{name}")))
}

/// `p` made absolute against the current directory, with `.` dropped and `..` applied
/// lexically (no file system access: a symbolic link is not followed).
pub fn lexical_absolute(p: &Path) -> std::io::Result<PathBuf> {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
    };
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

/// `dir` (a directory to write into) as an absolute path, when it lies inside `root` (the
/// project's directory): after `.` and `..` are applied it must start with `root`, and no
/// part of it below `root` that exists may be a symbolic link (a linked directory would send
/// the writes elsewhere). `what` names the option (`--out`) in the error.
pub fn confined_dir(root: &Path, dir: &Path, what: &str) -> Result<PathBuf, String> {
    let io = |e: std::io::Error| format!("{what} {}: {e}", dir.display());
    let root_abs = lexical_absolute(root).map_err(io)?;
    let abs = lexical_absolute(dir).map_err(io)?;
    let Ok(rel) = abs.strip_prefix(&root_abs) else {
        return Err(format!(
            "{what} {}: is outside the project directory {}: files are written only inside the project (name a directory in it)",
            dir.display(),
            root_abs.display()
        ));
    };
    let mut at = root_abs.clone();
    for c in rel.components() {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!(
                    "{what} {}: {} is a symbolic link: files are written only through real directories of the project",
                    dir.display(),
                    at.display()
                ))
            }
            Ok(_) => {}
            // The rest does not exist yet: it is created as real directories.
            Err(_) => break,
        }
    }
    Ok(abs)
}

/// At most this many entries are looked at by [`links_stay_inside`].
const MAX_WALK: usize = 100_000;

/// Whether every symbolic link under `dir` (at any depth) resolves to a place inside `dir`:
/// the first one that leads out (or resolves nowhere) is the error, naming the link and where
/// it leads.
pub fn links_stay_inside(dir: &Path) -> Result<(), String> {
    let root = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut todo = vec![dir.to_path_buf()];
    let mut seen = 0usize;
    while let Some(d) = todo.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        for e in entries {
            let e = e.map_err(|e| format!("{}: {e}", d.display()))?;
            seen += 1;
            if seen > MAX_WALK {
                return Err(format!(
                    "{}: more than {MAX_WALK} entries: not an import source",
                    dir.display()
                ));
            }
            let p = e.path();
            let ft = e.file_type().map_err(|e| format!("{}: {e}", p.display()))?;
            if ft.is_symlink() {
                match p.canonicalize() {
                    Ok(real) if real.starts_with(&root) => {}
                    Ok(real) => {
                        return Err(format!(
                            "{}: is a symbolic link to {}, outside {}: files are read only from inside the input's directory",
                            p.display(),
                            real.display(),
                            dir.display()
                        ))
                    }
                    Err(e) => {
                        return Err(format!(
                            "{}: is a symbolic link that resolves nowhere ({e})",
                            p.display()
                        ))
                    }
                }
            } else if ft.is_dir() {
                todo.push(p);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_files_are_written_whole_and_no_temporary_file_is_left() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.json"), "old").unwrap();
        let files: Vec<(PathBuf, Vec<u8>)> = (0..40)
            .map(|i| {
                let name = if i == 0 {
                    "a.json".to_string()
                } else {
                    format!("f{i}.json")
                };
                (d.path().join(name), format!("content {i}").into_bytes())
            })
            .collect();
        write_atomic_all(&files).unwrap();
        for (p, b) in &files {
            assert_eq!(&std::fs::read(p).unwrap(), b);
        }
        let names = |dir: &Path| -> Vec<String> {
            std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(names(d.path()).len(), 40, "{:?}", names(d.path()));
        // A target whose directory does not exist: the error names it, nothing is left behind.
        let bad = vec![
            (d.path().join("g.json"), b"g".to_vec()),
            (d.path().join("missing/h.json"), b"h".to_vec()),
        ];
        let (f, _) = write_atomic_all(&bad).unwrap_err();
        assert_eq!(f, d.path().join("missing/h.json"));
        assert!(!d.path().join("g.json").exists());
        assert!(names(d.path()).iter().all(|n| !n.starts_with(".tmp-")));
    }

    #[cfg(unix)]
    #[test]
    fn a_directory_to_write_must_be_inside_the_project_without_links() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("mocks/crm")).unwrap();
        assert_eq!(
            confined_dir(r, &r.join("mocks/crm"), "--out").unwrap(),
            r.join("mocks/crm")
        );
        // Not yet there: created later, fine.
        assert!(confined_dir(r, &r.join("mocks/new/deeper"), "--out").is_ok());
        // `..` that stays inside is applied; one that climbs out is refused.
        assert!(confined_dir(r, &r.join("mocks/../mocks/crm"), "--out").is_ok());
        let e = confined_dir(r, &r.join("mocks/../../x"), "--out").unwrap_err();
        assert!(e.contains("outside the project directory"), "{e}");
        assert!(e.contains("--out") && e.contains("../../x"), "{e}");
        let e = confined_dir(r, outside.path(), "--out").unwrap_err();
        assert!(e.contains("outside the project directory"), "{e}");
        // A link inside the project that leads out.
        std::os::unix::fs::symlink(outside.path(), r.join("mocks/link")).unwrap();
        let e = confined_dir(r, &r.join("mocks/link/crm"), "--out").unwrap_err();
        assert!(e.contains("mocks/link is a symbolic link"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_directory_to_read_may_not_hold_a_link_that_leads_out() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("mappings")).unwrap();
        std::fs::write(r.join("mappings/a.json"), "{}").unwrap();
        std::fs::write(outside.path().join("secret.json"), "{}").unwrap();
        std::os::unix::fs::symlink(r.join("mappings/a.json"), r.join("mappings/b.json")).unwrap();
        assert!(links_stay_inside(r).is_ok());
        std::os::unix::fs::symlink(
            outside.path().join("secret.json"),
            r.join("mappings/c.json"),
        )
        .unwrap();
        let e = links_stay_inside(r).unwrap_err();
        assert!(e.contains("mappings/c.json: is a symbolic link to"), "{e}");
        assert!(e.contains("outside"), "{e}");
    }

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_behind() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn the_mode_is_set_from_the_start() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("key.pem");
        write_atomic_mode(&p, b"k", 0o600).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_failed_write_leaves_the_target_alone() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-dir").join("a.json");
        assert!(write_atomic(&missing, b"x").is_err());
        assert!(!missing.exists());
    }
}
