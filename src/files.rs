//! Reading and locking files in a directory another user can write.
//!
//! nthd's state directory (`/var/lib/nthd`) and status directory (`/run/nthd`) belong to user
//! nthd, yet root reads from them too: a fire drill (`sudo nthd simulate --yes`) and the
//! node-problem-detector plugin (`nthd status --npd`, which NPD runs as root with a 5 s
//! timeout). Whoever owns such a directory can put anything at a name nthd reads: a symbolic
//! link to a file only root may read, a FIFO that holds the reader forever, a file of many
//! gigabytes, a directory, a socket. Every file nthd reads from such a directory is read with
//! [`read_untrusted`], which refuses all of these at once and says what it found; both sides of
//! a shared file serialize their read-modify-write with a [`DirLock`].

use std::fs::{self, File, FileType};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// The largest file [`read_untrusted`] reads: 1 MiB. nthd's own files are a few KiB.
pub(crate) const MAX_READ: u64 = 1 << 20;

/// Why [`read_untrusted`] did not read a file. Each message names the file and what it found;
/// [`ReadError::with_fix`] adds what to do, for a reader that does not move the file away itself.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    /// Nothing is there.
    #[error("{path} does not exist")]
    Missing {
        /// The file.
        path: String,
    },
    /// A symbolic link is there: root would read whatever it points to.
    #[error(
        "{path} is a symbolic link, which nthd does not follow (it would read whatever the link \
         points to)"
    )]
    Symlink {
        /// The file.
        path: String,
    },
    /// Something other than a regular file is there.
    #[error(
        "{path} is {what}, not a regular file, so nthd does not read it (a FIFO or a device \
         could hold the reader forever)"
    )]
    NotRegular {
        /// The file.
        path: String,
        /// What it is instead, e.g. "a FIFO (named pipe)".
        what: &'static str,
    },
    /// The file is larger than [`MAX_READ`].
    #[error(
        "{path} is larger than 1 MiB ({size} bytes or more), far larger than any file nthd \
         writes, so nthd does not read it"
    )]
    TooLarge {
        /// The file.
        path: String,
        /// Its size as seen.
        size: u64,
    },
    /// Opening or reading it failed.
    #[error("cannot read {path}: {reason}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        reason: std::io::Error,
    },
}

impl ReadError {
    /// Whether there was no file at all (not an error for most readers).
    pub(crate) fn is_missing(&self) -> bool {
        matches!(self, ReadError::Missing { .. })
    }

    /// The message with what to do about a file nthd refused: move it away.
    pub(crate) fn with_fix(&self) -> String {
        match self {
            ReadError::Symlink { path }
            | ReadError::NotRegular { path, .. }
            | ReadError::TooLarge { path, .. } => {
                format!("{self}; move it away: mv {path} {path}.bad")
            }
            ReadError::Missing { .. } | ReadError::Io { .. } => self.to_string(),
        }
    }
}

/// What a file of type `t` is, when it is not a regular file.
fn not_regular(t: FileType) -> Option<&'static str> {
    if t.is_file() {
        None
    } else if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_symlink() {
        Some("a symbolic link")
    } else {
        Some("not a regular file")
    }
}

/// Opens `path` for reading as a regular file: without waiting for a writer (`O_NONBLOCK`, so
/// a FIFO never holds the caller up), through a symbolic link only when `follow`, and with the
/// type checked on the open descriptor (`fstat`), so a name swapped after a first look gains
/// nothing. Without `follow` a first look (`lstat`) also spares opening a device at all. The
/// one opener of every file an operator or another user may have put there.
pub(crate) fn open_regular(path: &Path, follow: bool) -> Result<File, ReadError> {
    let io = io_error(path);
    if !follow {
        let seen = fs::symlink_metadata(path).map_err(&io)?;
        check_type(path, seen.file_type())?;
    }
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nofollow | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(&io)?;
    check_type(path, file.metadata().map_err(&io)?.file_type())?;
    Ok(file)
}

/// The whole of `file` (opened from `path`), when it is at most `max` bytes.
pub(crate) fn read_at_most(file: File, path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    let io = io_error(path);
    let too_large = |size: u64| ReadError::TooLarge {
        path: path.display().to_string(),
        size,
    };
    let len = file.metadata().map_err(&io)?.len();
    if len > max {
        return Err(too_large(len));
    }
    let mut body = Vec::new();
    file.take(max + 1).read_to_end(&mut body).map_err(&io)?;
    if body.len() as u64 > max {
        return Err(too_large(body.len() as u64));
    }
    Ok(body)
}

/// Reads `path`, which a user other than the reader may have put there: never through a
/// symbolic link, never from anything but a regular file (a FIFO or a device could block the
/// reader forever), never more than [`MAX_READ`] bytes ([`open_regular`]).
pub(crate) fn read_untrusted(path: &Path) -> Result<Vec<u8>, ReadError> {
    read_at_most(open_regular(path, false)?, path, MAX_READ)
}

/// An I/O error on `path` as a [`ReadError`].
fn io_error(path: &Path) -> impl Fn(std::io::Error) -> ReadError + '_ {
    move |e: std::io::Error| {
        let path = path.display().to_string();
        match e.raw_os_error() {
            Some(libc::ENOENT) => ReadError::Missing { path },
            Some(libc::ELOOP) => ReadError::Symlink { path },
            // open(2) of a socket.
            Some(libc::ENXIO) => ReadError::NotRegular {
                path,
                what: "a socket",
            },
            _ => ReadError::Io { path, reason: e },
        }
    }
}

