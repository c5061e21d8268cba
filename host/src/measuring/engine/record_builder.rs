//! Threads of their own, at low priority, for building records: counting the tokens of
//! whatever text a server sent (a 100,000-character word included) is CPU work that must
//! not delay the I/O threads that timestamp other streams' chunks, nor a server sharing
//! the machine. Not tokio's blocking pool: its threads also resolve host names, which a
//! lowered priority would slow.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::watch;

type Job = Box<dyn FnOnce() + Send>;

/// The process's record builders, started on first use, one per CPU.
pub(super) fn builders() -> &'static Builders {
    static BUILDERS: OnceLock<Builders> = OnceLock::new();
    BUILDERS.get_or_init(|| {
        // In virtual time records are built on the run's thread: work on another thread
        // would let the clock run on before its record is in.
        if crate::both_sides::clock::is_virtual() {
            return Builders::inline();
        }
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        Builders::start(threads)
    })
}

pub(super) struct Builders {
    jobs: mpsc::Sender<Job>,
}

impl Builders {
    fn start(threads: usize) -> Builders {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("records-{i}"))
                .spawn(move || {
                    lower_priority();
                    loop {
                        let job = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                });
            // Without any thread the jobs would wait forever: run them inline instead.
            if spawned.is_err() && i == 0 {
                return Builders::inline();
            }
        }
        Builders { jobs: tx }
    }

    /// No threads: `run` does the work on the caller's thread.
    fn inline() -> Builders {
        let (tx, rx) = mpsc::channel::<Job>();
        drop(rx);
        Builders { jobs: tx }
    }

    /// Runs `job` on a builder thread; the caller does not wait for it.
    pub(super) fn submit(&self, job: impl FnOnce() + Send + 'static) {
        if let Err(mpsc::SendError(job)) = self.jobs.send(Box::new(job)) {
            job();
        }
    }
}

/// The records handed to the builders and not yet sent to the collector. A phase's
/// duration ends with its last response, never with the building of its records (a long
/// answer without whitespace takes seconds to count); the phase's summary waits for them,
/// unless a signal came: then the run goes on without those still unbuilt.
#[derive(Clone)]
pub(super) struct Backlog {
    pending: Arc<watch::Sender<u64>>,
    abandoned: Arc<AtomicBool>,
}

impl Backlog {
    pub(super) fn new() -> Backlog {
        Backlog {
            pending: Arc::new(watch::channel(0).0),
            abandoned: Arc::default(),
        }
    }

    /// Builds a record on the builders, then `send`s it; not at all once the run gave
    /// up waiting.
    pub(super) fn build<R: Send + 'static>(
        &self,
        build: impl FnOnce() -> R + Send + 'static,
        send: impl FnOnce(R) + Send + 'static,
    ) {
        self.pending.send_modify(|n| *n += 1);
        let backlog = self.clone();
        builders().submit(move || {
            if !backlog.abandoned.load(Ordering::Acquire) {
                let record = build();
                if !backlog.abandoned.load(Ordering::Acquire) {
                    send(record);
                }
            }
            backlog.pending.send_modify(|n| *n = n.saturating_sub(1));
        });
    }

    /// Returns once no record is being built.
    pub(super) async fn empty(&self) {
        let mut pending = self.pending.subscribe();
        let _ = pending.wait_for(|n| *n == 0).await;
    }

    /// Stops waiting: records not yet built are never sent. How many there were.
    pub(super) fn abandon(&self) -> u64 {
        self.abandoned.store(true, Ordering::Release);
        *self.pending.borrow()
    }

    pub(super) fn abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Acquire)
    }
}

/// Nice 19 for this thread only (Linux gives each thread its own nice value). Not
/// SCHED_IDLE: that policy runs only when nothing else wants the CPU, so on a machine
/// doing other work the builders starve and the run never reports (beside two busy
/// loops, two SCHED_IDLE builders got 0.3 % of a core and 16 long answers were still
/// being counted after 10 minutes); nice 19 still yields to the I/O threads.
fn lower_priority() {
    // SAFETY: plain system calls on this thread's own id; a failure leaves the priority
    // as it was.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_builder_thread_is_niced_but_never_idle() {
        let (policy, nice) = std::thread::spawn(|| {
            lower_priority();
            // SAFETY: reads this thread's own policy and nice value.
            unsafe {
                let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
                (
                    libc::sched_getscheduler(0),
                    libc::getpriority(libc::PRIO_PROCESS, tid),
                )
            }
        })
        .join()
        .unwrap();
        assert_eq!(
            policy,
            libc::SCHED_OTHER,
            "SCHED_IDLE starves on a busy machine"
        );
        assert_eq!(nice, 19);
    }

    #[test]
    fn jobs_run_on_builder_threads() {
        let (tx, rx) = std::sync::mpsc::channel();
        builders().submit(move || {
            let name = std::thread::current().name().map(str::to_string);
            tx.send(name).unwrap();
        });
        let name = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert!(name.unwrap_or_default().starts_with("records-"));
    }

    #[test]
    fn without_threads_a_job_runs_inline() {
        let (tx, rx) = std::sync::mpsc::channel();
        Builders::inline().submit(move || tx.send(1).unwrap());
        assert_eq!(rx.try_recv(), Ok(1));
    }

    #[tokio::test]
    async fn the_backlog_empties_and_an_abandoned_one_sends_nothing() {
        let backlog = Backlog::new();
        let (tx, rx) = std::sync::mpsc::channel();
        let sent = tx.clone();
        backlog.build(|| 1, move |r| sent.send(r).unwrap());
        backlog.empty().await;
        assert_eq!(rx.try_recv(), Ok(1));
        let (go, wait) = std::sync::mpsc::channel::<()>();
        backlog.build(move || wait.recv().unwrap(), move |()| tx.send(2).unwrap());
        assert_eq!(backlog.abandon(), 1);
        go.send(()).unwrap();
        backlog.empty().await;
        assert!(backlog.abandoned());
        assert!(rx.try_recv().is_err());
    }
}
