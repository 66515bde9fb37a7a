fn main() {
    std::process::exit(understudy::commands::main().code());
}