/// An error unless `t` is a regular file.
fn check_type(path: &Path, t: FileType) -> Result<(), ReadError> {
    let path = path.display().to_string();
    if t.is_symlink() {
        return Err(ReadError::Symlink { path });
    }
    match not_regular(t) {
        Some(what) => Err(ReadError::NotRegular { path, what }),
        None => Ok(()),
    }
}

/// An exclusive `flock(2)` on the directory of a shared file, released when dropped. Locking
/// the directory, not a lock file beside it, creates nothing in a directory root may share with
/// another user.
pub(crate) struct DirLock {
    _dir: File,
}

impl DirLock {
    /// Locks the directory of `file`, waiting at most `wait` for whoever holds it: `None` when
    /// it is still held then.
    pub(crate) fn take(file: &Path, wait: Duration) -> std::io::Result<Option<DirLock>> {
        let dir = match file.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let f = File::open(dir)?;
        let until = Instant::now() + wait;
        loop {
            match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => return Ok(Some(DirLock { _dir: f })),
                Err(rustix::io::Errno::WOULDBLOCK) => {}
                Err(e) => return Err(e.into()),
            }
            if Instant::now() >= until {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Makes a FIFO (named pipe) at `path`, mode 0644: for the tests that plant one where a file
/// should be.
pub fn mkfifo(path: &Path) {
    use rustix::fs::{mknodat, FileType, Mode, CWD};
    let made = mknodat(CWD, path, FileType::Fifo, Mode::from_raw_mode(0o644), 0);
    assert!(made.is_ok(), "mkfifo {}: {made:?}", path.display());
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;

    /// Runs `f` on another thread and fails the test if it has not returned within 5 s: a
    /// reader a FIFO holds forever would otherwise hang the test run instead of failing it.
    pub(crate) fn within_5s<T: Send + 'static>(
        what: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("{what} did not return within 5 s: it blocks"))
    }

    /// What user nthd can put at a name in its directory, besides a good file.
    #[derive(Debug, Clone, Copy)]
    pub(crate) enum Trap {
        Fifo,
        Symlink,
        Directory,
        Oversize,
        Socket,
    }

    pub(crate) const TRAPS: [Trap; 5] = [
        Trap::Fifo,
        Trap::Symlink,
        Trap::Directory,
        Trap::Oversize,
        Trap::Socket,
    ];

    impl Trap {
        /// Puts the trap at `path` (a symbolic link points to a valid file outside); what the
        /// refusal must say. The socket's listener is returned to keep it open.
        pub(crate) fn plant(
            self,
            path: &Path,
            valid: &[u8],
        ) -> (&'static str, Option<std::os::unix::net::UnixListener>) {
            match self {
                Trap::Fifo => {
                    mkfifo(path);
                    ("is a FIFO (named pipe), not a regular file", None)
                }
                Trap::Symlink => {
                    let target = path.with_extension("target");
                    fs::write(&target, valid).unwrap();
                    std::os::unix::fs::symlink(&target, path).unwrap();
                    ("is a symbolic link, which nthd does not follow", None)
                }
                Trap::Directory => {
                    fs::create_dir(path).unwrap();
                    ("is a directory, not a regular file", None)
                }
                Trap::Oversize => {
                    let mut body = valid.to_vec();
                    body.resize(usize::try_from(MAX_READ).unwrap() + 1, b' ');
                    fs::write(path, body).unwrap();
                    ("is larger than 1 MiB", None)
                }
                Trap::Socket => {
                    let l = std::os::unix::net::UnixListener::bind(path).unwrap();
                    ("is a socket, not a regular file", Some(l))
                }
            }
        }
    }

    #[test]
    fn every_trap_is_refused_at_once_with_what_it_is_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        for trap in TRAPS {
            let path = dir.path().join(format!("{trap:?}.json"));
            let (want, _listener) = trap.plant(&path, b"{}");
            let p = path.clone();
            let e = within_5s(&format!("reading a {trap:?}"), move || read_untrusted(&p))
                .expect_err("a trap was read");
            let e = e.with_fix();
            let fix = format!("; move it away: mv {0} {0}.bad", path.display());
            assert!(e.contains(want) && e.contains(&fix), "{trap:?}: {e}");
        }
    }

    #[test]
    fn a_regular_file_up_to_the_cap_is_read_and_nothing_else_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let body = vec![b'x'; usize::try_from(MAX_READ).unwrap()];
        fs::write(&path, &body).unwrap();
        assert_eq!(read_untrusted(&path).unwrap(), body);
        let none: PathBuf = dir.path().join("none");
        let e = read_untrusted(&none).unwrap_err();
        assert!(e.is_missing(), "{e}");
        // A dangling link is a link, not a missing file.
        std::os::unix::fs::symlink(&none, dir.path().join("dangling")).unwrap();
        let e = read_untrusted(&dir.path().join("dangling")).unwrap_err();
        assert!(matches!(e, ReadError::Symlink { .. }), "{e}");
    }
}
