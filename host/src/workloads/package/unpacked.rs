//! The directories archives are unpacked into, removed on every way out of the process:
//! - a normal return or an error: the owner's drop;
//! - `std::process::exit`, which skips destructors (the run's second Ctrl-C, or any other
//!   early exit): an `atexit` hook removes every directory still registered;
//! - SIGINT or SIGTERM while nothing else handles them (unpacking, loading, the pre-run
//!   checks, `info`, `verify`): a watcher thread, started before the first directory is
//!   made, exits with 130 as an interrupted run does, and the `atexit` hook cleans up.
//!   While a run handles the signals itself (it drains in-flight requests first), it holds
//!   a [`SignalsHandledElsewhere`] and the watcher leaves them to it.
//!
//! Only SIGKILL or a crash can leave one behind; their names start with `runner-scenario-`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, Once};

/// The directories alive now.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Set, under the lock, once the process is removing them on its way out: no file is
/// written into them after that (the exit runs while other threads still do).
static CLOSING: AtomicBool = AtomicBool::new(false);
/// How many [`SignalsHandledElsewhere`] guards are alive.
static HANDLED_ELSEWHERE: AtomicUsize = AtomicUsize::new(0);
static HOOKS: Once = Once::new();

fn live() -> MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fresh, empty directory under the system's temporary directory, removed when dropped
/// and on the exits above.
pub struct UnpackDir {
    dir: Option<tempfile::TempDir>,
}

impl UnpackDir {
    pub fn new() -> std::io::Result<UnpackDir> {
        HOOKS.call_once(install_hooks);
        // Made and registered under the lock: an exit racing with this waits for the
        // registration, so it sees (and removes) the directory.
        let mut live = live();
        let dir = tempfile::Builder::new()
            .prefix("runner-scenario-")
            .tempdir()?;
        live.push(dir.path().to_path_buf());
        Ok(UnpackDir { dir: Some(dir) })
    }

    pub fn path(&self) -> &Path {
        self.dir.as_ref().expect("present until dropped").path()
    }

    /// Writes the files (checked names, relative to this directory) into it, each created
    /// anew, never opened through something already there. Each is written under the
    /// lock [`remove_all`] takes, so an exit in the middle cannot race with it and leave
    /// a file behind.
    pub fn fill(&self, files: &super::Files) -> Result<(), String> {
        let dir = self.path();
        let fail = |e: std::io::Error| format!("cannot unpack into {}: {e}", dir.display());
        let mut made = std::collections::HashSet::new();
        for (path, bytes) in files {
            let target = dir.join(path);
            let _live = live();
            if CLOSING.load(Ordering::SeqCst) {
                return Err("interrupted while unpacking".to_string());
            }
            if let Some(parent) = target.parent() {
                // Once per directory, not once per file.
                if made.insert(parent.to_path_buf()) {
                    std::fs::create_dir_all(parent).map_err(fail)?;
                }
            }
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&target)
                .map_err(fail)?;
            file.write_all(bytes).map_err(fail)?;
        }
        Ok(())
    }
}

impl Drop for UnpackDir {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            let path = dir.path().to_path_buf();
            // Removed first, unregistered after: a signal in between removes it again.
            let _ = dir.close();
            live().retain(|p| *p != path);
        }
    }
}

/// When another thread is already ending the process (a signal during unpacking: that
/// thread printed its own line and is removing the directories), waits for that exit
/// instead of letting the caller print a second error for the unpacking it stopped.
pub fn wait_if_exiting() {
    if CLOSING.load(Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
}

/// Removes every unpacked directory still alive, and lets no more files be written into
/// them. For exits that skip destructors; the `atexit` hook calls it.
pub fn remove_all() {
    let live = live();
    CLOSING.store(true, Ordering::SeqCst);
    for path in live.iter() {
        let _ = std::fs::remove_dir_all(path);
    }
}

/// While alive, SIGINT and SIGTERM are the holder's to handle; exits it takes through
/// `std::process::exit` are still cleaned up by the `atexit` hook.
pub struct SignalsHandledElsewhere(());

pub fn signals_handled_elsewhere() -> SignalsHandledElsewhere {
    HANDLED_ELSEWHERE.fetch_add(1, Ordering::SeqCst);
    SignalsHandledElsewhere(())
}

impl Drop for SignalsHandledElsewhere {
    fn drop(&mut self) {
        HANDLED_ELSEWHERE.fetch_sub(1, Ordering::SeqCst);
    }
}

fn install_hooks() {
    #[cfg(unix)]
    {
        extern "C" fn at_exit() {
            remove_all();
        }
        // SAFETY: registers a plain function; `remove_all` never unwinds (a poisoned lock
        // is taken over, errors are ignored).
        unsafe {
            libc::atexit(at_exit);
        }
        watch_signals();
    }
}

/// Starts the watcher thread and waits until its handlers are in place, so no signal can
/// fall between "directory made" and "handler installed". Through tokio, as the run's own
/// handler is: both listen on the same process-wide registration.
#[cfg(unix)]
fn watch_signals() {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("unpack-signals".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
            else {
                let _ = ready_tx.send(());
                return;
            };
            rt.block_on(async move {
                use tokio::signal::unix::{signal, SignalKind};
                let int = signal(SignalKind::interrupt());
                let term = signal(SignalKind::terminate());
                let _ = ready_tx.send(());
                let (Ok(mut int), Ok(mut term)) = (int, term) else {
                    return;
                };
                loop {
                    let name = tokio::select! {
                        _ = int.recv() => "SIGINT",
                        _ = term.recv() => "SIGTERM",
                    };
                    if HANDLED_ELSEWHERE.load(Ordering::SeqCst) == 0 {
                        // Not eprintln!: a closed stderr must not stop the exit.
                        let _ = writeln!(
                            std::io::stderr(),
                            "error: interrupted ({name}); the unpacked package was removed"
                        );
                        std::process::exit(crate::safeguards::interrupt::EXIT_INTERRUPTED);
                    }
                }
            });
        });
    if spawned.is_ok() {
        // Bounded: the thread answers as soon as it has tried to register.
        let _ = ready_rx.recv_timeout(std::time::Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test: `remove_all` would remove a directory another test is using.
    #[test]
    fn directories_are_removed_when_dropped_and_by_remove_all() {
        let dir = UnpackDir::new().unwrap();
        let path = dir.path().to_path_buf();
        std::fs::write(path.join("x"), b"x").unwrap();
        assert!(live().contains(&path));
        drop(dir);
        assert!(!path.exists());
        assert!(!live().contains(&path));

        let dir = UnpackDir::new().unwrap();
        let mut files = super::super::Files::new();
        files.insert("data/a/b.json".into(), b"{}".to_vec());
        dir.fill(&files).unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("data/a/b.json")).unwrap(),
            b"{}"
        );
        remove_all();
        assert!(!dir.path().exists());
        // Nothing more is written, and dropping it afterwards is harmless.
        assert!(dir.fill(&files).unwrap_err().contains("interrupted"));
        drop(dir);
        CLOSING.store(false, Ordering::SeqCst);
    }
}
