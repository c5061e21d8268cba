// Every heap byte is counted against the run's memory budget (see `runner::safeguards::memory_budget`).
#[global_allocator]
static ALLOCATOR: runner::safeguards::memory_budget::Budgeted =
    runner::safeguards::memory_budget::Budgeted;

fn main() {
    // A peer that closes a socket while a request body is being written must be an error
    // of that request (EPIPE), not the end of the process: SIGPIPE is ignored. Output to a
    // closed stdout (`runner … | head -1`) is handled where it is written
    // (`runner::outputs::console`), after every file of the run has been written.
    #[cfg(unix)]
    // SAFETY: called first thing, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    runner::safeguards::memory_budget::install();
    std::process::exit(runner::run(std::env::args_os().collect()));
}
