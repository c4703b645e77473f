//! `--webhook-headers-file`: secret headers (tokens) added to every webhook request.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use http::{HeaderMap, HeaderName, HeaderValue};

use super::WebhookError;

/// The largest headers file read, in bytes.
const MAX_FILE: u64 = 64 * 1024;

/// Headers from the headers file. Their values are secrets: `Debug` shows the names only, and
/// every value is marked sensitive (hyper leaves such values out of its own debug output).
#[derive(Clone, Default)]
pub struct SecretHeaders(HeaderMap);

impl fmt::Debug for SecretHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut l = f.debug_map();
        for name in self.0.keys() {
            l.entry(&name.as_str(), &"<redacted>");
        }
        l.finish()
    }
}

impl SecretHeaders {
    /// No headers.
    pub fn none() -> SecretHeaders {
        SecretHeaders::default()
    }

    /// Reads `path`. It must be owned by `owner_uid` (root, 0, in the daemon) and be neither
    /// writable by group or others nor readable by others, since it holds secrets. Lines are
    /// `Name: value`; blank lines and lines starting with `#` are skipped.
    pub fn load(path: &Path, owner_uid: u32) -> Result<SecretHeaders, WebhookError> {
        let text = read_secret_file(path, owner_uid, "webhook headers file")?;
        parse(path, &text)
    }

    /// Whether there is no header at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The names, for messages.
    pub fn names(&self) -> Vec<String> {
        self.0.keys().map(|k| k.as_str().to_string()).collect()
    }

    pub(crate) fn map(&self) -> &HeaderMap {
        &self.0
    }
}

/// Reads a file that holds secrets (`what` names it in errors): it must be a regular file owned
/// by `owner` (root, 0, in the daemon), neither writable by group or others nor readable by
/// others, and at most [`MAX_FILE`] bytes. The checks are on the file opened, not on the path:
/// no race with a rename.
pub(crate) fn read_secret_file(
    path: &Path,
    owner: u32,
    what: &'static str,
) -> Result<String, WebhookError> {
    let read_err = |e: std::io::Error| WebhookError::HeadersRead {
        what,
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    // Not through a symbolic link, and without waiting for a writer when it is a FIFO.
    let file = crate::files::open_regular(path, false).map_err(|e| WebhookError::HeadersRead {
        what,
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let meta = file.metadata().map_err(read_err)?;
    check_permissions(path, meta.uid(), meta.mode(), owner).map_err(|e| e.for_file(what))?;
    let mut text = String::new();
    file.take(MAX_FILE + 1)
        .read_to_string(&mut text)
        .map_err(read_err)?;
    if text.len() as u64 > MAX_FILE {
        return Err(read_err(std::io::Error::other(format!(
            "larger than {MAX_FILE} bytes"
        ))));
    }
    Ok(text)
}

fn check_permissions(path: &Path, uid: u32, mode: u32, owner: u32) -> Result<(), WebhookError> {
    let problem = if uid != owner {
        let want = if owner == 0 {
            "root".to_string()
        } else {
            format!("uid {owner}")
        };
        format!("is owned by uid {uid}, not {want}")
    } else if mode & 0o022 != 0 {
        format!(
            "is writable by group or others (mode {:04o})",
            mode & 0o7777
        )
    } else if mode & 0o004 != 0 {
        format!("is readable by others (mode {:04o})", mode & 0o7777)
    } else {
        return Ok(());
    };
    Err(WebhookError::HeadersPermissions {
        what: "webhook headers file",
        path: path.to_path_buf(),
        problem,
    })
}

pub(super) fn parse(path: &Path, text: &str) -> Result<SecretHeaders, WebhookError> {
    let mut map = HeaderMap::new();
    for (i, line) in text.lines().enumerate() {
        let err = |reason: &str| WebhookError::HeadersSyntax {
            path: path.to_path_buf(),
            line: i + 1,
            reason: reason.to_string(),
        };
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line.split_once(':').ok_or_else(|| err("no `:`"))?;
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| err("the header name is not a valid HTTP header name"))?;
        if is_reserved(&name) {
            return Err(err(&format!("nthd sets the `{name}` header itself")));
        }
        let mut value = HeaderValue::from_str(value.trim())
            .map_err(|_| err(&format!("the value of `{name}` cannot be sent in a header")))?;
        value.set_sensitive(true);
        map.append(name, value);
    }
    Ok(SecretHeaders(map))
}

/// Headers the request needs as nthd sets them.
fn is_reserved(name: &HeaderName) -> bool {
    use http::header::*;
    [
        CONTENT_TYPE,
        CONTENT_LENGTH,
        HOST,
        TRANSFER_ENCODING,
        CONNECTION,
    ]
    .contains(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_redacts() {
        let p = Path::new("/etc/nthd/webhook-headers");
        let h = parse(
            p,
            "# token\n\nAuthorization: Bearer s3cr3t\n  X-Team : a:b  \nx-team: c\n",
        )
        .unwrap();
        assert_eq!(h.map().get("authorization").unwrap(), "Bearer s3cr3t");
        assert_eq!(h.map().get_all("x-team").iter().count(), 2);
        assert_eq!(h.map().get("x-team").unwrap(), "a:b");
        let dbg = format!("{h:?}");
        assert!(
            dbg.contains("authorization") && !dbg.contains("s3cr3t"),
            "{dbg}"
        );
    }

    #[test]
    fn bad_lines_name_the_line_not_the_value() {
        let p = Path::new("/f");
        for (text, line) in [
            ("A: b\nnocolon s3cr3t\n", 2),
            ("Bad Name: s3cr3t", 1),
            ("X: s3cr3t\u{7}", 1),
            ("\n\nContent-Type: s3cr3t", 3),
        ] {
            let e = parse(p, text).unwrap_err().to_string();
            assert!(e.contains(&format!("line {line}")), "{e}");
            assert!(!e.contains("s3cr3t"), "{e}");
        }
    }

    /// A FIFO named as the headers file is refused at once (never a wait for a writer), and a
    /// symbolic link is not followed: each says what it is.
    #[test]
    fn a_fifo_or_a_link_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("headers");
        crate::files::mkfifo(&fifo);
        let me = rustix::process::geteuid().as_raw();
        let start = std::time::Instant::now();
        let e = read_secret_file(&fifo, me, "headers")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a regular file"), "{e}");
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
        let real = dir.path().join("real");
        std::fs::write(&real, "X-Token: t\n").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = read_secret_file(&link, me, "headers")
            .unwrap_err()
            .to_string();
        assert!(e.contains("symbolic link"), "{e}");
    }

    #[test]
    fn permissions() {
        let p = Path::new("/etc/nthd/h");
        assert!(check_permissions(p, 0, 0o100640, 0).is_ok());
        assert!(check_permissions(p, 0, 0o100600, 0).is_ok());
        for (uid, mode, want) in [
            (1000, 0o100640, "owned by uid 1000, not root"),
            (0, 0o100660, "writable by group or others (mode 0660)"),
            (0, 0o100642, "writable"),
            (0, 0o100644, "readable by others"),
        ] {
            let e = check_permissions(p, uid, mode, 0).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
            assert!(
                e.contains("chown root:nthd /etc/nthd/h; chmod 0640 /etc/nthd/h"),
                "{e}"
            );
        }
    }
}
