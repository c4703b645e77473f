//! What each cloud's metadata service says about the machine (instance id, type, zone,
//! lifecycle), as ordinary routes with realistic default values.
//!
//! Nothing here is served unless asked for: [`MockImdsBuilder::identity`](super::MockImdsBuilder::identity),
//! [`MockImds::set_identity`](super::MockImds::set_identity), `nthd-mock-imds --identity CLOUD`
//! or `PUT /_mock/identity?cloud=CLOUD`. They install [`routes`] for that cloud into the route
//! table, so each value can then be changed with `PUT /_mock/route?path=P` and removed with
//! `DELETE /_mock/route?path=P` (it answers 404 again, as a key the cloud does not have).
//!
//! AWS, Alibaba and Tencent share some paths (`/latest/meta-data/instance-id`, and Alibaba and
//! Tencent `/latest/meta-data/instance/instance-type`): the cloud installed last wins there.

use super::model::Response;

/// The clouds [`routes`] knows, by the names `--provider` takes.
pub const CLOUDS: &[&str] = &["aws", "gcp", "azure", "alibaba", "tencent"];

/// AWS: instance id.
pub const AWS_INSTANCE_ID: &str = "i-0123456789abcdef0";
/// AWS: instance type.
pub const AWS_INSTANCE_TYPE: &str = "m5.large";
/// AWS: availability zone.
pub const AWS_ZONE: &str = "us-east-1a";
/// AWS: `instance-life-cycle`.
pub const AWS_LIFE_CYCLE: &str = "spot";

/// GCP: numeric instance id.
pub const GCP_INSTANCE_ID: &str = "4520031799277581759";
/// GCP: `instance/machine-type`, a resource path.
pub const GCP_MACHINE_TYPE: &str = "projects/123456789/machineTypes/e2-standard-4";
/// GCP: `instance/zone`, a resource path.
pub const GCP_ZONE: &str = "projects/123456789/zones/us-central1-a";
/// GCP: `instance/scheduling/provisioning-model`.
pub const GCP_PROVISIONING_MODEL: &str = "SPOT";
/// GCP: `instance/scheduling/preemptible` (Spot VMs report TRUE too).
pub const GCP_PREEMPTIBLE: &str = "TRUE";

/// Azure: `vmId`.
pub const AZURE_VM_ID: &str = "02aab8a4-74ef-476e-8182-f6d2ba4166a6";
/// Azure: `vmSize`.
pub const AZURE_VM_SIZE: &str = "Standard_D4s_v5";
/// Azure: `location`.
pub const AZURE_LOCATION: &str = "westeurope";
/// Azure: `zone` (`""` for a VM outside availability zones).
pub const AZURE_ZONE: &str = "1";
/// Azure: `priority` (`Spot`, `Regular`, or `""`).
pub const AZURE_PRIORITY: &str = "Spot";

/// Alibaba: instance id.
pub const ALIBABA_INSTANCE_ID: &str = "i-bp1hygp5b04o4h9kx7z4";
/// Alibaba: instance type.
pub const ALIBABA_INSTANCE_TYPE: &str = "ecs.g7.large";
/// Alibaba: `zone-id`.
pub const ALIBABA_ZONE: &str = "cn-hangzhou-h";

/// Tencent: instance id.
pub const TENCENT_INSTANCE_ID: &str = "ins-0a1b2c3d";
/// Tencent: instance type.
pub const TENCENT_INSTANCE_TYPE: &str = "S5.MEDIUM4";
/// Tencent: `placement/zone`.
pub const TENCENT_ZONE: &str = "ap-guangzhou-3";
/// Tencent: `payment/charge-type`.
pub const TENCENT_CHARGE_TYPE: &str = "SPOTPAID";

/// Azure's compute path (any `api-version`; the mock ignores the query).
pub const AZURE_COMPUTE_PATH: &str = "/metadata/instance/compute";

/// The Azure `/metadata/instance/compute` document with these values (other fields as a real
/// VM has them).
pub fn azure_compute(
    vm_id: &str,
    vm_size: &str,
    location: &str,
    zone: &str,
    priority: &str,
) -> String {
    serde_json::json!({
        "azEnvironment": "AzurePublicCloud",
        "location": location,
        "name": "nthd-test-vm",
        "osType": "Linux",
        "priority": priority,
        "provider": "Microsoft.Compute",
        "resourceGroupName": "nthd-test",
        "subscriptionId": "8d10da13-8125-4ba9-a717-bf7490507b3d",
        "vmId": vm_id,
        "vmScaleSetName": "",
        "vmSize": vm_size,
        "zone": zone,
    })
    .to_string()
}

fn text(body: &str) -> Response {
    Response::text(200, body)
}

