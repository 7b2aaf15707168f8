//! A writer of `newc` cpio archives, the format of a Linux initramfs. Entries are written
//! as given (no host files are consulted), so device nodes need no `mknod` and the archive
//! is the same on every host. The kernel unpacks several archives concatenated in one file,
//! one after the other.

use std::io::{self, Write};

const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
const S_IFLNK: u32 = 0o120_000;
const S_IFCHR: u32 = 0o020_000;

/// Writes one archive; call [`Writer::finish`] to write its trailer.
#[derive(Debug)]
pub(crate) struct Writer<W: Write> {
    out: W,
    written: u64,
    next_ino: u32,
}

impl<W: Write> Writer<W> {
    pub(crate) fn new(out: W) -> Self {
        Writer {
            out,
            written: 0,
            next_ino: 1,
        }
    }

    fn pad(&mut self) -> io::Result<()> {
        let pad = (4 - (self.written % 4) as usize) % 4;
        self.out.write_all(&[0u8; 3][..pad])?;
        self.written += pad as u64;
        Ok(())
    }

    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) -> io::Result<()> {
        let name = name.trim_start_matches('/');
        let ino = self.next_ino;
        self.next_ino += 1;
        let nlink = if mode & S_IFDIR != 0 { 2 } else { 1 };
        let size = u32::try_from(data.len()).map_err(|_| io::Error::other("file over 4 GiB"))?;
        let header = format!(
            "070701{ino:08x}{mode:08x}{:08x}{:08x}{nlink:08x}{:08x}{size:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            0,
            0,
            0,
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() + 1,
            0
        );
        self.out.write_all(header.as_bytes())?;
        self.out.write_all(name.as_bytes())?;
        self.out.write_all(&[0])?;
        self.written += (header.len() + name.len() + 1) as u64;
        self.pad()?;
        self.out.write_all(data)?;
        self.written += data.len() as u64;
        self.pad()
    }

    /// A directory (`0755`).
    pub(crate) fn dir(&mut self, name: &str) -> io::Result<()> {
        self.entry(name, S_IFDIR | 0o755, (0, 0), &[])
    }

    /// A regular file with permissions `perm` (`0o755`, `0o644`).
    pub(crate) fn file(&mut self, name: &str, perm: u32, data: &[u8]) -> io::Result<()> {
        self.entry(name, S_IFREG | (perm & 0o7777), (0, 0), data)
    }

    /// A symbolic link to `target`.
    pub(crate) fn symlink(&mut self, name: &str, target: &str) -> io::Result<()> {
        self.entry(name, S_IFLNK | 0o777, (0, 0), target.as_bytes())
    }

    /// A character device node.
    pub(crate) fn char_device(
        &mut self,
        name: &str,
        perm: u32,
        major: u32,
        minor: u32,
    ) -> io::Result<()> {
        self.entry(name, S_IFCHR | (perm & 0o7777), (major, minor), &[])
    }

    /// Writes the trailer and returns the output.
    pub(crate) fn finish(mut self) -> io::Result<W> {
        self.entry("TRAILER!!!", 0, (0, 0), &[])?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_newc_and_aligned() {
        let mut w = Writer::new(Vec::new());
        w.dir("/etc").unwrap();
        w.file("/etc/hostname", 0o644, b"peer\n").unwrap();
        w.symlink("/bin", "usr/bin").unwrap();
        w.char_device("/dev/console", 0o600, 5, 1).unwrap();
        let out = w.finish().unwrap();
        assert_eq!(out.len() % 4, 0);
        // The first header: magic, inode 1, a directory with mode 0755, two links.
        assert_eq!(&out[..6], b"070701");
        assert_eq!(&out[6..14], b"00000001");
        assert_eq!(&out[14..22], b"000041ed");
        assert_eq!(&out[38..46], b"00000002");
        // Name size 4 ("etc" + NUL) and the name right after the 110-byte header.
        assert_eq!(&out[94..102], b"00000004");
        assert_eq!(&out[110..114], b"etc\0");
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("etc/hostname\0"));
        assert!(text.contains("peer\n"));
        assert!(text.contains("bin\0"));
        assert!(text.contains("usr/bin"));
        // The console: rdev 5:1.
        let at = text.find("dev/console").unwrap() - 110;
        assert_eq!(&out[at + 14..at + 22], b"00002180");
        assert_eq!(&out[at + 78..at + 94], b"0000000500000001");
        assert!(text.ends_with("TRAILER!!!\0\0\0\0") || text.contains("TRAILER!!!\0"));
    }
}
