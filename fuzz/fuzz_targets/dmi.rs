//! `Dmi::cloud`: recognising the cloud from DMI strings.
//!
//! Input: the first byte says which of the five fields are present (bit i = field i); the rest,
//! split on '\n', gives their values in order: sys_vendor, product_name, board_vendor,
//! chassis_asset_tag, hypervisor_uuid.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nthd::testing::notice::Cloud;
use nthd::testing::provider::detect::{Dmi, AZURE_ASSET_TAG};

/// The rules, as README/REFERENCE.md state them, in priority order.
fn oracle(d: &Dmi) -> Option<Cloud> {
    let is =
        |v: &Option<String>, want: &str| v.as_deref().is_some_and(|s| s.eq_ignore_ascii_case(want));
    if is(&d.sys_vendor, "Amazon EC2") || is(&d.board_vendor, "Amazon EC2") {
        return Some(Cloud::Aws);
    }
    if d.hypervisor_uuid
        .as_deref()
        .is_some_and(|u| u.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("ec2")))
    {
        return Some(Cloud::Aws);
    }
    if is(&d.product_name, "Google Compute Engine") || is(&d.sys_vendor, "Google") {
        return Some(Cloud::Gcp);
    }
    if is(&d.chassis_asset_tag, AZURE_ASSET_TAG) {
        return Some(Cloud::Azure);
    }
    if is(&d.sys_vendor, "Alibaba Cloud") || is(&d.board_vendor, "Alibaba Cloud") {
        return Some(Cloud::Alibaba);
    }
    // Tencent: any sys_vendor naming it ("Tencent Cloud"), in any ASCII case.
    if d.sys_vendor.as_deref().is_some_and(|v| {
        v.as_bytes()
            .windows(7)
            .any(|w| w.eq_ignore_ascii_case(b"tencent"))
    }) {
        return Some(Cloud::Tencent);
    }
    None
}

fuzz_target!(|data: &[u8]| {
    let Some((&mask, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let mut lines = text.split('\n');
    let mut field = |bit: u8| {
        let v = lines.next().map(str::to_string);
        if mask & (1 << bit) != 0 {
            Some(v.unwrap_or_default())
        } else {
            None
        }
    };
    let dmi = Dmi {
        sys_vendor: field(0),
        product_name: field(1),
        board_vendor: field(2),
        chassis_asset_tag: field(3),
        hypervisor_uuid: field(4),
    };
    let got = dmi.cloud();
    assert_eq!(got.as_ref().map(|d| d.cloud), oracle(&dmi), "{dmi:?}");
    if let Some(d) = &got {
        assert!(!d.how.is_empty());
    }
    assert_eq!(dmi.cloud(), got, "not deterministic");
});
