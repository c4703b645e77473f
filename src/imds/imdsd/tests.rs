use super::*;
use crate::imds::{ClientOptions, ImdsClient, Via};
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

pub(crate) type Calls = Arc<Mutex<Vec<Value>>>;

/// A stand-in for systemd-imdsd on a socket in a temporary directory: AWS's vendor info, and
/// `Get` answered from `keys` (a key that is not there: `KeyNotFound`; the value `!Name`: the
/// error `Name`, and `!Name {…}` with those parameters). Every call is recorded.
pub(crate) fn fake_imdsd(dir: &Path, keys: &[(&str, &str)]) -> (PathBuf, Calls) {
    let path = dir.join("io.systemd.InstanceMetadata");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let keys: Vec<(String, String)> = keys
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let calls: Calls = Arc::default();
    let seen = calls.clone();
    std::thread::spawn(move || loop {
        let Ok((s, _)) = listener.accept() else {
            return;
        };
        let (keys, seen) = (keys.clone(), seen.clone());
        std::thread::spawn(move || {
            let mut s = std::io::BufReader::new(s);
            loop {
                let mut buf = Vec::new();
                if s.read_until(0, &mut buf).unwrap_or(0) == 0 {
                    return;
                }
                buf.pop();
                let call: Value = serde_json::from_slice(&buf).unwrap();
                seen.lock().unwrap().push(call.clone());
                let mut out = answer(&call, &keys).into_bytes();
                out.push(0);
                s.get_mut().write_all(&out).unwrap();
            }
        });
    });
    (path, calls)
}

fn answer(call: &Value, keys: &[(String, String)]) -> String {
    if call["method"] == VENDOR_INFO {
        return r#"{"parameters":{"vendor":"amazon-ec2","dataUrl":"http://169.254.169.254/latest","tokenUrl":"http://169.254.169.254/latest/api/token"}}"#.into();
    }
    let key = call["parameters"]["key"].as_str().unwrap_or_default();
    match keys.iter().find(|(k, _)| k == key) {
        Some((_, v)) if v.starts_with('!') => match v[1..].split_once(' ') {
            Some((name, params)) => format!(r#"{{"error":"{name}","parameters":{params}}}"#),
            None => format!(r#"{{"error":"{}"}}"#, &v[1..]),
        },
        Some((_, v)) => {
            let data = base64::engine::general_purpose::STANDARD.encode(v);
            format!(r#"{{"parameters":{{"data":"{data}","interface":2}}}}"#)
        }
        None => r#"{"error":"io.systemd.InstanceMetadata.KeyNotFound"}"#.into(),
    }
}

pub(crate) fn client(socket: &Path, root: &Path) -> ImdsClient {
    let opts = ClientOptions {
        via: Via::SystemdImdsd,
        imdsd_socket: socket.to_path_buf(),
        imdsd_root: root.to_path_buf(),
        ..ClientOptions::default()
    };
    ImdsClient::new("http://169.254.169.254", opts).unwrap()
}

#[test]
fn keys_are_paths_under_the_data_url() {
    let mut p = Map::new();
    p.insert("vendor".into(), "microsoft-azure".into());
    p.insert("dataUrl".into(), "http://169.254.169.254/metadata".into());
    p.insert(
        "dataUrlSuffix".into(),
        "?api-version=2025-04-07&format=text".into(),
    );
    let v = Vendor::from_reply(&p).unwrap();
    assert_eq!(v.prefix, "/metadata");
    assert_eq!(
        v.key("/metadata/scheduledevents?api-version=2020-07-01")
            .as_deref(),
        Some("/scheduledevents")
    );
    assert_eq!(v.key("/metadataX/a"), None);
    assert_eq!(v.key("/latest/meta-data/x"), None);
    p.remove("dataUrlSuffix");
    let v = Vendor::from_reply(&p).unwrap();
    assert_eq!(v.key("/metadata/a?b=c").as_deref(), Some("/a?b=c"));
    assert_eq!(Vendor::from_reply(&Map::new()), None);
}

#[test]
fn reads_go_through_get_with_the_key_and_a_one_second_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (sock, calls) = fake_imdsd(
        dir.path(),
        &[
            ("/meta-data/instance-id", "i-0123"),
            (
                "/meta-data/events/x",
                "!io.systemd.InstanceMetadata.NotAvailable",
            ),
        ],
    );
    let c = client(&sock, dir.path());
    assert_eq!(c.access(), crate::imds::Access::Imdsd);
    let r = c.get("/latest/meta-data/instance-id", &[]).unwrap();
    assert_eq!((r.status, r.body.as_str()), (200, "i-0123"));
    let r = c
        .get("/latest/meta-data/spot/instance-action", &[])
        .unwrap();
    assert_eq!(r.status, 404);
    let r = c.get("/latest/meta-data/events/x", &[]).unwrap();
    assert_eq!(r.status, 403);
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls[0]["method"], VENDOR_INFO, "the vendor first, once");
    assert_eq!(
        calls.iter().filter(|c| c["method"] == VENDOR_INFO).count(),
        1
    );
    let get = &calls[1]["parameters"];
    assert_eq!(get["key"], "/meta-data/instance-id");
    // imdsd's cache off, and a 6 h token (its TTL is refreshUSec in seconds).
    assert_eq!(
        (get["cache"].clone(), get["refreshUSec"].clone()),
        (false.into(), 21_600_000_000u64.into())
    );
    assert_eq!(get["allowInteractiveAuthentication"], false);
}

#[test]
fn a_post_and_a_path_outside_the_data_url_say_what_cannot_be_done() {
    let dir = tempfile::tempdir().unwrap();
    let (sock, calls) = fake_imdsd(dir.path(), &[]);
    let c = client(&sock, dir.path());
    let e = c
        .send(Method::POST, "/latest/x", &[], Some("{}".into()), None)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("cannot acknowledge or POST through systemd-imdsd"),
        "{e}"
    );
    assert!(
        calls.lock().unwrap().is_empty(),
        "a POST never reaches imdsd"
    );
    let e = c
        .get("/computeMetadata/v1/instance/preempted", &[])
        .unwrap_err();
    assert!(
        e.to_string().contains("outside systemd-imdsd's data URL"),
        "{e}"
    );
}

