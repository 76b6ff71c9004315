//! `fairlab-dccpgen server|client ...`: see docs/dccpgen.md.
//!
//! Exit codes: 0 on success; 2 for a bad command line or an option the
//! connection cannot honour (one line on stderr naming the option and what is
//! allowed); 1 for a runtime failure (no DCCP in the kernel, connection
//! refused or reset, a socket error).
#![deny(unsafe_code)]

use std::io::Write;
use std::process::ExitCode;

use dccpgen::cli::{self, Command, USAGE};
use dccpgen::report::{RunInfo, GENERATOR, VERSION};
use dccpgen::run::{self, Failure};

fn fail(f: &Failure) -> ExitCode {
    eprintln!("{GENERATOR}: {}", f.message());
    ExitCode::from(match f {
        Failure::Usage(_) => 2,
        Failure::Runtime(_) => 1,
    })
}

fn print_stdout(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| Failure::Runtime(format!("cannot write the report to stdout ({e})")))
}

fn main() -> ExitCode {
    let cmd = match cli::parse(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(m) => {
            eprintln!("{GENERATOR}: {m}; run `{GENERATOR} --help` for usage");
            return ExitCode::from(2);
        }
    };
    let result = match cmd {
        Command::Help => {
            println!("{USAGE}");
            Ok(())
        }
        Command::Version => {
            println!("{GENERATOR} {VERSION}");
            Ok(())
        }
        Command::Server(args) => {
            let mut emit = |r: &RunInfo| match &args.output {
                Some(path) => run::write_atomically(path, &r.to_json()),
                None => print_stdout(&r.to_json()),
            };
            run::serve(&args, &mut emit)
        }
        Command::Client(args) => run::client(&args).and_then(|r| {
            if args.json {
                print_stdout(&r.to_json())
            } else {
                let t = r.total();
                let ccid = r.ccid.map(|c| format!("/CCID{c}")).unwrap_or_default();
                print_stdout(&format!(
                    "{GENERATOR}: sent {} bytes in {:.3} s ({:.3} Mbit/s offered) to {} over {}{ccid}, {}-byte packets\n",
                    t.bytes,
                    t.seconds(),
                    t.bits_per_second() / 1e6,
                    r.remote,
                    r.proto.name(),
                    r.packet_size
                ))
            }
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => fail(&f),
    }
}
