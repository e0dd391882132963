//! The driver's core during a trial, watched through the kernel's trace events: every
//! interrupt handler, softirq and preemption that took the core from the driver, with its
//! time and name. Unlike a watcher thread on that core (docs/results.md), trace events cost
//! nothing while nothing happens, and they name the cause. What they cannot see is the
//! hypervisor taking the whole virtual CPU.
//!
//! A private tracing instance (`instances/safenic-bench-PID` of tracefs) holds the events,
//! so the machine's own tracing is left alone; it is removed when the trace is dropped.

use crate::host::HostWindow;
use std::path::{Path, PathBuf};

/// The events read: interrupt handlers, softirqs, and context switches.
const EVENTS: &str = "irq:irq_handler_entry irq:irq_handler_exit irq:softirq_entry irq:softirq_exit sched:sched_switch";
/// Kernel work this close to the previous is one stall.
const JOIN_NS: u64 = 10_000;
/// Stalls shorter than this are left out: a ring of 512 lasts 34 µs at line rate.
pub const SHORTEST_NS: u64 = 20_000;
/// Stalls kept per trial.
const KEPT: usize = 100_000;

/// A trace of one CPU under way.
pub struct CoreTrace {
    instance: PathBuf,
    /// Where this trace mounted tracefs, if it was not mounted already.
    mounted: Option<PathBuf>,
    cpu: usize,
}

impl CoreTrace {
    /// Sets up tracing of `cpu` in a new instance (root only); [`Self::begin`] starts it.
    pub fn start(cpu: usize) -> Result<CoreTrace, String> {
        let (root, mounted) = tracefs()?;
        remove_stale_instances(&root.join("instances"));
        let instance = root.join("instances").join(format!("{INSTANCE_PREFIX}-{}", std::process::id()));
        // One this process left (it cannot be in use: a trace removes its instance when dropped).
        remove_instance(&instance);
        let trace = CoreTrace { instance, mounted, cpu };
        std::fs::create_dir(&trace.instance)
            .map_err(|e| format!("creating the tracing instance {}: {e}", trace.instance.display()))?;
        trace.write("tracing_on", "0")?;
        trace.write("tracing_cpumask", &cpumask(cpu))?;
        trace.write("trace_clock", "mono")?;
        trace.write("buffer_size_kb", "2048")?;
        trace.write("set_event", EVENTS)?;
        Ok(trace)
    }

    /// Starts recording afresh. Set up once and cleared for each trial: setting up and
    /// removing an instance allocates and frees its buffers on every CPU, and that kernel
    /// work held nicsim's core for milliseconds at the start of each trial.
    pub fn begin(&self) -> Result<(), String> {
        self.write("trace", "")?;
        self.write("tracing_on", "1")
    }

    fn write(&self, file: &str, value: &str) -> Result<(), String> {
        std::fs::write(self.instance.join(file), value)
            .map_err(|e| format!("writing {value:?} to {}: {e}", self.instance.join(file).display()))
    }

    /// Stops recording; the times kernel work or another task held the core from the
    /// threads `tids` (the driver's) since [`Self::begin`], merged and of at least
    /// [`SHORTEST_NS`].
    pub fn end(&self, tids: &[u32]) -> Result<Vec<HostWindow>, String> {
        self.write("tracing_on", "0")?;
        let path = self.instance.join("trace");
        let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        Ok(stalls(&text, self.cpu, tids, &mut TaskNames::default()))
    }
}

