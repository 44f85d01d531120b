//! The simulator's [`Host`]: randomness from the operating system, and a state directory
//! standing in for the board's flash.
//!
//! The directory holds what a real board keeps across power cycles:
//! - `key`: the device key as 64 hex characters, readable by its owner only (it is the
//!   device's identity: whoever has it can be this device);
//! - `firmware.json`: the version running, whether it is on probation, the version before
//!   it, and whether the update partition holds an installed image to boot next;
//! - `ota.bin`: the update partition, written as an update streams in.
//!
//! An update takes the steps it takes on an ESP32: `ota_begin` erases the partition,
//! `ota_write` appends, `ota_finish` checks the image header the way a bootloader would and
//! marks the image to boot next. [`Flash::boot`] then switches to it on probation,
//! reading the version from the image itself; [`Flash::confirm`] keeps it and
//! [`Flash::rollback`] goes back to the one before.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use herald_device::{Boot, FlashError, Host};
use herald_files::{create_private_dir, write_private};
use herald_gadget_proto::limits::KEY_LEN;
use herald_gadget_proto::ota_image::inspect_image;
use serde::{Deserialize, Serialize};

use crate::runner::Flash;

const KEY_FILE: &str = "key";
const FIRMWARE_FILE: &str = "firmware.json";
const PARTITION_FILE: &str = "ota.bin";
/// Held by the simulator or gadget service that uses the directory.
const LOCK_FILE: &str = "lock";

/// The state directory, held for the life of the device that uses it: one simulator or
/// gadget service per directory, or both would be the same device and knock each other
/// offline.
#[derive(Debug)]
pub struct StateLock {
    _file: File,
}

impl StateLock {
    /// Creates the directory (owner only) and locks it, or says who holds it.
    pub fn acquire(dir: &Path, what: &str) -> anyhow::Result<StateLock> {
        use std::io::{Read, Seek, Write};
        create_private_dir(dir)
            .with_context(|| format!("cannot create the state directory {}", dir.display()))?;
        let path = dir.join(LOCK_FILE);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        if file.try_lock().is_err() {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            bail!(
                "{} is in use by another {what} (pid {}): give this one its own --state-dir",
                dir.display(),
                pid.trim(),
            );
        }
        file.set_len(0)?;
        file.rewind()?;
        writeln!(file, "{}", std::process::id())?;
        Ok(StateLock { _file: file })
    }
}

/// Which firmware the board runs, as `firmware.json` keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Firmware {
    /// The version running.
    pub running: String,
    /// The version before the last update, kept until the update is confirmed.
    pub previous: Option<String>,
    /// Whether the running version waits for its first `welcome` to be kept.
    pub probation: bool,
    /// Whether the update partition holds an installed image to boot next.
    pub next: bool,
}

/// The state directory and the update partition being written.
#[derive(Debug)]
pub struct SimHost {
    dir: PathBuf,
    firmware: Firmware,
    partition: Option<File>,
}

impl SimHost {
    /// Opens (creating) the state directory. A board that never ran starts with
    /// `shipped` firmware.
    pub fn open(dir: &Path, shipped: &str) -> anyhow::Result<SimHost> {
        create_private_dir(dir)
            .with_context(|| format!("cannot create the state directory {}", dir.display()))?;
        let path = dir.join(FIRMWARE_FILE);
        let firmware = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("{} is not the simulator's", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Firmware {
                running: shipped.to_owned(),
                previous: None,
                probation: false,
                next: false,
            },
            Err(e) => return Err(e).context(format!("cannot read {}", path.display())),
        };
        // A board without a working random source cannot make a key or answer an update.
        if let Err(e) = getrandom::fill(&mut [0u8; 1]) {
            bail!("the system's random generator failed: {e}");
        }
        Ok(SimHost {
            dir: dir.to_owned(),
            firmware,
            partition: None,
        })
    }

    fn load_key(&self) -> anyhow::Result<Option<[u8; KEY_LEN]>> {
        let path = self.dir.join(KEY_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).context(format!("cannot read {}", path.display())),
        };
        let mut key = [0u8; KEY_LEN];
        if hex::decode_to_slice(text.trim(), &mut key).is_err() {
            bail!(
                "{} is not a device key (64 hex characters); remove it to make a new device",
                path.display()
            );
        }
        Ok(Some(key))
    }

    fn save(&self) -> anyhow::Result<()> {
        let path = self.dir.join(FIRMWARE_FILE);
        let json = serde_json::to_vec_pretty(&self.firmware)?;
        write_private(&path, &json).with_context(|| format!("cannot write {}", path.display()))
    }
}

impl Flash for SimHost {
    fn boot(&mut self) -> anyhow::Result<(Boot, String)> {
        if self.firmware.next {
            let image = std::fs::read(self.dir.join(PARTITION_FILE))
                .context("cannot read the installed image")?;
            let info = inspect_image(&image).context("the installed image does not boot")?;
            let previous = std::mem::replace(&mut self.firmware.running, info.version);
            self.firmware.previous = Some(previous);
            self.firmware.probation = true;
            self.firmware.next = false;
            self.save()?;
        }
        let boot = Boot {
            key: self.load_key()?,
            probation: self.firmware.probation,
        };
        Ok((boot, self.firmware.running.clone()))
    }

    fn store_key(&mut self, key: &[u8; KEY_LEN]) -> anyhow::Result<()> {
        let path = self.dir.join(KEY_FILE);
        write_private(&path, format!("{}\n", hex::encode(key)).as_bytes())
            .with_context(|| format!("cannot store the device key in {}", path.display()))
    }

