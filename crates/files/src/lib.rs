//! Private files: small ones (tokens, endpoints, keys) written so a crash never leaves
//! half of one, directories only their owner may enter, and the data directory's lock;
//! and the secrets kept in them ([`secret`]: randomness, tokens).
//!
//! A crate of its own because the server is not alone in keeping secrets on disk: the
//! simulator keeps a device key, `herald chat` keeps what it downloads. Each writes them
//! the one way here (atomic, mode 0600, no planted link followed) without linking the
//! server for it.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod secret;

use std::io::Write;
use std::path::Path;

/// Write `contents` to `path` with mode 0600: into a temporary file beside it, synced,
/// then renamed over the old one. The temporary name is random and created exclusively,
/// so a link planted in a shared directory is neither followed nor guessed.
pub fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    write_private_parts(path, &[contents])
}

/// [`write_private`] of the concatenation of `parts`, without concatenating them.
pub fn write_private_parts<P: AsRef<[u8]>>(path: &Path, parts: &[P]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut salt = [0u8; 4];
    getrandom::fill(&mut salt)?;
    let tmp = dir.join(format!(".{name}.{}.part", hex::encode(salt)));
    let result = (|| {
        let mut file = private_options().create_new(true).open(&tmp)?;
        for part in parts {
            file.write_all(part.as_ref())?;
        }
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Open `path` for writing, creating it with mode 0600 if missing; nothing is truncated.
pub fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    private_options().open(path)
}

/// Open `path` to read and to append, creating it with mode 0600 if missing and making
/// it 0600 if it was looser: for files that grow in place (a store, a journal).
pub fn open_private_append(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = private_options();
    options.read(true).append(true);
    let file = options.open(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

fn private_options() -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// Refuse a directory other users may write to: they could plant files or links in it,
/// or swap the store underneath the server.
pub fn check_private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir)?.permissions().mode();
        if mode & 0o022 != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "other users may write to it (mode {:o}); make it yours alone: chmod 700 {}",
                    mode & 0o777,
                    dir.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Remove what a crash left half-written in `dir` (the `.NAME.….part` files of
/// [`write_private`] and of recordings); returns how many. A missing `dir` has none.
pub fn sweep_partial(dir: &Path) -> std::io::Result<usize> {
    remove_files(dir, |path| {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        name.starts_with('.') && name.ends_with(".part")
    })
}

/// Remove the plain files of `dir` that `unwanted` picks; returns how many. A missing
/// `dir` has none.
pub fn remove_files(dir: &Path, unwanted: impl Fn(&Path) -> bool) -> std::io::Result<usize> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(err) => return Err(err),
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_file() && unwanted(&path) {
            std::fs::remove_file(path)?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Create `dir` (and parents) readable by its owner only. An existing directory is
/// left as it is: it may be shared on purpose (never tighten `/tmp`).
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn replaces_atomically_and_privately() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        super::write_private(&path, b"one").unwrap();
        super::write_private(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn crash_leftovers_are_swept_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let keep = ["herald.db", "a.part", ".hidden", "voice.wav"];
        for name in keep
            .iter()
            .chain(&[".token.1a2b.part", ".u1.wav.77.0.part"])
        {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        assert_eq!(super::sweep_partial(dir.path()).unwrap(), 2);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut expected = keep.map(String::from).to_vec();
        expected.sort();
        assert_eq!(left, expected);
        assert_eq!(super::sweep_partial(&dir.path().join("none")).unwrap(), 0);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_opened_to_append_keeps_what_it_held_and_becomes_private() {
        use std::io::{Read, Write};
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mode = |name: &str| {
            let meta = std::fs::metadata(dir.path().join(name)).unwrap();
            meta.permissions().mode() & 0o777
        };
        let path = dir.path().join("journal");
        std::fs::write(&path, b"old\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut file = super::open_private_append(&path).unwrap();
        let mut text = String::new();
        file.read_to_string(&mut text).unwrap();
        assert_eq!(text, "old\n", "read from the start");
        file.write_all(b"new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\nnew\n");
        assert_eq!(mode("journal"), 0o600);
        super::open_private_append(&dir.path().join("fresh")).unwrap();
        assert_eq!(mode("fresh"), 0o600);
    }

    #[cfg(unix)]
    #[test]
    fn a_planted_link_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let path = dir.path().join("token");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        super::write_private(&path, b"secret").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert_eq!(std::fs::read(&path).unwrap(), b"secret");
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
    }
}
