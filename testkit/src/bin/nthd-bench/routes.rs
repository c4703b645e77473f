//! What the mock IMDS answers: the quiet answers of a healthy instance, and the notices.

use std::time::{Duration, SystemTime};

use nthd::testing::timefmt::{format_rfc1123, format_rfc3339};
use nthd_testkit::imds::{MockImds, Response};
use serde_json::json;

use crate::world::Cloud;

pub(crate) const SPOT_PATH: &str = "/latest/meta-data/spot/instance-action";
const REBALANCE_PATH: &str = "/latest/meta-data/events/recommendations/rebalance";
const SCHEDULED_PATH: &str = "/latest/meta-data/events/maintenance/scheduled";
const GCP_PREEMPTED: &str = "/computeMetadata/v1/instance/preempted";
const GCP_MAINTENANCE: &str = "/computeMetadata/v1/instance/maintenance-event";
const AZURE_EVENTS: &str = "/metadata/scheduledevents";
const AZURE_NAME: &str = "/metadata/instance/compute/name";
const AZURE_VM: &str = "nthd-bench-vm";

/// The "nothing is happening" answers of a healthy instance.
pub(crate) fn quiet_routes(m: &MockImds, cloud: Cloud) {
    match cloud {
        // spot/instance-action, rebalance and the ASG state are 404 (unset) when nothing is up.
        Cloud::Aws => m.set(SCHEDULED_PATH, Response::json(200, "[]")),
        Cloud::Gcp => {
            m.set(GCP_PREEMPTED, Response::text(200, "FALSE"));
            m.set(GCP_MAINTENANCE, Response::text(200, "NONE"));
        }
        Cloud::Azure => {
            m.set(AZURE_NAME, Response::text(200, AZURE_VM));
            m.set(
                AZURE_EVENTS,
                Response::json(200, r#"{"DocumentIncarnation":1,"Events":[]}"#),
            );
        }
        // No case of the bench runs these clouds.
        Cloud::Alibaba | Cloud::Tencent => {}
    }
}

/// Lists a rebalance recommendation (AWS): nthd then reads spot at its boosted rate.
pub(crate) fn rebalance_on(m: &MockImds) {
    m.set(
        REBALANCE_PATH,
        Response::json(200, r#"{"noticeTime":"2026-01-01T00:00:00Z"}"#),
    );
}

/// Switches the interruption notice on.
pub(crate) fn notice_on(m: &MockImds, cloud: Cloud) {
    let now = SystemTime::now();
    match cloud {
        Cloud::Aws => m.set(SPOT_PATH, aws_spot_terminate(now)),
        Cloud::Gcp => m.set(GCP_PREEMPTED, Response::text(200, "TRUE")),
        Cloud::Azure => m.set(AZURE_EVENTS, azure_preempt(now)),
        Cloud::Alibaba | Cloud::Tencent => panic!("nthd-bench has no {} case", cloud.name()),
    }
}

fn aws_spot_terminate(now: SystemTime) -> Response {
    let at = format_rfc3339(now + Duration::from_secs(120));
    Response::json(200, format!(r#"{{"action":"terminate","time":"{at}"}}"#))
}

fn azure_preempt(now: SystemTime) -> Response {
    let doc = json!({
        "DocumentIncarnation": 2,
        "Events": [{
            "EventId": "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
            "EventStatus": "Scheduled",
            "EventType": "Preempt",
            "ResourceType": "VirtualMachine",
            "Resources": [AZURE_VM],
            "NotBefore": format_rfc1123(now + Duration::from_secs(30)),
            "Description": "Virtual machine is being preempted.",
            "EventSource": "Platform",
            "DurationInSeconds": -1
        }]
    });
    Response::json(200, doc.to_string())
}
