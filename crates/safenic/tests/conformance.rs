//! The conformance suite: every driver that follows the command-line contract, in any
//! language, against nicsim. With `--flow-control`, each model forwards 10^6 packets in each
//! direction exactly once and in order with the paper's MAC rewrite, losing none on any host
//! and under any load; every frame length from 60 to 1514 passes with and without the
//! rewrite; a driver frozen with SIGSTOP loses nothing with flow control, and without it loses
//! exactly the frames the device counts; every frame is accounted for with no tolerance; the
//! driver exits 0 on SIGTERM with a summary line; nicsim records zero DMA faults and zero lint
//! warnings; a device removed under the driver ends it with a one-line error; a second driver
//! (in any language) refuses a device the first owns, naming its PID; platform failures are one
//! line that names the fix.
//!
//! The drivers are those of the driver manifest (drivers/drivers.toml) with
//! `conformance = true`: the build script writes the list, and a driver joins with its entry.
//! Needs root and hugepages (`make test` provides them, and builds the C drivers first).

use crate::common;

use common::{Driver, RATE_PPS};

pub fn a_million_each_way(driver: Driver, mode: &str) {
    common::forward(driver, mode, &[], 1_000_000, RATE_PPS, true);
}

macro_rules! conformance {
    ($($module:ident => $name:literal, $command:literal;)*) => {$(
        mod $module {
            use super::*;
            const DRIVER: Driver = Driver { name: $name, command: $command };

            #[test]
            fn restricted_forwards_a_million_each_way() {
                a_million_each_way(DRIVER, "restricted");
            }
            #[test]
            fn const_forwards_a_million_each_way() {
                a_million_each_way(DRIVER, "const");
            }
            #[test]
            fn flexible_forwards_a_million_each_way() {
                a_million_each_way(DRIVER, "flexible");
            }
            #[test]
            fn every_frame_length_in_every_model() {
                for (mode, rewrite) in [("restricted", "paper"), ("const", "none"), ("flexible", "paper"), ("flexible", "none")] {
                    common::every_frame_length(DRIVER, mode, rewrite);
                }
            }
            #[test]
            fn a_stopped_driver_loses_nothing_with_flow_control() {
                for mode in ["restricted", "const", "flexible"] {
                    common::stopped_driver(DRIVER, mode, true);
                }
            }
            #[test]
            fn a_stopped_driver_without_flow_control_loses_exactly_what_the_device_counts() {
                for mode in ["restricted", "const", "flexible"] {
                    common::stopped_driver(DRIVER, mode, false);
                }
            }
            #[test]
            fn a_removed_device_ends_the_driver_with_one_line() {
                for mode in ["restricted", "const", "flexible"] {
                    common::removed_device(DRIVER, mode);
                }
            }
            #[test]
            fn a_device_in_use_is_refused_naming_its_owner() {
                common::device_in_use(DRIVER);
            }
            #[test]
            fn platform_failures_are_one_line_that_names_the_fix() {
                common::platform_failures_name_the_fix(DRIVER);
            }
        }
    )*};
}

include!(concat!(env!("OUT_DIR"), "/conformance_drivers.rs"));
