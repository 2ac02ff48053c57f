//! Without an NVIDIA driver the host API must fail with a clear error, never panic.

use warpforge::{Device, Error};

#[test]
fn opening_a_device_reports_the_missing_driver_or_succeeds() {
    match Device::new(0) {
        Err(Error::NoDriver) => {
            let msg = Error::NoDriver.to_string();
            assert!(msg.contains("NVIDIA driver"), "message names the fix: {msg}");
        }
        Err(Error::NoDevice { count, .. }) => assert_eq!(count, 0),
        Ok(device) => assert!(device.attributes().sm_count > 0),
        Err(other) => panic!("unexpected error opening device 0: {other}"),
    }
}

#[test]
fn an_absent_ordinal_is_an_error_not_a_panic() {
    match Device::new(10_000) {
        Err(Error::NoDriver) | Err(Error::NoDevice { .. }) => {}
        other => panic!("device 10000 should not open: {other:?}"),
    }
}
