use std::time::{Duration, SystemTime};

use nthd_testkit::logind::{login1_proxy, FakeLogind, PrivateBus, ShutdownReason};
use tokio::sync::{mpsc, watch};

use super::watch::{Msg, Watcher};
use super::*;

fn inhibitor(who: &str, pid: u32, mode: &str) -> Inhibitor {
    Inhibitor {
        what: "shutdown".into(),
        who: who.into(),
        why: "because".into(),
        mode: mode.into(),
        uid: 0,
        pid,
    }
}

#[test]
fn the_margin_is_a_fifth_of_the_budget_within_half_a_second_and_two() {
    assert_eq!(margin(Duration::from_secs(1)), Duration::from_millis(500));
    assert_eq!(margin(Duration::from_secs(5)), Duration::from_secs(1));
    assert_eq!(margin(Duration::from_secs(90)), Duration::from_secs(2));
}

#[test]
fn nthds_own_lock_and_block_locks_are_not_holders() {
    let own = Inhibitor {
        uid: crate::logind::effective_uid(),
        ..inhibitor(crate::logind::DRAIN_LOCK_WHO, 7, "delay")
    };
    let list = vec![
        own,
        inhibitor("kubelet", 8, "delay"),
        inhibitor("backup", 9, "block"),
    ];
    let who: Vec<&str> = others(&list).iter().map(|i| i.who.as_str()).collect();
    assert_eq!(who, ["kubelet"]);
}

#[test]
fn holders_are_marked_released_when_they_go_and_added_when_they_come() {
    let (k, x) = (
        inhibitor("kubelet", 8, "delay"),
        inhibitor("late", 10, "delay"),
    );
    let mut h = Holders::default();
    h.track(&[&k], Duration::ZERO);
    h.track(&[&k, &x], Duration::from_millis(1200));
    h.track(&[&x], Duration::from_millis(4960));
    let h = h.list;
    assert_eq!(h.len(), 2);
    assert_eq!((h[0].who.as_str(), h[0].released_s), ("kubelet", Some(5.0)));
    assert_eq!((h[1].who.as_str(), h[1].released_s), ("late", None));
}

/// A neighbour with 8,000 delay locks: the report names 32 holders and counts the rest, and a
/// read of them all stays one pass (its time is not asserted; the cap is).
#[test]
fn thousands_of_holders_are_capped_and_counted() {
    let many: Vec<Inhibitor> = (0..8000)
        .map(|n| inhibitor(&format!("nobody-{n}"), 1000 + n, "delay"))
        .collect();
    let refs: Vec<&Inhibitor> = many.iter().collect();
    let mut h = Holders::default();
    h.track(&refs, Duration::ZERO);
    h.track(&refs, Duration::from_secs(1));
    assert_eq!(h.list.len(), MAX_HOLDERS);
    assert_eq!(h.more, 8000 - 32);
    assert!(h.list.iter().all(|x| x.released_s.is_none()));
    // Half of them go: the listed ones among them are marked released, and the count shrinks
    // only as far as the most held at once (it keeps the peak).
    h.track(&refs[4000..], Duration::from_secs(2));
    assert!(h.list.iter().all(|x| x.released_s == Some(2.0)));
    assert_eq!(h.more, 8000 - 32);
    let mut e = ended(
        Outcome::BudgetExhausted,
        PodsLeft::Known(vec![]),
        None,
        SystemTime::now(),
    );
    e.holders = h;
    let r = Report::new(e);
    assert!(
        r.sentence()
            .contains("(held by up to 7968 holders not named; released: nobody-"),
        "{}",
        r.sentence()
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["holders_more"], 7968);
    assert_eq!(json["holders"].as_array().unwrap().len(), 32);
}

