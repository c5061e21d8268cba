//! What the client benchmarks share: the binary under test, a `runner sim` on a free
//! loopback port, CPU pinning, and the kernel's accounting of a finished client process.

// Each bench target uses its own part of this module.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The binary under test: this build's, or another one given in `RUNNER_BIN` (to compare
/// a change against a saved build).
pub fn runner_bin() -> String {
    std::env::var("RUNNER_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_runner").to_string())
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// A `runner sim` process on a free loopback port; killed when dropped.
pub struct Sim {
    child: Child,
    pub url: String,
}

/// `program`, pinned to the CPUs `cpus` (`taskset -c`) when given.
pub fn pinned(cpus: Option<&str>, program: &str) -> Command {
    match cpus {
        Some(cpus) => {
            let mut cmd = Command::new("taskset");
            cmd.args(["-c", cpus, program]);
            cmd
        }
        None => Command::new(program),
    }
}

impl Sim {
    pub fn start(args: &[&str]) -> Sim {
        Sim::start_on(None, args)
    }

    /// A simulator pinned to CPUs `cpus`.
    pub fn start_on(cpus: Option<&str>, args: &[&str]) -> Sim {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = pinned(cpus, &runner_bin())
            .args(["sim", "--port", &port.to_string()])
            .args(args)
            .stdout(Stdio::null())
            .spawn()
            .expect("runner sim starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "runner sim did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Sim {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the client process used, from the kernel's accounting of it.
pub struct Usage {
    pub cpu_s: f64,
    pub max_rss_kib: u64,
    pub wall_s: f64,
}

pub fn wait_with_usage(child: Child, started: Instant) -> Usage {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value; wait4 fills it for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child, not yet reaped (Child::wait was never called).
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the client failed (status {status})"
    );
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Usage {
        cpu_s: secs(ru.ru_utime) + secs(ru.ru_stime),
        max_rss_kib: ru.ru_maxrss as u64,
        wall_s: started.elapsed().as_secs_f64(),
    }
}

pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    format!("{cpu}, {cores} cores, Linux {kernel}; load average before the run: {load}")
}