impl Drop for CoreTrace {
    fn drop(&mut self) {
        remove_instance(&self.instance);
        if let Some(dir) = &self.mounted {
            platform::ns::unmount(dir);
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Where a bench mounts tracefs if the machine has not: this and its PID, in the temporary
/// directory.
const MOUNT_PREFIX: &str = "safenic-tracefs";
/// Tracing instances are named this and the PID of the bench that made them.
const INSTANCE_PREFIX: &str = "safenic-bench";

/// Removes the instances of benches that died without removing theirs (killed, say): their
/// events would go on costing the traced core.
fn remove_stale_instances(instances: &Path) {
    for instance in platform::fs::left_by_dead_processes(instances, INSTANCE_PREFIX) {
        remove_instance(&instance);
    }
}

/// Stops an instance's events and removes it (a tracing instance goes with `rmdir` alone).
fn remove_instance(instance: &Path) {
    let _ = std::fs::write(instance.join("tracing_on"), "0");
    let _ = std::fs::write(instance.join("set_event"), "");
    let _ = std::fs::remove_dir(instance);
}

/// tracefs: where the machine mounted it, or mounted for this trace on a directory of its own.
fn tracefs() -> Result<(PathBuf, Option<PathBuf>), String> {
    let usual = Path::new("/sys/kernel/tracing");
    if usual.join("instances").is_dir() {
        return Ok((usual.to_path_buf(), None));
    }
    let tmp = std::env::temp_dir();
    // Mounts of benches that died before they could take theirs away.
    for dir in platform::fs::left_by_dead_processes(&tmp, MOUNT_PREFIX) {
        platform::ns::unmount(&dir);
        let _ = std::fs::remove_dir(dir);
    }
    let dir = tmp.join(format!("{MOUNT_PREFIX}-{}", std::process::id()));
    platform::ns::unmount(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    if let Err(e) = platform::ns::mount_tracefs(&dir) {
        let _ = std::fs::remove_dir(&dir);
        return Err(format!("the driver's core is watched through the kernel's trace events: {e}"));
    }
    Ok((dir.clone(), Some(dir)))
}

/// The tracefs CPU mask of `cpu`: hexadecimal, in comma-separated groups of 32 CPUs.
fn cpumask(cpu: usize) -> String {
    let mut groups = vec!["00000000".to_string(); cpu / 32 + 1];
    groups[0] = format!("{:x}", 1u32 << (cpu % 32));
    groups.join(",")
}

/// One trace line: its time (CLOCK_MONOTONIC ns), event name and fields.
fn parse(line: &str) -> Option<(u64, &str, &str)> {
    // `  comm-pid  [001] d.h.. 27256.508457: irq_handler_entry: irq=42 name=virtio3-tx`
    let (_, rest) = line.split_once("] ")?;
    let (flags_time, rest) = rest.split_once(": ")?;
    let (event, fields) = rest.split_once(": ")?;
    let (secs, micros) = flags_time.split_whitespace().last()?.split_once('.')?;
    let frac: u64 = format!("{micros:0<9}").get(..9)?.parse().ok()?;
    Some((secs.parse::<u64>().ok()? * 1_000_000_000 + frac, event, fields))
}

/// The value of `key=` in the fields of an event.
fn field<'a>(fields: &'a str, key: &str) -> Option<&'a str> {
    fields.split_whitespace().find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// The stalls in trace `text` of `cpu`: interrupt handlers and softirqs, and the times a
/// thread of `tids` was preempted until one ran again, with the work within [`JOIN_NS`] of
/// each other joined into one stall, named after its parts; a task that ran is named by
/// `name` from its thread ID and command name.
pub fn stalls(text: &str, cpu: usize, tids: &[u32], name: &mut impl NameTask) -> Vec<HostWindow> {
    let mut work: Vec<(u64, u64, String)> = Vec::new();
    let mut open: Vec<(u64, String)> = Vec::new();
    let mut preempted: Option<(u64, String)> = None;
    let is_driver = |pid: Option<&str>| pid.and_then(|p| p.parse::<u32>().ok()).is_some_and(|p| tids.contains(&p));
    for (t, event, fields) in text.lines().filter(|l| !l.starts_with('#')).filter_map(parse) {
        match event {
            "irq_handler_entry" => open.push((t, format!("irq {}", field(fields, "name").unwrap_or("?")))),
            "softirq_entry" => {
                let action = fields.split("action=").nth(1).unwrap_or("?").trim_end_matches(']');
                open.push((t, format!("softirq {action}")));
            }
            "irq_handler_exit" | "softirq_exit" => {
                if let Some((start, name)) = open.pop() {
                    work.push((start, t, name));
                }
            }
            "sched_switch" => {
                let (prev, next) = fields.split_once(" ==> ").unwrap_or((fields, ""));
                let next_pid = field(next, "next_pid").and_then(|p| p.parse::<u32>().ok());
                // Named only where a preemption is recorded: placing a task reads /proc.
                let mut taken_by =
                    || format!("preempted by {}", name.name(next_pid, field(next, "next_comm").unwrap_or("?")));
                if is_driver(field(prev, "prev_pid")) && field(prev, "prev_state").is_some_and(|s| s.starts_with('R')) {
                    preempted = Some((t, taken_by()));
                } else if is_driver(field(next, "next_pid")) {
                    if let Some((start, name)) = preempted.take() {
                        work.push((start, t, name));
                    }
                } else if let Some((_, names)) = preempted.as_mut() {
                    // Every task that ran while the driver waited for its core held it, not only
                    // the first: with several, the scheduler's order decides which comes first.
                    if next_pid != Some(0) {
                        add_cause(names, &taken_by());
                    }
                }
            }
            _ => {}
        }
    }
    work.sort_by_key(|w| w.0);
    let mut joined: Vec<(u64, u64, String)> = Vec::new();
    for (start, end, name) in work {
        match joined.last_mut() {
            Some(last) if start <= last.1 + JOIN_NS => {
                last.1 = last.1.max(end);
                add_cause(&mut last.2, &name);
            }
            _ => joined.push((start, end, name)),
        }
    }
    joined
        .into_iter()
        .filter(|(start, end, _)| end - start >= SHORTEST_NS)
        .take(KEPT)
        .map(|(start_ns, end_ns, cause)| HostWindow { cpu, start_ns, end_ns, cause })
        .collect()
}

/// How the tasks that held the driver's core are named in the results.
pub trait NameTask {
    fn name(&mut self, tid: Option<u32>, comm: &str) -> String;
}

/// Results are made to be published, and a machine's process list is its owner's business:
/// kernel threads (Linux's own) and the processes this bench started are named, any other
/// process only as such. An allowlist: a task this cannot place, gone by the end of the trial
/// say, is another process.
#[derive(Default)]
pub struct TaskNames {
    known: std::collections::HashMap<u32, bool>,
}

/// Another process than the bench's, named so in the results.
pub const ANOTHER_PROCESS: &str = "another process";

impl NameTask for TaskNames {
    fn name(&mut self, tid: Option<u32>, comm: &str) -> String {
        let Some(tid) = tid else { return ANOTHER_PROCESS.to_string() };
        let named = *self.known.entry(tid).or_insert_with(|| is_kernel_thread(tid) || is_ours(tid));
        if named {
            comm.to_string()
        } else {
            ANOTHER_PROCESS.to_string()
        }
    }
}

/// The `PF_KTHREAD` flag of `/proc/TID/stat` (include/linux/sched.h).
const PF_KTHREAD: u64 = 0x0020_0000;

fn is_kernel_thread(tid: u32) -> bool {
    // `pid (comm) state ppid …`: the command name may hold spaces and parentheses, so the
    // fields are counted after its last `)`; the flags are the ninth field.
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{tid}/stat")) else { return false };
    let flags = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(6)?.parse::<u64>().ok());
    flags.is_some_and(|f| f & PF_KTHREAD != 0)
}

/// Whether thread `tid` belongs to this process or to one it started (at any depth).
fn is_ours(tid: u32) -> bool {
    use platform::process::status_field;
    let me = std::process::id();
    let Some(mut pid) = status_field(tid, "Tgid:") else { return false };
    // Process trees are shallow; the bound guards against a loop read across PID reuse.
    for _ in 0..64 {
        if pid == me {
            return true;
        }
        match status_field(pid, "PPid:") {
            Some(parent) if parent > 1 => pid = parent,
            _ => return false,
        }
    }
    false
}

/// Adds `name` to the causes of one stall, `a + b + …`, unless it is there already.
fn add_cause(causes: &mut String, name: &str) {
    if !causes.split(" + ").any(|n| n == name) {
        causes.push_str(" + ");
        causes.push_str(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every task by the name the trace gives it.
    struct AsTraced;
    impl NameTask for AsTraced {
        fn name(&mut self, _: Option<u32>, comm: &str) -> String {
            comm.to_string()
        }
    }

    const TRACE: &str = "\
# tracer: nop
#
           fwd-16118   [001] ..s.. 27256.464043: softirq_entry: vec=7 [action=SCHED]
           fwd-16118   [001] ..s.. 27256.464049: softirq_exit: vec=7 [action=SCHED]
           fwd-16118   [001] ..s.. 27256.468071: softirq_entry: vec=9 [action=RCU]
           fwd-16118   [001] ..s.. 27256.469540: softirq_exit: vec=9 [action=RCU]
           fwd-16118   [001] d..2. 27256.469545: sched_switch: prev_comm=fwd prev_pid=16118 prev_prio=120 prev_state=R ==> next_comm=rcu_preempt next_pid=15 next_prio=120
   rcu_preempt-15      [001] d..2. 27256.469565: sched_switch: prev_comm=rcu_preempt prev_pid=15 prev_prio=120 prev_state=I ==> next_comm=fwd next_pid=16118 next_prio=120
           fwd-16118   [001] d.h.. 27256.508457: irq_handler_entry: irq=42 name=virtio3-tx
           fwd-16118   [001] d.h.. 27256.508460: irq_handler_exit: irq=42 ret=handled
           fwd-16118   [001] ..s.. 27256.508461: softirq_entry: vec=3 [action=NET_RX]
           fwd-16118   [001] ..s.. 27256.509100: softirq_exit: vec=3 [action=NET_RX]
           fwd-16118   [001] d..2. 27256.600000: sched_switch: prev_comm=fwd prev_pid=16118 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
     swapper/1-0       [001] d..2. 27256.700000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=fwd next_pid=16118 next_prio=120
";

    #[test]
    fn kernel_work_on_the_drivers_core_is_a_stall_named_after_its_parts() {
        let s = stalls(TRACE, 1, &[16118], &mut AsTraced);
        let at = |sec: f64| (sec * 1e9).round() as u64;
        // The 6 µs SCHED softirq is too short; the RCU softirq and the preemption that follows
        // it are one stall; the interrupt and its softirq another; the driver's own sleep none.
        assert_eq!(s.len(), 2, "{s:?}");
        assert_eq!((s[0].start_ns, s[0].end_ns), (at(27256.468071), at(27256.469565)));
        assert_eq!(s[0].cause, "softirq RCU + preempted by rcu_preempt");
        assert_eq!((s[1].start_ns, s[1].end_ns), (at(27256.508457), at(27256.509100)));
        assert_eq!(s[1].cause, "irq virtio3-tx + softirq NET_RX");
        assert!(s.iter().all(|w| w.cpu == 1));
        // Another process's preemption is not the driver's stall.
        assert_eq!(stalls(TRACE, 1, &[4242], &mut AsTraced).len(), 2);
    }

    #[test]
    fn every_task_that_ran_while_the_driver_waited_is_named() {
        let trace = "\
           fwd-16118   [001] d..2. 100.000000: sched_switch: prev_comm=fwd prev_pid=16118 prev_prio=120 prev_state=R ==> next_comm=sh next_pid=77 next_prio=120
            sh-77      [001] d..2. 100.004000: sched_switch: prev_comm=sh prev_pid=77 prev_prio=120 prev_state=R ==> next_comm=intruder next_pid=78 next_prio=120
      intruder-78      [001] d..2. 100.008000: sched_switch: prev_comm=intruder prev_pid=78 prev_prio=120 prev_state=R ==> next_comm=sh next_pid=79 next_prio=120
            sh-79      [001] d..2. 100.012000: sched_switch: prev_comm=sh prev_pid=79 prev_prio=120 prev_state=R ==> next_comm=fwd next_pid=16118 next_prio=120
";
        let s = stalls(trace, 1, &[16118], &mut AsTraced);
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!((s[0].start_ns, s[0].end_ns), (100_000_000_000, 100_012_000_000));
        assert_eq!(s[0].cause, "preempted by sh + preempted by intruder");
    }

    #[test]
    fn only_kernel_threads_and_the_benchs_own_processes_are_named() {
        let mut names = TaskNames::default();
        // kthreadd, the parent of every kernel thread, is thread 2 outside PID namespaces.
        assert_eq!(std::fs::read_to_string("/proc/2/comm").unwrap().trim(), "kthreadd");
        assert_eq!(names.name(Some(2), "kthreadd"), "kthreadd");
        assert_eq!(names.name(Some(std::process::id()), "bench"), "bench");
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let of_child = names.name(Some(child.id()), "sleep");
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(of_child, "sleep");
        // init is nobody's child; a thread that is gone cannot be placed.
        assert_eq!(names.name(Some(1), "init"), ANOTHER_PROCESS);
        assert_eq!(names.name(Some(u32::MAX), "gone"), ANOTHER_PROCESS);
        assert_eq!(names.name(None, "?"), ANOTHER_PROCESS);
    }

    #[test]
    fn masks_and_times_are_written_and_read_as_tracefs_does() {
        assert_eq!(cpumask(1), "2");
        assert_eq!(cpumask(33), "2,00000000");
        assert_eq!(parse("  a-1  [001] .... 12.5: x: y"), Some((12_500_000_000, "x", "y")));
        assert_eq!(parse("garbage"), None);
    }
}