/// Out of budget, the sentence names who still held the drain at the end, and who had let go
/// and when; a drain that was released names everyone who held it.
#[test]
fn the_sentence_tells_who_still_held_from_who_let_go() {
    let (k, n) = (
        inhibitor("kubelet", 8, "delay"),
        inhibitor("backup", 9, "delay"),
    );
    let mut h = Holders::default();
    h.track(&[&k, &n], Duration::ZERO);
    h.track(&[&n], Duration::from_millis(5200));
    let mut e = ended(
        Outcome::BudgetExhausted,
        PodsLeft::Known(vec![]),
        None,
        SystemTime::now(),
    );
    e.holders = h.clone();
    let s = Report::new(e).sentence();
    assert!(
        s.contains("(held by backup; released: kubelet at 5.2 s)"),
        "{s}"
    );
    let mut e = ended(
        Outcome::Released,
        PodsLeft::Known(vec![]),
        None,
        SystemTime::now(),
    );
    e.holders = h;
    let s = Report::new(e).sentence();
    assert!(s.contains("(held by kubelet, backup)"), "{s}");
}

/// One process with many locks under one name is one holder; kubelet, listed by logind after
/// thousands of others, is still named.
#[test]
fn a_holder_counts_once_and_kubelet_is_named_among_thousands() {
    let same: Vec<Inhibitor> = (0..8000).map(|_| inhibitor("hog", 1000, "delay")).collect();
    let mut h = Holders::default();
    h.track(&same.iter().collect::<Vec<_>>(), Duration::ZERO);
    assert_eq!((h.list.len(), h.more), (1, 0));
    let mut many: Vec<Inhibitor> = (0..8000)
        .map(|n| inhibitor(&format!("nobody-{n}"), 1000 + n, "delay"))
        .collect();
    many.push(inhibitor("kubelet", 8, "delay"));
    let mut h = Holders::default();
    h.track(&many.iter().collect::<Vec<_>>(), Duration::ZERO);
    assert_eq!(h.list[0].who, "kubelet");
    assert_eq!((h.list.len(), h.more), (MAX_HOLDERS, 8001 - 32));
}

fn followed(kind: &'static str, accepted: SystemTime, deadline: SystemTime) -> Followed {
    Followed {
        kind,
        id: "n1".into(),
        action: "poweroff",
        deadline: Some(deadline),
        accepted,
        asg_terminate: false,
    }
}

fn ended(outcome: Outcome, pods: PodsLeft, f: Option<Followed>, t0: SystemTime) -> Ended {
    Ended {
        started: t0,
        held: Duration::from_millis(5040),
        budget: Duration::from_secs(30),
        outcome,
        holders: Holders {
            list: vec![Holder::of(&inhibitor("kubelet", 8, "delay"))],
            more: 0,
        },
        pods,
        followed: f,
        now: t0 + Duration::from_secs(5),
    }
}

#[test]
fn a_report_names_the_notice_it_followed_with_the_time_left() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let f = followed("spot-terminate", t0, t0 + Duration::from_secs(120));
    let r = Report::new(ended(
        Outcome::Released,
        PodsLeft::Known(vec![]),
        Some(f),
        t0,
    ));
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["outcome"], "released");
    assert_eq!(v["held_s"], 5.0);
    assert_eq!(v["budget_s"], 30.0);
    assert_eq!(v["pods_left"], serde_json::json!([]));
    assert!(v.get("pods_left_unknown").is_none());
    assert_eq!(v["notice"]["kind"], "spot-terminate");
    assert_eq!(v["notice"]["seconds_left"], 115.0);
    assert_eq!(v["holders"][0]["who"], "kubelet");
    let s = r.sentence();
    assert!(
        s.contains("released after 5.0 s of the 30.0 s budget"),
        "{s}"
    );
    assert!(
        s.contains("no pods left") && s.contains("spot-terminate n1"),
        "{s}"
    );
}

