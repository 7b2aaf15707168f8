//! The two sysfs helpers that rdma-core exports at `IBVERBS_1.0` and other libraries use
//! (`ibv_devinfo` and librdmacm call `ibv_read_sysfs_file`; librdmacm calls
//! `ibv_get_sysfs_path`). They are plain file-system helpers, so they work as in rdma-core.

use std::ffi::{CStr, CString, OsStr, c_int};
use std::io::Read as _;
use std::os::unix::ffi::OsStrExt as _;
use std::path::PathBuf;
use std::sync::OnceLock;

use verbs_abi::IBV_SYSFS_PATH_MAX;

use crate::ffi::{Errno, Verb};

/// `ibv_get_sysfs_path`: `$SYSFS_PATH` without trailing slashes (only when not running
/// set-uid), otherwise "/sys".
pub(crate) fn path() -> &'static CStr {
    static PATH: OnceLock<CString> = OnceLock::new();
    PATH.get_or_init(|| {
        // Safety: getuid only reads the process credentials.
        let uid = unsafe { libc::getuid() };
        // Safety: as for getuid.
        let same_user = uid == unsafe { libc::geteuid() };
        let from_env = std::env::var_os("SYSFS_PATH")
            .filter(|_| same_user)
            .and_then(|value| {
                let bytes = value.as_bytes();
                let bytes = &bytes[..bytes.len().min(IBV_SYSFS_PATH_MAX)];
                let trimmed = bytes
                    .iter()
                    .rposition(|&b| b != b'/')
                    .map_or(&[][..], |end| &bytes[..=end]);
                CString::new(trimmed).ok()
            });
        from_env.unwrap_or_else(|| c"/sys".to_owned())
    })
}

/// `ibv_read_sysfs_file`: reads `dir/file` into `buf` (one `read`), drops a trailing
/// newline, NUL-terminates, and returns the length. Contents that do not fit with their
/// terminator are an error (`EOVERFLOW`), as in rdma-core.
pub(crate) fn read_file(dir: &CStr, file: &CStr, buf: &mut [u8]) -> Verb<c_int> {
    let mut path = PathBuf::from(OsStr::from_bytes(dir.to_bytes()));
    path.push(OsStr::from_bytes(file.to_bytes()));
    let mut handle = std::fs::File::open(&path).map_err(|e| Errno::of(&e))?;
    let mut len = handle.read(buf).map_err(|e| Errno::of(&e))?;
    if len > 0 {
        if buf[len - 1] == b'\n' {
            len -= 1;
            buf[len] = 0;
        } else if len < buf.len() {
            buf[len] = 0;
        } else {
            return Err(Errno(libc::EOVERFLOW));
        }
    }
    c_int::try_from(len).map_err(|_| Errno(libc::EOVERFLOW))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_strip_the_newline_and_terminate() {
        let dir = std::env::temp_dir().join(format!("xroce-sysfs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("node_guid"), "0200:00ff:fe00:0001\n").unwrap();
        std::fs::write(dir.join("raw"), "abc").unwrap();
        let c_dir = CString::new(dir.as_os_str().as_bytes()).unwrap();

        let mut buf = [0xa5u8; 32];
        assert_eq!(read_file(&c_dir, c"node_guid", &mut buf), Ok(19));
        assert_eq!(&buf[..20], b"0200:00ff:fe00:0001\0");
        let mut buf = [0xa5u8; 4];
        assert_eq!(read_file(&c_dir, c"raw", &mut buf), Ok(3));
        assert_eq!(&buf, b"abc\0");
        let mut small = [0xa5u8; 3];
        assert_eq!(
            read_file(&c_dir, c"raw", &mut small),
            Err(Errno(libc::EOVERFLOW))
        );
        assert_eq!(
            read_file(&c_dir, c"missing", &mut buf),
            Err(Errno(libc::ENOENT))
        );

        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_sysfs_path_has_no_trailing_slash() {
        let path = path().to_bytes();
        assert!(!path.is_empty());
        assert!(path == b"/sys" || std::env::var_os("SYSFS_PATH").is_some());
        assert!(path.len() == 1 || !path.ends_with(b"/"));
    }
}