/// GCP answers `application/text` and says who it is.
fn gcp(body: &str) -> Response {
    Response::status(200)
        .with_body(body)
        .with_header("Content-Type", "application/text")
        .with_header("Metadata-Flavor", "Google")
}

/// The identity routes of `cloud` (one of [`CLOUDS`]) with the default values; `None` for
/// another name.
pub fn routes(cloud: &str) -> Option<Vec<(String, Response)>> {
    let r = match cloud {
        "aws" => aws_routes(),
        "gcp" => gcp_routes(),
        "azure" => azure_routes(),
        "alibaba" => alibaba_routes(),
        "tencent" => tencent_routes(),
        _ => return None,
    };
    Some(
        r.into_iter()
            .map(|(p, resp)| (p.to_string(), resp))
            .collect(),
    )
}

/// Alibaba's and Tencent's instance type path (AWS's has no `instance/`).
const NESTED_INSTANCE_TYPE: &str = "/latest/meta-data/instance/instance-type";

/// `(path, value)` rows as routes, each value answered by `answer`.
fn answered(
    answer: fn(&str) -> Response,
    rows: &[(&'static str, &str)],
) -> Vec<(&'static str, Response)> {
    rows.iter().map(|&(path, v)| (path, answer(v))).collect()
}

/// AWS's identity paths, in the order nthd reads them.
const AWS_ROWS: [(&str, &str); 4] = [
    ("/latest/meta-data/instance-id", AWS_INSTANCE_ID),
    ("/latest/meta-data/instance-type", AWS_INSTANCE_TYPE),
    ("/latest/meta-data/placement/availability-zone", AWS_ZONE),
    ("/latest/meta-data/instance-life-cycle", AWS_LIFE_CYCLE),
];

fn aws_routes() -> Vec<(&'static str, Response)> {
    answered(text, &AWS_ROWS)
}

fn gcp_routes() -> Vec<(&'static str, Response)> {
    const MODEL: &str = "/computeMetadata/v1/instance/scheduling/provisioning-model";
    const PREEMPTIBLE: &str = "/computeMetadata/v1/instance/scheduling/preemptible";
    answered(
        gcp,
        &[
            ("/computeMetadata/v1/instance/id", GCP_INSTANCE_ID),
            (
                "/computeMetadata/v1/instance/machine-type",
                GCP_MACHINE_TYPE,
            ),
            ("/computeMetadata/v1/instance/zone", GCP_ZONE),
            (MODEL, GCP_PROVISIONING_MODEL),
            (PREEMPTIBLE, GCP_PREEMPTIBLE),
        ],
    )
}

fn azure_routes() -> Vec<(&'static str, Response)> {
    vec![(
        AZURE_COMPUTE_PATH,
        Response::json(
            200,
            azure_compute(
                AZURE_VM_ID,
                AZURE_VM_SIZE,
                AZURE_LOCATION,
                AZURE_ZONE,
                AZURE_PRIORITY,
            ),
        ),
    )]
}

fn alibaba_routes() -> Vec<(&'static str, Response)> {
    answered(
        text,
        &[
            ("/latest/meta-data/instance-id", ALIBABA_INSTANCE_ID),
            (NESTED_INSTANCE_TYPE, ALIBABA_INSTANCE_TYPE),
            ("/latest/meta-data/zone-id", ALIBABA_ZONE),
        ],
    )
}

fn tencent_routes() -> Vec<(&'static str, Response)> {
    answered(
        text,
        &[
            ("/latest/meta-data/instance-id", TENCENT_INSTANCE_ID),
            (NESTED_INSTANCE_TYPE, TENCENT_INSTANCE_TYPE),
            ("/latest/meta-data/placement/zone", TENCENT_ZONE),
            ("/latest/meta-data/payment/charge-type", TENCENT_CHARGE_TYPE),
        ],
    )
}

/// [`routes`], or an error naming the clouds it knows.
pub(crate) fn routes_or_err(cloud: &str) -> Result<Vec<(String, Response)>, String> {
    routes(cloud).ok_or_else(|| {
        format!(
            "unknown cloud {cloud:?} for identity routes; one of {}",
            CLOUDS.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cloud_has_valid_routes() {
        for c in CLOUDS {
            let r = routes(c).unwrap();
            assert!(!r.is_empty(), "{c}");
            for (p, resp) in r {
                assert!(p.starts_with('/') && !p.contains('?'), "{p}");
                resp.validate().unwrap();
                assert!(!resp.body.is_empty(), "{p}");
            }
        }
        assert!(routes("ibm").is_none());
        assert!(routes_or_err("ibm").unwrap_err().contains("aws, gcp"));
    }
}
