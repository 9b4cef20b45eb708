//! The demo itself (feature `demo`): the test kit's servers, fault proxy and clients.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ssegate_testkit::demo::{self, DemoConfig, DemoStore};
use ssegate_testkit::server::ServerMode;

/// Run the demo: an MCP server in each resume mode behind a proxy that cuts every `tools/call`
/// response at a random byte, and two clients, one that appends the replay to its partial event (as
/// the failing clients did) and the guarded one. Prints, per server mode and client: trials, results
/// delivered intact, silently corrupted, refused with a typed error, resumed in place, renegotiated.
#[derive(clap::Args, Debug)]
pub(crate) struct DemoArgs {
    /// Trials per server mode and client.
    #[arg(long, default_value_t = demo::DEFAULT_TRIALS)]
    trials: usize,
    /// Seed of the cut offsets.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Size of the big tool result's text, in bytes.
    #[arg(long, default_value_t = ssegate_testkit::server::DEFAULT_RESULT_SIZE)]
    size: usize,
    /// How long the proxy holds the reconnect after a cut, in milliseconds.
    #[arg(long, default_value_t = 250)]
    reconnect_delay_ms: u64,
    /// Server instances per mode, behind a loopback balancer that sends each resume to another
    /// instance than the one whose response was cut (1 to 16).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=demo::MAX_INSTANCES as u64))]
    instances: u64,
    /// Where the instances keep sent events: `memory` (a buffer per instance) or `redis://HOST:PORT`
    /// (one Redis shared by every instance).
    #[arg(long, default_value = "memory")]
    store: DemoStore,
    /// Print `{"rows": [...]}` instead of the table.
    #[arg(long)]
    json: bool,
    /// Print one line per trial on stderr (cut offset, region, result, the guard's refusals).
    #[arg(long)]
    verbose: bool,
}

pub(crate) fn run(args: &DemoArgs) -> ExitCode {
    let mut config = DemoConfig::default();
    config
        .trials(args.trials)
        .seed(args.seed)
        .size(args.size)
        .reconnect_delay(Duration::from_millis(args.reconnect_delay_ms))
        .instances(usize::try_from(args.instances).unwrap_or(demo::MAX_INSTANCES))
        .store(args.store.clone());
    let total = (args.trials * ServerMode::ALL.len() * 2) as u64;
    let bar = if args.json || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} trials {pos}/{len} {wide_bar} {elapsed}")
                .expect("a valid template"),
        );
        bar
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ssegate demo: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let started = Instant::now();
    let on_trial = |t: &demo::TrialReport<'_>| {
        if args.verbose {
            bar.suspend(|| eprintln!("{t}"));
        }
        bar.inc(1);
    };
    let rows = runtime.block_on(demo::run(&config, &on_trial));
    bar.finish_and_clear();
    let rows = match rows {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("ssegate demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.json {
        println!("{}", demo::rows_json(&rows));
    } else {
        print!("{}", demo::table(&rows));
        println!();
        println!("{}", demo::conclusion(&rows));
        let deployment = if args.instances > 1 || args.store != DemoStore::Memory {
            format!(", {} instances, store {}", args.instances, args.store)
        } else {
            String::new()
        };
        println!(
            "({} trials, {} byte result, seed {}{}, {:.1} s)",
            total,
            args.size,
            args.seed,
            deployment,
            started.elapsed().as_secs_f64()
        );
    }
    // A corrupt delivery by the guarded client is a bug in ssegate: say so in the exit status.
    let guarded_corrupt = rows
        .iter()
        .any(|r| r.client == demo::ClientKind::Guarded && r.silent_corruption > 0);
    if guarded_corrupt {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