#[test]
fn a_shutdown_long_after_nthds_request_is_not_attributed_to_it() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let old = followed("spot-terminate", t0 - Duration::from_secs(600), t0);
    let pods = PodsLeft::Known(vec!["default/slow".into()]);
    let r = Report::new(ended(Outcome::BudgetExhausted, pods, Some(old), t0));
    let v = serde_json::to_value(&r).unwrap();
    assert!(v["notice"].is_null(), "{v}");
    assert_eq!(v["outcome"], "budget_exhausted");
    assert_eq!(v["pods_left"], serde_json::json!(["default/slow"]));
    let s = r.sentence();
    assert!(
        s.contains("budget exhausted") && s.contains("default/slow"),
        "{s}"
    );
    assert!(s.contains("not a shutdown nthd asked for"), "{s}");
}

#[test]
fn unknown_pods_are_absent_with_the_reason() {
    let t0 = SystemTime::UNIX_EPOCH;
    let pods = PodsLeft::Unknown("no kubepods cgroup".into());
    let r = Report::new(ended(Outcome::Released, pods, None, t0));
    let v = serde_json::to_value(&r).unwrap();
    assert!(v.get("pods_left").is_none(), "{v}");
    assert_eq!(v["pods_left_unknown"], "no kubepods cgroup");
    let back: Report = serde_json::from_value(v).unwrap();
    assert_eq!(back, r);
}

/// No Auto Scaling completion.
struct Nothing;

impl Finish for Nothing {
    async fn prepare(&mut self) -> Result<(), String> {
        Ok(())
    }
    fn heartbeat_every(&self, _: Duration) -> Option<Duration> {
        None
    }
    async fn heartbeat(&mut self) -> Result<(), String> {
        Ok(())
    }
    async fn complete(&mut self, _: std::time::Instant) -> Result<String, String> {
        Err("not asked".into())
    }
}

/// A watcher on a private bus with a fake logind; the test keeps the daemon's ends.
async fn watcher(bus: &PrivateBus) -> (mpsc::Receiver<Msg>, watch::Sender<Option<Followed>>) {
    let (tx, rx) = mpsc::channel(4);
    let (ftx, frx) = watch::channel(None);
    let mut w = Watcher::<Nothing>::new(tx, frx, None);
    w.bus = Some(bus.address().to_string());
    tokio::spawn(w.run());
    (rx, ftx)
}

async fn next(rx: &mut mpsc::Receiver<Msg>, within: Duration) -> Msg {
    tokio::time::timeout(within, rx.recv())
        .await
        .expect("a message from the watcher in time")
        .expect("the watcher is running")
}

