//! The fake logind on a private bus.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use nthd_testkit::logind::{
    login1_proxy, FakeLogind, PrivateBus, ShutdownReason, ERR_ACCESS_DENIED,
    ERR_INTERACTIVE_AUTH_REQUIRED, ERR_INVALID_ARGS, ERR_OPERATION_IN_PROGRESS, LOGIN1_NAME,
};

/// The D-Bus error name of a failed call. zbus turns the well-known `org.freedesktop.DBus.Error.*`
/// names into `Error::FDO`, anything else into `Error::MethodError`.
fn method_error_name(e: &zbus::Error) -> String {
    use zbus::DBusError;
    match e {
        zbus::Error::MethodError(name, _, _) => name.to_string(),
        zbus::Error::FDO(f) => f.name().to_string(),
        other => panic!("expected a D-Bus method error, got {other:?}"),
    }
}

fn method_error_message(e: &zbus::Error) -> Option<String> {
    use zbus::DBusError;
    match e {
        zbus::Error::MethodError(_, msg, _) => msg.clone(),
        zbus::Error::FDO(f) => f.description().map(str::to_string),
        _ => None,
    }
}

use nthd_testkit::effective_uid;

struct Env {
    fake: FakeLogind,
    conn: zbus::Connection,
    // Last: the bus outlives the connections.
    _bus: PrivateBus,
}

async fn env() -> Env {
    let bus = PrivateBus::start().expect("dbus-daemon");
    let fake = FakeLogind::serve(bus.address()).await.unwrap();
    let conn = bus.connect().await.unwrap();
    Env {
        fake,
        conn,
        _bus: bus,
    }
}

#[tokio::test]
async fn private_bus_address_and_cleanup() {
    let bus = PrivateBus::start().unwrap();
    assert!(bus.address().starts_with("unix:path="), "{}", bus.address());
    let sock = bus.socket_path().to_path_buf();
    assert!(sock.exists());
    let conn = bus.connect().await.unwrap();
    assert!(conn.unique_name().is_some());
    drop(conn);
    drop(bus);
    assert!(!sock.exists(), "temp dir removed on drop");
}