#[test]
fn a_refusal_names_the_missing_owner_then_the_missing_rule() {
    let dir = tempfile::tempdir().unwrap();
    let denied = "!org.varlink.service.PermissionDenied";
    let (sock, _) = fake_imdsd(dir.path(), &[("/meta-data/instance-id", denied)]);
    let c = client(&sock, dir.path());
    let write = |p: &str, text: &str| {
        let f = dir.path().join(p.trim_start_matches('/'));
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, text).unwrap();
    };
    write(
        POLICY,
        r#"<action id="io.systemd.imds.get"><defaults/></action>"#,
    );
    let e = c.get("/latest/meta-data/instance-id", &[]).unwrap_err();
    assert_eq!(e.outcome(), "imdsd_denied");
    assert!(e.to_string().contains("names no owner"), "{e}");
    assert!(
        e.to_string().contains("org.freedesktop.policykit.owner"),
        "{e}"
    );
    write(
        POLICY,
        r#"<annotate key="org.freedesktop.policykit.owner">unix-user:systemd-imds</annotate>"#,
    );
    write(RULE, "// power-off only");
    let e = c.get("/latest/meta-data/instance-id", &[]).unwrap_err();
    assert!(
        e.to_string().contains("does not grant io.systemd.imds.get"),
        "{e}"
    );
    assert!(e.to_string().contains("50-nthd.rules"), "{e}");
    write(RULE, "io.systemd.imds.get");
    let e = c.get("/latest/meta-data/instance-id", &[]).unwrap_err();
    assert!(e.to_string().contains("yet polkit refused"), "{e}");
}

#[test]
fn no_socket_names_the_package() {
    let dir = tempfile::tempdir().unwrap();
    let c = client(&dir.path().join("none"), dir.path());
    let e = c.get("/latest/meta-data/instance-id", &[]).unwrap_err();
    assert_eq!(e.outcome(), "imdsd");
    assert!(
        e.to_string().contains("install the systemd-imds package"),
        "{e}"
    );
}

/// EC2 answers the spot notice's path with a 404 page while none is pending; imdsd 261-262
/// cannot pass an error with a body on and answers `io.systemd.System` with its internal errno
/// mark left in. nthd decodes it, says why it blinds the read, and names the way out. The
/// interface of the first answer goes back with the next reads.
#[test]
fn imdsds_errno_is_decoded_and_a_404_with_a_body_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (sock, calls) = fake_imdsd(
        dir.path(),
        &[
            ("/meta-data/instance-id", "i-0123"),
            (
                "/meta-data/spot/instance-action",
                r#"!io.systemd.System {"origin":"linux","errno":1073741955}"#,
            ),
            (
                "/meta-data/events/x",
                r#"!io.systemd.System {"origin":"linux","errno":5,"errnoName":"EIO"}"#,
            ),
        ],
    );
    let c = client(&sock, dir.path());
    c.get("/latest/meta-data/instance-id", &[]).unwrap();
    let e = c
        .get("/latest/meta-data/spot/instance-action", &[])
        .unwrap_err()
        .to_string();
    for want in [
        "errno 1073741955: ENOTRECOVERABLE",
        "a 404 page",
        "cannot tell \"no notice\" from a failure",
        "systemd.imds.network=unlocked",
    ] {
        assert!(e.contains(want), "{want:?} not in {e}");
    }
    let e = c
        .get("/latest/meta-data/events/x", &[])
        .unwrap_err()
        .to_string();
    // The name as imdsd gives it; the text is the C library's (glibc and musl word it apart).
    assert!(e.contains("errno 5: EIO, "), "{e}");
    let gets: Vec<Value> = calls
        .lock()
        .unwrap()
        .iter()
        .filter(|c| c["method"] == GET)
        .map(|c| c["parameters"]["interface"].clone())
        .collect();
    assert_eq!(
        gets,
        [Value::Null, 2.into(), 2.into()],
        "the first answer's interface goes back"
    );
}
