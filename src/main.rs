//! The `apigate` binary: parse the command line, run it, exit with its code.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = apigate::cli::parse();
    apigate::cli::init_logging(&cli.log_format);
    apigate::cli::run(cli).await
}
