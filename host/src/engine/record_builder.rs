//! Threads of their own, at low priority, for building records: counting the tokens of
//! whatever text a server sent (a 100,000-character word included) is CPU work that must
//! not delay the I/O threads that timestamp other streams' chunks, nor a server sharing
//! the machine. Not tokio's blocking pool: its threads also resolve host names, which a
//! lowered priority would slow.

use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

/// The process's record builders, started on first use, one per CPU.
pub(super) fn builders() -> &'static Builders {
    static BUILDERS: OnceLock<Builders> = OnceLock::new();
    BUILDERS.get_or_init(|| {
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

    /// Runs `job` on a builder thread and waits for it without blocking the runtime.
    pub(super) async fn run(&self, job: impl FnOnce() + Send + 'static) {
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        let job: Job = Box::new(move || {
            job();
            let _ = done_tx.send(());
        });
        match self.jobs.send(job) {
            Ok(()) => {
                let _ = done_rx.await;
            }
            Err(mpsc::SendError(job)) => job(),
        }
    }
}

/// Nice 19 and the idle policy for this thread only (Linux gives each thread its own).
/// Under SCHED_IDLE an ordinary thread that wakes preempts it at once, where the kernel
/// lets a nice-19 thread finish its slice (milliseconds) before an I/O thread that woke
/// for a chunk may run.
fn lower_priority() {
    // SAFETY: plain system calls on this thread's own id; a failure leaves the priority
    // as it was.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
        let idle = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &idle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_builder_thread_runs_under_the_idle_policy() {
        let policy = std::thread::spawn(|| {
            lower_priority();
            // SAFETY: reads this thread's own policy.
            unsafe { libc::sched_getscheduler(0) }
        });
        assert_eq!(policy.join().unwrap(), libc::SCHED_IDLE);
    }

    #[tokio::test]
    async fn jobs_run_on_builder_threads_and_are_awaited() {
        let (tx, rx) = std::sync::mpsc::channel();
        builders()
            .run(move || {
                let name = std::thread::current().name().map(str::to_string);
                tx.send(name).unwrap();
            })
            .await;
        let name = rx.try_recv().expect("done when awaited");
        assert!(name.unwrap_or_default().starts_with("records-"));
    }

    #[tokio::test]
    async fn without_threads_a_job_runs_inline() {
        let (tx, rx) = std::sync::mpsc::channel();
        Builders::inline().run(move || tx.send(1).unwrap()).await;
        assert_eq!(rx.try_recv(), Ok(1));
    }
}
