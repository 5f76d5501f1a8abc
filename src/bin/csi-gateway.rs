//! The `csi-gateway` command.
use clap::{Parser, Subcommand};
use csi_gateway::dialect::Dialect;

#[derive(Parser)]
#[command(
    version,
    about = "Serves every CSI dialect on one socket, translated to a plugin of any dialect"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CSI dialects this build knows, from its compiled descriptors.
    Dialects,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command.unwrap_or(Command::Dialects) {
        Command::Dialects => print_dialects(),
    }
    Ok(())
}

fn print_dialects() {
    println!(
        "{:<12} {:<8} {:<90} {:>4}",
        "DIALECT", "PACKAGE", "SERVICES (RPCs)", "RPCS"
    );
    for d in Dialect::ALL {
        let mut services: Vec<(&str, usize)> = Vec::new();
        for m in d.methods() {
            match services.iter_mut().find(|(s, _)| *s == m.service) {
                Some((_, n)) => *n += 1,
                None => services.push((m.service, 1)),
            }
        }
        let list: Vec<String> = services.iter().map(|(s, n)| format!("{s} ({n})")).collect();
        println!(
            "{:<12} {:<8} {:<90} {:>4}",
            d.name(),
            d.package(),
            list.join(", "),
            d.methods().len()
        );
    }
}
