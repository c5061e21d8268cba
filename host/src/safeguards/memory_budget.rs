//! The process's heap budget: a global allocator that counts the bytes held and, when an
//! allocation would pass the budget, ends the run with one `error:` line and exit 1
//! instead of letting the kernel kill it (exit 137, no line, no report).
//!
//! Per-value limits cannot bound a scenario's total: Rhai caps each string, array and map
//! but not how many a script keeps (80 locals of 60 MB each), and the OCI client reads a
//! registry's manifests, tokens and error bodies whole. The budget is what really bounds
//! them. It is [`LIMIT_ENV`] MiB when set, else three quarters of the smaller of the
//! memory cgroup's limit and the machine's memory: the rest is left to what the
//! allocator does not see (Wasm linear memories and compiled code, thread stacks, the
//! allocator's own overhead).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Sets the budget in MiB (a positive whole number).
pub const LIMIT_ENV: &str = "RUNNER_MEMORY_LIMIT_MIB";

static HELD: AtomicUsize = AtomicUsize::new(0);
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);

/// The system allocator, counting.
pub struct Budgeted;

// SAFETY: every call is forwarded to `System` with the same arguments; the counter only
// decides whether to forward or to end the process.
unsafe impl GlobalAlloc for Budgeted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        let p = System.alloc(layout);
        if p.is_null() {
            give(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        let p = System.alloc_zeroed(layout);
        if p.is_null() {
            give(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        give(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old {
            take(new_size - old);
        }
        let p = System.realloc(ptr, layout, new_size);
        if p.is_null() {
            if new_size > old {
                give(new_size - old);
            }
        } else if new_size < old {
            give(old - new_size);
        }
        p
    }
}

fn take(bytes: usize) {
    let held = HELD
        .fetch_add(bytes, Ordering::Relaxed)
        .saturating_add(bytes);
    if held > LIMIT.load(Ordering::Relaxed) {
        spent(bytes);
    }
}

fn give(bytes: usize) {
    HELD.fetch_sub(bytes, Ordering::Relaxed);
}

/// Ends the process: nothing here may allocate (the allocator is what called it).
#[cold]
fn spent(bytes: usize) -> ! {
    let mut line = Line::default();
    let limit_mib = LIMIT.load(Ordering::Relaxed) >> 20;
    let _ = std::fmt::write(
        &mut line,
        format_args!(
            "error: out of memory: {bytes} more bytes would pass the runner's budget of \
             {limit_mib} MiB (a scenario, a server or a registry gave more than it can \
             hold; {LIMIT_ENV} sets the budget)\n"
        ),
    );
    // SAFETY: writes a buffer we own to stderr, then ends the process without running
    // anything that could allocate.
    unsafe {
        libc::write(2, line.buf.as_ptr().cast(), line.len);
        libc::_exit(1);
    }
}

/// A line built on the stack.
struct Line {
    buf: [u8; 512],
    len: usize,
}

impl Default for Line {
    fn default() -> Line {
        Line {
            buf: [0; 512],
            len: 0,
        }
    }
}

impl std::fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Sets the budget from [`LIMIT_ENV`], the memory cgroup and the machine's memory; call
/// first thing in `main`. An unreadable limit leaves that bound out.
pub fn install() {
    LIMIT.store(budget(), Ordering::Relaxed);
}

/// The budget in bytes.
pub fn budget() -> usize {
    if let Some(mib) = std::env::var(LIMIT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|m| *m > 0)
    {
        return mib.saturating_mul(1 << 20);
    }
    let memory = [cgroup_limit(), physical_memory()]
        .into_iter()
        .flatten()
        .min();
    memory.map_or(usize::MAX, |m| (m / 4).saturating_mul(3))
}

/// The bytes held now (for tests and figures).
pub fn held() -> usize {
    HELD.load(Ordering::Relaxed)
}

fn physical_memory() -> Option<usize> {
    // SAFETY: sysconf reads a value; no pointer is involved.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && size > 0).then(|| (pages as usize).saturating_mul(size as usize))
}

/// The smallest memory limit on the process's cgroup and its parents (cgroup v2's
/// `memory.max`, v1's `memory.limit_in_bytes`).
fn cgroup_limit() -> Option<usize> {
    let membership = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut limits = Vec::new();
    for line in membership.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let (root, file) = match controllers {
            "" => ("/sys/fs/cgroup", "memory.max"),
            c if c.split(',').any(|c| c == "memory") => {
                ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")
            }
            _ => continue,
        };
        let mut dir = std::path::PathBuf::from(root).join(path.trim_start_matches('/'));
        loop {
            if let Some(n) = read_limit(&dir.join(file)) {
                limits.push(n);
            }
            if dir.as_os_str().len() <= root.len() || !dir.pop() {
                break;
            }
        }
    }
    limits.into_iter().min()
}

/// A limit file's number; `max` (v2) and v1's near-`i64::MAX` mean none.
fn read_limit(path: &std::path::Path) -> Option<usize> {
    let text = std::fs::read_to_string(path).ok()?;
    let n = text.trim().parse::<u64>().ok()?;
    (n < 1 << 60).then_some(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_file_reads_as_bytes_and_no_limit_as_none() {
        let dir = std::env::temp_dir().join(format!("runner-mem-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("memory.max");
        std::fs::write(&file, "1073741824\n").unwrap();
        assert_eq!(read_limit(&file), Some(1 << 30));
        std::fs::write(&file, "max\n").unwrap();
        assert_eq!(read_limit(&file), None);
        std::fs::write(&file, "9223372036854771712\n").unwrap();
        assert_eq!(read_limit(&file), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_budget_is_below_the_machines_memory() {
        if std::env::var(LIMIT_ENV).is_err() {
            assert!(budget() < physical_memory().unwrap());
        }
    }
}