    fn confirm(&mut self) -> anyhow::Result<()> {
        self.firmware.probation = false;
        self.firmware.previous = None;
        self.save()
    }

    fn rollback(&mut self) -> anyhow::Result<String> {
        if let Some(previous) = self.firmware.previous.take() {
            self.firmware.running = previous;
        }
        self.firmware.probation = false;
        self.firmware.next = false;
        self.save()?;
        Ok(self.firmware.running.clone())
    }

    fn on_probation(&self) -> bool {
        self.firmware.probation
    }
}

impl Host for SimHost {
    fn fill_random(&mut self, buf: &mut [u8]) {
        // `open` checked that the generator works; it does not stop working mid-run.
        if let Err(e) = getrandom::fill(buf) {
            panic!("the system's random generator failed: {e}");
        }
    }

    fn ota_begin(&mut self, _size: u64) -> Result<(), FlashError> {
        // Erasing the partition loses whatever image waited there.
        self.firmware.next = false;
        self.save().map_err(|_| FlashError::Io)?;
        let file = File::create(self.dir.join(PARTITION_FILE)).map_err(|_| FlashError::Io)?;
        self.partition = Some(file);
        Ok(())
    }

    fn ota_write(&mut self, bytes: &[u8]) -> Result<(), FlashError> {
        let file = self.partition.as_mut().ok_or(FlashError::Io)?;
        file.write_all(bytes).map_err(|_| FlashError::Io)
    }

    fn ota_finish(&mut self) -> Result<(), FlashError> {
        let file = self.partition.take().ok_or(FlashError::Io)?;
        file.sync_all().map_err(|_| FlashError::Io)?;
        drop(file);
        let image = std::fs::read(self.dir.join(PARTITION_FILE)).map_err(|_| FlashError::Io)?;
        inspect_image(&image).map_err(|_| FlashError::InvalidImage)?;
        self.firmware.next = true;
        self.save().map_err(|_| FlashError::Io)
    }

    fn ota_abort(&mut self) {
        self.partition = None;
        // Best effort: a stale partition is never booted, `next` is false.
        let _ = std::fs::remove_file(self.dir.join(PARTITION_FILE));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_device_per_state_directory() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let lock = StateLock::acquire(&state, "herald sim").unwrap();
        let err = StateLock::acquire(&state, "herald sim")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("another herald sim (pid {})", std::process::id())),
            "{err}"
        );
        drop(lock);
        StateLock::acquire(&state, "herald sim").unwrap();
    }
    use herald_gadget_proto::ota_image::{APP_DESC_MAGIC, IMAGE_MAGIC};

    fn image(version: &str) -> Vec<u8> {
        let mut bytes = vec![0u8; 400];
        bytes[0] = IMAGE_MAGIC;
        bytes[32..36].copy_from_slice(&APP_DESC_MAGIC.to_le_bytes());
        bytes[48..48 + version.len()].copy_from_slice(version.as_bytes());
        bytes
    }

    #[test]
    fn the_key_is_private_and_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut host = SimHost::open(dir.path(), "0.1.0").unwrap();
        assert_eq!(host.boot().unwrap().0.key, None);
        host.store_key(&[7; KEY_LEN]).unwrap();
        let mut again = SimHost::open(dir.path(), "0.1.0").unwrap();
        assert_eq!(again.boot().unwrap().0.key, Some([7; KEY_LEN]));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(dir.path().join(KEY_FILE), "not hex").unwrap();
        let err = SimHost::open(dir.path(), "0.1.0")
            .unwrap()
            .boot()
            .unwrap_err();
        assert!(err.to_string().contains("not a device key"), "{err}");
    }

    #[test]
    fn an_installed_image_boots_on_probation_and_is_kept_or_rolled_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut host = SimHost::open(dir.path(), "0.1.0").unwrap();
        let image = image("0.2.0");
        host.ota_begin(image.len() as u64).unwrap();
        host.ota_write(&image[..100]).unwrap();
        host.ota_write(&image[100..]).unwrap();
        host.ota_finish().unwrap();
        // Until the restart the old version runs.
        let mut host = SimHost::open(dir.path(), "0.1.0").unwrap();
        assert_eq!(host.firmware.running, "0.1.0");
        let (boot, version) = host.boot().unwrap();
        assert_eq!((boot.probation, version.as_str()), (true, "0.2.0"));
        assert_eq!(host.rollback().unwrap(), "0.1.0");
        let (boot, version) = host.boot().unwrap();
        assert_eq!((boot.probation, version.as_str()), (false, "0.1.0"));

        host.ota_begin(image.len() as u64).unwrap();
        host.ota_write(&image).unwrap();
        host.ota_finish().unwrap();
        host.boot().unwrap();
        host.confirm().unwrap();
        let (boot, version) = SimHost::open(dir.path(), "0.1.0").unwrap().boot().unwrap();
        assert_eq!((boot.probation, version.as_str()), (false, "0.2.0"));
    }

    #[test]
    fn the_bootloader_refuses_what_is_not_an_image() {
        let dir = tempfile::tempdir().unwrap();
        let mut host = SimHost::open(dir.path(), "0.1.0").unwrap();
        host.ota_begin(400).unwrap();
        host.ota_write(&[0u8; 400]).unwrap();
        assert_eq!(host.ota_finish(), Err(FlashError::InvalidImage));
        assert_eq!(host.boot().unwrap().1, "0.1.0");
        // Writing without a begun update is a flash error, not a panic.
        assert_eq!(host.ota_write(b"x"), Err(FlashError::Io));
        host.ota_begin(400).unwrap();
        host.ota_abort();
        assert!(!dir.path().join(PARTITION_FILE).exists());
    }
}