#[tokio::test]
async fn power_off_is_recorded_and_signalled() {
    let e = env().await;
    let p = login1_proxy(&e.conn).await.unwrap();
    let mut sig = p.receive_prepare_for_shutdown().await.unwrap();
    assert_eq!(p.can_power_off().await.unwrap(), "yes");
    assert!(!p.preparing_for_shutdown().await.unwrap());

    let t0 = std::time::SystemTime::now();
    p.power_off(false).await.unwrap();
    assert_eq!(e.fake.power_off_count(), 1);
    let calls = e.fake.calls_of("PowerOff");
    assert_eq!(calls[0].args, serde_json::json!([false]));
    assert_eq!(
        calls[0].sender.as_deref(),
        Some(e.conn.unique_name().unwrap().as_str())
    );
    assert!(calls[0].at >= t0);
    assert!(calls[0].error.is_none());
    assert!(p.preparing_for_shutdown().await.unwrap());

    let s = tokio::time::timeout(Duration::from_secs(5), sig.next())
        .await
        .expect("PrepareForShutdown not received")
        .unwrap();
    assert!(*s.args().unwrap().start());

    let sd = e
        .fake
        .wait_for_shutdown(Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(sd.reason, ShutdownReason::NoDelayInhibitors);
    assert_eq!(sd.method, "PowerOff");

    // A second request while going down is refused, as logind does, and does not signal.
    let err = p.power_off(true).await.unwrap_err();
    assert_eq!(method_error_name(&err), ERR_OPERATION_IN_PROGRESS);
    assert_eq!(e.fake.power_off_count(), 2);
    assert_eq!(
        e.fake.calls_of("PowerOff")[1].error.as_deref(),
        Some(ERR_OPERATION_IN_PROGRESS)
    );
    let err = p.reboot(false).await.unwrap_err();
    assert_eq!(method_error_name(&err), ERR_OPERATION_IN_PROGRESS);
    assert!(tokio::time::timeout(Duration::from_millis(300), sig.next())
        .await
        .is_err());
    assert_eq!(e.fake.shutdowns().len(), 1);
}

#[tokio::test]
async fn reboot_counts_separately() {
    let e = env().await;
    let p = login1_proxy(&e.conn).await.unwrap();
    assert_eq!(p.can_reboot().await.unwrap(), "yes");
    p.reboot(false).await.unwrap();
    assert_eq!((e.fake.reboot_count(), e.fake.power_off_count()), (1, 0));
    assert_eq!(
        e.fake
            .wait_for_shutdown(Duration::from_secs(5))
            .await
            .unwrap()
            .method,
        "Reboot"
    );
}

#[tokio::test]
async fn error_knobs_return_the_named_error() {
    let e = env().await;
    let p = login1_proxy(&e.conn).await.unwrap();
    let mut sig = p.receive_prepare_for_shutdown().await.unwrap();
    for name in [
        ERR_INTERACTIVE_AUTH_REQUIRED,
        ERR_ACCESS_DENIED,
        "com.example.Weird.Error",
    ] {
        e.fake
            .set_power_off_error(Some((name, "Interactive authentication required.")));
        let err = p.power_off(false).await.unwrap_err();
        assert_eq!(method_error_name(&err), name);
        assert_eq!(
            method_error_message(&err).as_deref(),
            Some("Interactive authentication required.")
        );
        assert_eq!(e.fake.calls().last().unwrap().error.as_deref(), Some(name));
    }
    assert_eq!(e.fake.power_off_count(), 3, "failed calls are counted");
    assert!(!p.preparing_for_shutdown().await.unwrap());
    assert!(tokio::time::timeout(Duration::from_millis(200), sig.next())
        .await
        .is_err());

    e.fake.set_reboot_error(Some((ERR_ACCESS_DENIED, "no")));
    assert_eq!(
        method_error_name(&p.reboot(false).await.unwrap_err()),
        ERR_ACCESS_DENIED
    );

    e.fake.set_power_off_error(None);
    p.power_off(false).await.unwrap();
    assert!(e.fake.calls().last().unwrap().error.is_none());

    e.fake.set_can_power_off("challenge");
    assert_eq!(p.can_power_off().await.unwrap(), "challenge");
    e.fake.set_can_reboot("na");
    assert_eq!(p.can_reboot().await.unwrap(), "na");
}

#[tokio::test]
async fn properties_reflect_knobs() {
    let e = env().await;
    let p = login1_proxy(&e.conn).await.unwrap();
    assert_eq!(p.inhibit_delay_max_usec().await.unwrap(), 5_000_000);
    e.fake.set_inhibit_delay_max(Duration::from_secs(30));
    assert_eq!(p.inhibit_delay_max_usec().await.unwrap(), 30_000_000);
    e.fake.set_preparing(true);
    assert!(p.preparing_for_shutdown().await.unwrap());
    assert_eq!(p.handle_power_key().await.unwrap(), "poweroff");
    e.fake.set_handle_power_key("ignore");
    assert_eq!(p.handle_power_key().await.unwrap(), "ignore");
    assert!(!p.power_key_ignore_inhibited().await.unwrap());
    e.fake.set_power_key_ignore_inhibited(true);
    assert!(p.power_key_ignore_inhibited().await.unwrap());
    assert_eq!(p.scheduled_shutdown().await.unwrap(), (String::new(), 0));
    e.fake.set_scheduled_shutdown("poweroff", 123);
    assert_eq!(
        p.scheduled_shutdown().await.unwrap(),
        ("poweroff".to_string(), 123)
    );
    // Introspection data has the real names and signatures.
    let xml = zbus::fdo::IntrospectableProxy::builder(&e.conn)
        .destination(LOGIN1_NAME)
        .path("/org/freedesktop/login1")
        .build()
        .await
        .unwrap()
        .introspect()
        .await
        .unwrap();
    for needle in [
        r#"<property name="InhibitDelayMaxUSec" type="t" access="read">"#,
        r#"<property name="ScheduledShutdown" type="(st)" access="read">"#,
        r#"<method name="ListInhibitors">"#,
        r#"<arg type="a(ssssuu)" direction="out"/>"#,
        r#"<arg type="h" direction="out"/>"#,
        r#"<signal name="PrepareForShutdown">"#,
    ] {
        assert!(xml.contains(needle), "missing {needle} in\n{xml}");
    }
}

#[tokio::test]
async fn inhibit_is_listed_until_fd_closed() {
    let e = env().await;
    let p = login1_proxy(&e.conn).await.unwrap();
    let fd = p
        .inhibit(
            "shutdown",
            "kubelet",
            "Kubelet needs time to handle node shutdown",
            "delay",
        )
        .await
        .unwrap();
    let rows = p.list_inhibitors().await.unwrap();
    assert_eq!(
        rows,
        vec![(
            "shutdown".to_string(),
            "kubelet".to_string(),
            "Kubelet needs time to handle node shutdown".to_string(),
            "delay".to_string(),
            effective_uid(),
            std::process::id(),
        )]
    );
    let inh = &e.fake.inhibitors()[0];
    assert_eq!(inh.sender, e.conn.unique_name().unwrap().as_str());
    let fd2 = p
        .inhibit("sleep:idle", "me", "because", "block")
        .await
        .unwrap();
    assert_eq!(p.list_inhibitors().await.unwrap().len(), 2);

    drop(fd);
    assert!(
        e.fake.wait_for_inhibitors(1, Duration::from_secs(5)).await,
        "close not detected"
    );
    assert_eq!(p.list_inhibitors().await.unwrap()[0].1, "me");
    drop(fd2);
    assert!(e.fake.wait_for_inhibitors(0, Duration::from_secs(5)).await);

    let inhibit_calls = e.fake.calls_of("Inhibit");
    assert_eq!(inhibit_calls.len(), 2);
    assert_eq!(
        inhibit_calls[0].args,
        serde_json::json!([
            "shutdown",
            "kubelet",
            "Kubelet needs time to handle node shutdown",
            "delay"
        ])
    );
}

#[tokio::test]
async fn inhibit_validates_like_logind() {
    let e = env().await;
    let p = login1_proxy(&e.conn).await.unwrap();
    for (what, mode) in [
        ("shutdown", "later"),
        ("reboot", "delay"),
        ("idle", "delay"),
        ("", "block"),
    ] {
        let err = p.inhibit(what, "t", "t", mode).await.unwrap_err();
        assert_eq!(method_error_name(&err), ERR_INVALID_ARGS, "{what}/{mode}");
    }
    e.fake.set_inhibit_error(Some((ERR_ACCESS_DENIED, "nope")));
    let err = p.inhibit("shutdown", "t", "t", "delay").await.unwrap_err();
    assert_eq!(method_error_name(&err), ERR_ACCESS_DENIED);
    assert!(e.fake.inhibitors().is_empty());
    assert_eq!(e.fake.calls_of("Inhibit").len(), 5);
}

#[tokio::test]
async fn delay_inhibitor_holds_shutdown_until_released() {
    let e = env().await;
    let p = login1_proxy(&e.conn).await.unwrap();
    let mut sig = p.receive_prepare_for_shutdown().await.unwrap();
    let fd = p
        .inhibit("shutdown", "kubelet", "drain", "delay")
        .await
        .unwrap();
    e.fake.set_inhibit_delay_max(Duration::from_secs(30));
    p.power_off(false).await.unwrap();
    let s = tokio::time::timeout(Duration::from_secs(5), sig.next())
        .await
        .unwrap()
        .unwrap();
    assert!(*s.args().unwrap().start());
    // No new shutdown locks while going down (logind's OperationInProgress).
    let err = p
        .inhibit("shutdown", "late", "late", "delay")
        .await
        .unwrap_err();
    assert_eq!(method_error_name(&err), ERR_OPERATION_IN_PROGRESS);

    assert!(e
        .fake
        .wait_for_shutdown(Duration::from_millis(300))
        .await
        .is_none());
    let released = Instant::now();
    drop(fd);
    let sd = e
        .fake
        .wait_for_shutdown(Duration::from_secs(5))
        .await
        .unwrap();
    assert!(released.elapsed() < Duration::from_secs(2));
    assert_eq!(sd.reason, ShutdownReason::InhibitorsReleased);
    assert_eq!(sd.delayed_by.len(), 1);
    assert_eq!(sd.delayed_by[0].who, "kubelet");
    assert!(sd.proceeded_at > sd.requested_at);
}

#[tokio::test]
async fn delay_is_capped_by_inhibit_delay_max() {
    let e = env().await;
    let p = login1_proxy(&e.conn).await.unwrap();
    let _fd = p
        .inhibit("shutdown", "kubelet", "drain", "delay")
        .await
        .unwrap();
    // A block inhibitor does not delay.
    let _blk = p.inhibit("shutdown", "other", "x", "block").await.unwrap();
    e.fake.set_inhibit_delay_max(Duration::from_millis(400));
    let t0 = Instant::now();
    p.power_off(false).await.unwrap();
    let sd = e
        .fake
        .wait_for_shutdown(Duration::from_secs(5))
        .await
        .unwrap();
    let took = t0.elapsed();
    assert_eq!(sd.reason, ShutdownReason::DelayTimeout);
    assert!(took >= Duration::from_millis(400), "{took:?}");
    assert_eq!(sd.delayed_by.len(), 1);
}

#[tokio::test]
async fn cancel_shutdown_emits_false() {
    let e = env().await;
    let p = login1_proxy(&e.conn).await.unwrap();
    let mut sig = p.receive_prepare_for_shutdown().await.unwrap();
    let _fd = p
        .inhibit("shutdown", "kubelet", "drain", "delay")
        .await
        .unwrap();
    p.power_off(false).await.unwrap();
    assert!(*sig.next().await.unwrap().args().unwrap().start());
    e.fake.cancel_shutdown().await.unwrap();
    let s = tokio::time::timeout(Duration::from_secs(5), sig.next())
        .await
        .unwrap()
        .unwrap();
    assert!(!*s.args().unwrap().start());
    assert!(!p.preparing_for_shutdown().await.unwrap());
    // Locks can be taken again, and a new PowerOff signals again.
    let _fd2 = p
        .inhibit("shutdown", "kubelet", "drain", "delay")
        .await
        .unwrap();
    p.power_off(false).await.unwrap();
    assert!(*sig.next().await.unwrap().args().unwrap().start());
}

async fn name_has_owner(conn: &zbus::Connection) -> bool {
    let dbus = zbus::fdo::DBusProxy::new(conn).await.unwrap();
    dbus.name_has_owner(LOGIN1_NAME.try_into().unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn stop_and_restart_release_and_retake_the_name() {
    let e = env().await;
    let p = login1_proxy(&e.conn).await.unwrap();
    p.can_power_off().await.unwrap();
    assert!(name_has_owner(&e.conn).await);
    let _fd = p
        .inhibit("shutdown", "kubelet", "drain", "delay")
        .await
        .unwrap();

    e.fake.stop().await.unwrap();
    assert!(!e.fake.is_serving());
    assert!(!name_has_owner(&e.conn).await);
    assert!(e.fake.inhibitors().is_empty());
    let err = p.power_off(false).await.unwrap_err();
    assert!(
        method_error_name(&err).starts_with("org.freedesktop.DBus.Error."),
        "{err:?}"
    );

    e.fake.start().await.unwrap();
    assert!(name_has_owner(&e.conn).await);
    p.power_off(false).await.unwrap();
    assert_eq!(e.fake.power_off_count(), 1);
    assert_eq!(
        e.fake.calls_of("CanPowerOff").len(),
        1,
        "history kept across restarts"
    );

    e.fake.restart().await.unwrap();
    assert!(name_has_owner(&e.conn).await);
}

#[tokio::test]
async fn dropping_the_handle_releases_the_name() {
    let bus = PrivateBus::start().unwrap();
    let conn = bus.connect().await.unwrap();
    let fake = FakeLogind::serve(bus.address()).await.unwrap();
    assert!(name_has_owner(&conn).await);
    // A second fake cannot take the name while the first has it.
    assert!(FakeLogind::serve(bus.address()).await.is_err());
    drop(fake);
    let deadline = Instant::now() + Duration::from_secs(5);
    while name_has_owner(&conn).await {
        assert!(Instant::now() < deadline, "name not released after drop");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let again = FakeLogind::serve(bus.address()).await.unwrap();
    assert!(again.is_serving());
}

#[test]
fn serve_blocking_works_without_a_runtime() {
    let bus = PrivateBus::start().unwrap();
    let fake = FakeLogind::serve_blocking(bus.address()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let conn = bus.connect().await.unwrap();
        let p = login1_proxy(&conn).await.unwrap();
        p.power_off(true).await.unwrap();
        assert!(fake.wait_for_calls(1, Duration::from_secs(5)).await);
        fake.stop().await.unwrap();
        assert!(!name_has_owner(&conn).await);
        fake.start().await.unwrap();
        assert!(name_has_owner(&conn).await);
    });
    assert_eq!(fake.power_off_count(), 1);
    drop(fake);
}

/// A hung logind: the name is owned, the call is accepted by the bus, and no answer comes.
#[tokio::test]
async fn hung_logind_never_answers_until_it_goes_away() {
    let bus = PrivateBus::start().unwrap();
    let fake = FakeLogind::serve(bus.address()).await.unwrap();
    fake.stop().await.unwrap();
    let hung = nthd_testkit::logind::HungLogind::take_name(bus.address()).unwrap();
    let conn = bus.connect().await.unwrap();
    let p = login1_proxy(&conn).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(2), p.can_power_off()).await;
    assert!(r.is_err(), "a hung logind answered: {r:?}");
    drop(hung);
    fake.start().await.unwrap();
    let p = login1_proxy(&conn).await.unwrap();
    assert_eq!(p.can_power_off().await.unwrap(), "yes");
}