/// Starts a shutdown as an admin's `systemctl poweroff` would: not nthd's.
async fn power_off(bus: &PrivateBus) {
    let conn = bus.connect().await.unwrap();
    login1_proxy(&conn)
        .await
        .unwrap()
        .power_off(false)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_that_fits_is_reported_released_and_the_lock_goes_right_after() {
    let bus = PrivateBus::start().unwrap();
    let fake = FakeLogind::serve(bus.address()).await.unwrap();
    fake.set_inhibit_delay_max(Duration::from_secs(20));
    let (mut rx, _f) = watcher(&bus).await;
    assert!(
        matches!(next(&mut rx, Duration::from_secs(5)).await, Msg::Locked(b) if b == Duration::from_secs(20))
    );
    assert!(fake
        .inhibitors()
        .iter()
        .any(|i| i.who == "nthd" && i.mode == "delay"));
    let kubelet = fake.hold_inhibitor("shutdown", "kubelet", "drain", "delay", 0, 4242);
    power_off(&bus).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    fake.release_inhibitor(kubelet);
    let Msg::Report(r, done) = next(&mut rx, Duration::from_secs(3)).await else {
        panic!("no report")
    };
    assert_eq!(r.outcome, Outcome::Released);
    assert!((1.4..=2.0).contains(&r.held_s), "held {}", r.held_s);
    assert_eq!(r.holders.len(), 1);
    assert!(r.notice.is_none(), "an admin's poweroff follows no notice");
    done.send(()).unwrap();
    let s = fake
        .wait_for_shutdown(Duration::from_secs(3))
        .await
        .expect("shutdown proceeded");
    assert_eq!(s.reason, ShutdownReason::InhibitorsReleased);
}

/// `nthd simulate --yes` runs in a process of its own: the shutdown it began is reported as
/// the drill it was, not as one nthd did not ask for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_from_another_process_is_reported_as_a_drill() {
    let bus = PrivateBus::start().unwrap();
    let fake = FakeLogind::serve(bus.address()).await.unwrap();
    fake.set_inhibit_delay_max(Duration::from_secs(5));
    let (tx, mut rx) = mpsc::channel(4);
    let (_ftx, frx) = watch::channel(None);
    let mut w = Watcher::<Nothing>::new(tx, frx, None);
    w.bus = Some(bus.address().to_string());
    let id = crate::notice::NoticeId::drill(crate::notice::NoticeKind::SpotStop, "1");
    let drill = id.to_string();
    w.drills = Some(Box::new(move |started| {
        Some(Followed {
            kind: "spot-stop",
            id: drill.clone(),
            action: "poweroff",
            deadline: None,
            accepted: started,
            asg_terminate: false,
        })
    }));
    tokio::spawn(w.run());
    assert!(matches!(
        next(&mut rx, Duration::from_secs(5)).await,
        Msg::Locked(_)
    ));
    power_off(&bus).await;
    let Msg::Report(r, done) = next(&mut rx, Duration::from_secs(4)).await else {
        panic!("no report")
    };
    done.send(()).unwrap();
    let n = r.notice.as_ref().expect("the drill is named");
    assert!(n.drill && n.id == id.as_str(), "{n:?}");
    assert!(
        r.sentence()
            .contains("fire drill (nthd simulate spot-stop)"),
        "{}",
        r.sentence()
    );
    assert_eq!(serde_json::to_value(&r).unwrap()["notice"]["drill"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_past_the_budget_is_reported_before_logind_goes_ahead() {
    let bus = PrivateBus::start().unwrap();
    let fake = FakeLogind::serve(bus.address()).await.unwrap();
    fake.set_inhibit_delay_max(Duration::from_secs(3));
    let (mut rx, _f) = watcher(&bus).await;
    assert!(matches!(
        next(&mut rx, Duration::from_secs(5)).await,
        Msg::Locked(_)
    ));
    fake.hold_inhibitor("shutdown", "kubelet", "drain", "delay", 0, 4242);
    power_off(&bus).await;
    // The daemon never answers: the lock goes anyway, before the budget is over.
    let Msg::Report(r, _done) = next(&mut rx, Duration::from_secs(4)).await else {
        panic!("no report")
    };
    assert_eq!(r.outcome, Outcome::BudgetExhausted);
    // Reported a margin before the end, but logind waits the whole budget for kubelet's lock.
    assert_eq!(r.held_s, 3.0);
    assert_eq!(r.holders[0].released_s, None);
    assert!(
        fake.shutdowns().is_empty(),
        "reported before logind went ahead"
    );
    let s = fake
        .wait_for_shutdown(Duration::from_secs(3))
        .await
        .expect("shutdown proceeded");
    assert_eq!(
        s.reason,
        ShutdownReason::DelayTimeout,
        "kubelet still held its lock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lock_is_taken_again_after_a_cancelled_shutdown_and_a_logind_restart() {
    let bus = PrivateBus::start().unwrap();
    let fake = FakeLogind::serve(bus.address()).await.unwrap();
    let (mut rx, _f) = watcher(&bus).await;
    assert!(matches!(
        next(&mut rx, Duration::from_secs(5)).await,
        Msg::Locked(_)
    ));
    power_off(&bus).await;
    let Msg::Report(r, done) = next(&mut rx, Duration::from_secs(3)).await else {
        panic!("no report")
    };
    assert!(r.holders.is_empty() && r.outcome == Outcome::Released);
    drop(done);
    fake.wait_for_shutdown(Duration::from_secs(3))
        .await
        .expect("proceeded");
    fake.cancel_shutdown().await.unwrap();
    assert!(matches!(
        next(&mut rx, Duration::from_secs(5)).await,
        Msg::Locked(_)
    ));
    fake.restart().await.unwrap();
    loop {
        match next(&mut rx, Duration::from_secs(10)).await {
            Msg::Locked(_) => break,
            Msg::NoLock(why) => assert!(why.contains("logind"), "{why}"),
            Msg::Report(..) => panic!("no shutdown was under way"),
        }
    }
    let own = fake
        .inhibitors()
        .into_iter()
        .filter(|i| i.who == "nthd")
        .count();
    assert_eq!(own, 1, "one lock after the restart");
}

/// A completion that records what the watcher asked of it, and when.
#[derive(Clone, Default)]
struct Recording(std::sync::Arc<std::sync::Mutex<Vec<(&'static str, std::time::Instant)>>>);

impl Recording {
    fn calls(&self) -> Vec<&'static str> {
        self.0.lock().unwrap().iter().map(|c| c.0).collect()
    }
    fn note(&self, what: &'static str) {
        self.0
            .lock()
            .unwrap()
            .push((what, std::time::Instant::now()));
    }
}

impl Finish for Recording {
    async fn prepare(&mut self) -> Result<(), String> {
        self.note("prepare");
        Ok(())
    }
    fn heartbeat_every(&self, _: Duration) -> Option<Duration> {
        None
    }
    async fn heartbeat(&mut self) -> Result<(), String> {
        self.note("heartbeat");
        Ok(())
    }
    async fn complete(&mut self, until: std::time::Instant) -> Result<String, String> {
        self.note("complete");
        assert!(
            until <= std::time::Instant::now() + AFTER_LAST,
            "a bound past 2 s"
        );
        Ok("completed".into())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asg_termination_is_completed_after_the_report_and_an_admins_poweroff_is_not() {
    let bus = PrivateBus::start().unwrap();
    let fake = FakeLogind::serve(bus.address()).await.unwrap();
    let rec = Recording::default();
    let (tx, mut rx) = mpsc::channel(4);
    let (ftx, frx) = watch::channel(None);
    let mut w = Watcher::new(tx, frx, Some(rec.clone()));
    w.bus = Some(bus.address().to_string());
    tokio::spawn(w.run());
    assert!(matches!(
        next(&mut rx, Duration::from_secs(5)).await,
        Msg::Locked(_)
    ));
    let asg = Followed {
        asg_terminate: true,
        ..followed("asg-terminate", SystemTime::now(), SystemTime::now())
    };
    ftx.send_replace(Some(asg));
    power_off(&bus).await;
    let Msg::Report(r, done) = next(&mut rx, Duration::from_secs(3)).await else {
        panic!("no report")
    };
    assert_eq!(
        r.notice.as_ref().map(|n| n.kind.as_str()),
        Some("asg-terminate")
    );
    assert!(
        rec.calls().iter().all(|c| *c == "prepare"),
        "{:?}",
        rec.calls()
    );
    done.send(()).unwrap();
    fake.wait_for_shutdown(Duration::from_secs(3))
        .await
        .expect("proceeded");
    assert_eq!(rec.calls(), ["prepare", "complete"]);
    // The next shutdown is an admin's, minutes after nthd's request: nothing is completed.
    fake.cancel_shutdown().await.unwrap();
    assert!(matches!(
        next(&mut rx, Duration::from_secs(5)).await,
        Msg::Locked(_)
    ));
    let stale = Followed {
        asg_terminate: true,
        ..followed(
            "asg-terminate",
            SystemTime::now() - Duration::from_secs(600),
            SystemTime::now(),
        )
    };
    ftx.send_replace(Some(stale));
    power_off(&bus).await;
    let Msg::Report(r, _done) = next(&mut rx, Duration::from_secs(3)).await else {
        panic!("no report")
    };
    assert!(r.notice.is_none());
    fake.wait_for_shutdown(Duration::from_secs(3))
        .await
        .expect("proceeded");
    assert_eq!(rec.calls(), ["prepare", "complete"], "nothing more");
}
