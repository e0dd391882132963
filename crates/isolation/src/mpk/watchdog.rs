//! Time-outs for in-process domains without a system call per call: each domain publishes
//! (thread, calls so far, inside or not) with three relaxed stores; one watchdog thread looks
//! every few milliseconds and signals a thread whose call has not changed for longer than the
//! domain's time-out.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

pub(crate) struct Watch {
    thread: AtomicI32,
    calls: AtomicU64,
    inside: AtomicBool,
    timeout: Duration,
}

const TICK: Duration = Duration::from_millis(5);

static WATCHED: OnceLock<Mutex<Vec<Weak<Watch>>>> = OnceLock::new();

impl Watch {
    /// A watch for a domain with `timeout`, registered with the watchdog (started on first use).
    pub fn new(timeout: Duration) -> Arc<Watch> {
        let watch = Arc::new(Watch {
            thread: AtomicI32::new(0),
            calls: AtomicU64::new(0),
            inside: AtomicBool::new(false),
            timeout,
        });
        let list = WATCHED.get_or_init(|| {
            std::thread::Builder::new()
                .name("isolation-watchdog".into())
                .spawn(watchdog)
                .expect("starting the watchdog thread");
            Mutex::new(Vec::new())
        });
        let mut list = list.lock().unwrap_or_else(|p| p.into_inner());
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(&watch));
        watch
    }

    pub fn begin(&self, thread: i32) {
        self.thread.store(thread, Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.inside.store(true, Ordering::Release);
    }

    pub fn end(&self) {
        self.inside.store(false, Ordering::Release);
    }
}

fn watchdog() {
    // Per watch: the call seen at the last tick and for how long it has been seen.
    let mut seen: Vec<(Weak<Watch>, u64, Duration)> = Vec::new();
    loop {
        std::thread::sleep(TICK);
        let Some(list) = WATCHED.get() else { continue };
        let watches: Vec<Weak<Watch>> = list.lock().unwrap_or_else(|p| p.into_inner()).clone();
        seen.retain(|(w, _, _)| w.strong_count() > 0);
        for weak in watches {
            let Some(watch) = weak.upgrade() else { continue };
            let calls = watch.calls.load(Ordering::Relaxed);
            let inside = watch.inside.load(Ordering::Acquire);
            let entry = match seen.iter_mut().find(|(w, _, _)| w.ptr_eq(&weak)) {
                Some(e) => e,
                None => {
                    seen.push((weak.clone(), calls, Duration::ZERO));
                    seen.last_mut().expect("just pushed")
                }
            };
            if !inside || entry.1 != calls {
                *entry = (weak.clone(), calls, Duration::ZERO);
                continue;
            }
            entry.2 += TICK;
            if entry.2 >= watch.timeout {
                entry.2 = Duration::ZERO;
                let thread = watch.thread.load(Ordering::Relaxed);
                // SAFETY: signals one thread of this process; the handler ignores the signal if
                // that thread is no longer inside a domain.
                unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), thread, super::signals::timeout_signal()) };
            }
        }
    }
}
