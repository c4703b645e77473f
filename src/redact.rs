//! How nthd shows a URL it was given: `scheme://host[:port]`, and never more.
//!
//! A webhook URL's path or query often is the secret (Slack's and Teams' are), and a user name
//! and password may sit before the host. The text nthd shows goes to the journal, the status
//! file (mode 0644) and node-problem-detector's condition, so it is built from the parsed
//! URL's scheme, host and port alone, never cut out of the raw text. Where the host cannot be
//! told for sure, less is shown: a password may hold an unencoded `/`, `?` or `#`, which ends
//! the URL's authority early (`https://bot:443/cr3t@hooks.example.com/x` parses as host `bot`,
//! port 443), so a URL with an `@` anywhere after its authority shows its scheme only, and a
//! URL that does not parse shows its scheme only, or [`UNPARSEABLE`].

/// What an unparseable URL without a recognisable scheme is shown as.
pub(crate) const UNPARSEABLE: &str = "<unparseable URL>";

/// The longest scheme shown: longer ones are not a URL nthd takes.
const MAX_SCHEME: usize = 10;

/// `s` as nthd shows it anywhere: `scheme://host[:port]` (scheme and host in lower case), or
/// `scheme://…` when the host cannot be told for sure, or [`UNPARSEABLE`].
pub(crate) fn shown(s: &str) -> String {
    let s = s.trim();
    let Some(scheme) = scheme_of(s) else {
        return UNPARSEABLE.to_string();
    };
    let only_scheme = format!("{scheme}://…");
    // The authority's raw text: up to the first `/`, `?` or `#` (RFC 3986, as http::Uri reads
    // it). An `@` after it may end a user name or password, with the real host after it.
    let rest = &s[scheme.len() + 3..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if rest[end..].contains('@') {
        return only_scheme;
    }
    // Only the scheme and authority are parsed: they are all that is shown.
    let Ok(uri) = s[..scheme.len() + 3 + end].parse::<http::Uri>() else {
        return only_scheme;
    };
    let Some(auth) = uri.authority() else {
        return only_scheme;
    };
    let host = auth.host().to_ascii_lowercase();
    if host.is_empty() || !host.bytes().all(|b| b.is_ascii_graphic()) {
        return only_scheme;
    }
    match auth.port_u16() {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    }
}

/// The scheme of `s` in lower case, when `s` starts with `scheme://` and the scheme is one
/// (RFC 3986: a letter, then letters, digits, `+`, `-`, `.`) of at most [`MAX_SCHEME`]
/// characters.
fn scheme_of(s: &str) -> Option<String> {
    let (scheme, _) = s.split_once("://")?;
    let mut chars = scheme.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let ok = first_ok
        && scheme.len() <= MAX_SCHEME
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    ok.then(|| scheme.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each URL, what is shown, and the secrets in it: not one of their bytes may show (the
    /// host and scheme are chosen to share no byte with them).
    #[test]
    fn only_scheme_host_and_port_are_ever_shown() {
        let cases: &[(&str, &str, &[&str])] = &[
            (
                "https://bot:s3/cr3t@hooks.example:8443/x?token=a#frag",
                "https://…",
                &["bot", "s3", "cr3t", "token", "frag"],
            ),
            (
                "https://u@ser:p?ss#w@hooks.example/",
                "https://…",
                &["u@", "ser", "p?", "ss", "#w"],
            ),
            (
                "https://bot:443/cr3t@hooks.example/x",
                "https://…",
                &["bot", "443", "cr3t"],
            ),
            (
                "http://a:b@[::1]:9/p",
                "http://[::1]:9",
                &["a:", ":b", "/p"],
            ),
            (
                "https://Zq:Yv@Hooks.Example:8443/T0/SECRET?x=1#f",
                "https://hooks.example:8443",
                &["Zq", "Yv", "T0", "SECRET", "x=1", "#f"],
            ),
            (
                "https://hooks.example/services/T0/B0/SECRET?token=QQ#WW",
                "https://hooks.example",
                &["services", "T0", "SECRET", "token", "QQ", "WW"],
            ),
            (
                "ftp://hooks.example/SECRET",
                "ftp://hooks.example",
                &["SECRET"],
            ),
            ("https://[::1", "https://…", &[]),
            ("hooks.example/SECRET", UNPARSEABLE, &["SECRET", "hooks"]),
            ("garbage SECRET", UNPARSEABLE, &["SECRET", "garbage"]),
            ("\u{1b}[31m://x", UNPARSEABLE, &["\u{1b}"]),
            ("", UNPARSEABLE, &[]),
        ];
        for (url, want, secrets) in cases {
            let got = shown(url);
            assert_eq!(&got, want, "{url:?}");
            for secret in *secrets {
                assert!(!got.contains(secret), "{secret:?} of {url:?} shows: {got}");
            }
        }
    }

    /// Whatever the text, what is shown is a scheme and at most a host and port: no `@`, no
    /// path, query or fragment, no control character.
    #[test]
    fn nothing_after_the_host_ever_shows() {
        let parts = [
            "https://", "a", ":", "b", "@", "/", "?", "#", "[::1]", "9", "h.x",
        ];
        let mut n = 0;
        for a in parts {
            for b in parts {
                for c in parts {
                    for d in parts {
                        let url = format!("{a}{b}{c}{d}/PATH?Q#F");
                        let got = shown(&url);
                        n += 1;
                        assert!(
                            !got.contains(['@', '?', '#'])
                                && !got.contains("PATH")
                                && got
                                    .bytes()
                                    .all(|b| b.is_ascii_graphic() || b == b' ' || b >= 0x80)
                                && got.matches('/').count() <= 2,
                            "{url:?} shows {got:?}"
                        );
                    }
                }
            }
        }
        assert_eq!(n, 11usize.pow(4));
    }
}
