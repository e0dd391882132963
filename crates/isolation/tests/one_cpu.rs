//! The process backend on one CPU: the caller and its helper pinned to the same core, as in a
//! container limited to one CPU. Neither may poll while the other holds the answer it waits
//! for: that would only keep the other from running, for a time slice per call.

use isolation::cases::broken;
use isolation::{Backend, BackendChoice, Config, Domain, Io};

const CALLS: u64 = 2_000;

/// Sums the input bytes and adds the argument.
fn sum(args: &u64, io: &mut Io<'_>) -> u64 {
    io.input().iter().map(|&b| u64::from(b)).sum::<u64>() + args
}

#[test]
fn calls_complete_without_polling_out_their_spin_when_caller_and_helper_share_a_cpu() {
    let cpu = platform::sched::available_cpus() - 1;
    let caller = std::thread::spawn(move || {
        platform::sched::pin_current_thread(cpu).expect("pinning the caller");
        let config: Config =
            broken::config().backend(BackendChoice::Require(Backend::Process)).io_bytes(4096, 64).helper_cpu(Some(cpu));
        let mut d = Domain::new(config).expect("a process domain");
        for k in 0..CALLS {
            let input = [(k % 251) as u8; 16];
            let reply = d.call(&k, &input, sum).expect("a call");
            assert_eq!(reply.value, k + 16 * (k % 251), "call {k}");
        }
        d.waits()
    });
    let waits = caller.join().expect("the caller thread");
    assert_eq!(waits.slept_after_spin, 0, "the caller polled out its spin while the helper shared its CPU: {waits:?}");
    assert_eq!(waits.polling + waits.gave_way, CALLS, "{waits:?}");
}
