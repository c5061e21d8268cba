fn main() {
    std::process::exit(runner::cli::main());
}
