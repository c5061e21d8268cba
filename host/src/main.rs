fn main() {
    // Die quietly on a closed pipe (`runner info x.rhai | head`) like other Unix tools,
    // instead of panicking inside println!.
    #[cfg(unix)]
    // SAFETY: called first thing, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(runner::cli::main());
}
