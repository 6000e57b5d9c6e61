//! A full disk, for the tests of every crate: a 2 MiB tmpfs mounted for one test, which fills it
//! and frees it. Test support, like [`crate::conformance`]; nothing in the product uses it.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// A 2 MiB tmpfs, unmounted (and its directory removed) when dropped. Mounting needs root, which
/// the project's machines and CI have; without it [`SmallDisk::mount`] panics and says so.
#[derive(Debug)]
pub struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    pub fn mount() -> SmallDisk {
        let dir = std::env::temp_dir().join(format!("undolog-disk-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&dir).expect("create the mount point");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            mounted,
            "could not mount a 2 MiB tmpfs at {} (the full-disk tests need root)",
            dir.display()
        );
        SmallDisk { dir }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Fills what is left of the disk with one file; remove it to free the space.
    pub fn fill(&self) -> PathBuf {
        let filler = self.dir.join("filler");
        let mut file = std::fs::File::create(&filler).expect("create the filler");
        let mut block = vec![0_u8; 64 * 1024];
        while !block.is_empty() {
            if std::io::Write::write_all(&mut file, &block).is_err() {
                block.truncate(block.len() / 2);
            }
        }
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}
