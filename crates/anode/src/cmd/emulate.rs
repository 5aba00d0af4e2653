//! `anode emulate TOPOLOGY.toml [--json] [--realtime] [--pcap DIR]`: runs the network a
//! topology file describes and prints the report. Exit status 1 if the file is wrong (the
//! message names file, line and the fix) or if any `expect` step failed. `--pcap DIR` writes
//! one capture per link, `DIR/<a>-<b>.pcap` (both directions, every packet a node handed to
//! the link, lost ones too), timestamps in virtual time from the Unix epoch.

use std::cell::RefCell;
use std::fs::File;
use std::io::BufWriter;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use anode_capture::Capture;
use anode_emu::{Report, Tap, Topology};
use anode_wire::NodeAddr;

/// Arguments of `anode emulate`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = HELP)]
pub struct Args {
    /// The topology file (TOML): [network], optional [routing], [[node]], [[link]], [[step]].
    /// Examples: topologies/ring5.toml, topologies/line4.toml.
    pub topology: PathBuf,
    /// Print the report as JSON (for tools) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Run every node over real UDP sockets on 127.0.0.1 instead of in virtual time. Takes as
    /// long as [network] duration_ms says; the report is not reproducible.
    #[arg(long)]
    pub realtime: bool,
    /// Write one pcap per link into DIR (`<a>-<b>.pcap`, raw IP/UDP frames; open in Wireshark
    /// with tools/wireshark/anode.lua to see every ANEP field). Virtual time only.
    #[arg(long, value_name = "DIR", conflicts_with = "realtime")]
    pub pcap: Option<PathBuf>,
    /// Serve a live view of the run (graph, link rates, routes) at http://ADDR/ (loopback;
    /// default 127.0.0.1:8470); the page stays up after the run until Ctrl-C. Virtual time
    /// only.
    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        default_missing_value = "127.0.0.1:8470",
        conflicts_with = "realtime"
    )]
    pub view: Option<std::net::SocketAddr>,
    /// Run virtual time at most FACTOR times as fast as the wall clock (1 = real time), to
    /// watch it with --view.
    #[arg(long, value_name = "FACTOR", requires = "view")]
    pub speed: Option<f64>,
    /// Show progress on stderr once a second: virtual time, events, events per second and
    /// an estimate of the time left. Virtual time only.
    #[arg(long, conflicts_with = "realtime")]
    pub progress: bool,
}

const HELP: &str = "\
A topology file describes a network and a scenario:

  [network]
  seed = 42              # seeds link loss: same file + seed = same report
  duration_ms = 20000    # virtual time the run covers

  [[node]]
  name = \"a\"             # address optional (default 198.18.0.N:3322)

  [[link]]
  a = \"a\"
  b = \"b\"
  delay_ms = 2           # also bandwidth_mbps, loss (0..1), mtu, queue_bytes, cost

  [[step]]
  at_ms = 3000
  action = \"send\"        # send | fail-link | restore-link | expect
  from = \"a\"
  to = \"*\"               # every other node

  [[step]]
  at_ms = 9000
  action = \"expect\"      # check = reachable | unreachable | route | delivered
  check = \"reachable\"
  from = \"*\"
  to = \"*\"

The report tells when routing converged, what each step did (delivered, lost, latency,
path), how long each link failure took to repair, each check's verdict, and every node's
counters and routes. Exit status: 0 if every check held, 1 otherwise.";

/// Runs the command.
pub fn run(args: Args) -> super::CmdResult {
    let registry = anode_node::steps::registry()?;
    let topo = Topology::load_with(&args.topology, &registry).map_err(|e| e.to_string())?;
    if args.speed.is_some_and(|s| !(s.is_finite() && s > 0.0)) {
        return Err("--speed must be a positive number (1 = real time)".into());
    }
    let view = match args.view {
        Some(a) => {
            let v = anode_view::ViewServer::start(a).map_err(|e| e.to_string())?;
            eprintln!("view: {} (stays up after the run until Ctrl-C)", v.url());
            Some(v)
        }
        None => None,
    };
    let started = std::time::Instant::now();
    let report = if args.realtime {
        realtime(topo, &registry)?
    } else {
        let mut taps: Vec<Box<dyn Tap>> = Vec::new();
        if args.progress {
            taps.push(Box::new(Progress::new(topo.duration)));
        }
        let files = match &args.pcap {
            Some(dir) => Some(LinkCaptures::create(dir, &topo)?),
            None => None,
        };
        if let Some(f) = &files {
            taps.push(Box::new(f.clone()));
        }
        if let Some(v) = &view {
            let title = args.topology.display().to_string();
            // Ctrl-C during a paced run: finish at full speed, print the report, quit.
            super::install_signals()?;
            let tap = anode_view::EmuView::new(v.hub(), &title, args.speed)
                .hurry_when(anode_ether::signals::stop_requested);
            taps.push(Box::new(tap));
        }
        let report = anode_emu::run_tapped(topo, &registry, taps).map_err(|e| e.to_string())?;
        if let Some(f) = files {
            f.finish(args.json)?;
        }
        report
    };
    print_report(&report, args.json);
    run_stats(&report, started.elapsed(), args.json);
    if let Some(v) = view {
        eprintln!(
            "view: the run is over; {} shows its last state. Ctrl-C to quit.",
            v.url()
        );
        super::view::wait_for_signal()?;
    }
    verdict(&report)
}

/// `--progress`: a line on stderr at most once a second of wall time.
struct Progress {
    end: Duration,
    started: std::time::Instant,
    last: std::time::Instant,
}

impl Progress {
    fn new(end: Duration) -> Progress {
        let now = std::time::Instant::now();
        Progress {
            end,
            started: now,
            last: now,
        }
    }
}

impl Tap for Progress {
    fn step(&mut self, now: Duration, events: u64) -> bool {
        // Look at the clock every 4096 events only.
        if !events.is_multiple_of(4096) {
            return false;
        }
        let t = std::time::Instant::now();
        if t.duration_since(self.last) < Duration::from_secs(1) {
            return false;
        }
        self.last = t;
        let wall = t.duration_since(self.started).as_secs_f64();
        let done = now.as_secs_f64() / self.end.as_secs_f64().max(1e-9);
        let eta = if done > 0.0 {
            wall * (1.0 - done) / done
        } else {
            f64::NAN
        };
        eprintln!(
            "emulate: virtual {:.1} of {:.1} s ({:.0}%), {} events, {:.0} k events/s, about {:.0} s left",
            now.as_secs_f64(),
            self.end.as_secs_f64(),
            done * 100.0,
            events,
            events as f64 / wall.max(1e-9) / 1e3,
            eta
        );
        false
    }
}

/// Peak resident memory of this process (VmHWM), bytes; 0 if unknown.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            let kb: u64 = l.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb * 1024)
        })
        .unwrap_or(0)
}

/// What the run cost, on stderr (JSON with --json): not in the report, which stays the same
/// for the same file and seed.
fn run_stats(report: &Report, wall: Duration, json: bool) {
    let secs = wall.as_secs_f64();
    let rate = report.events as f64 / secs.max(1e-9);
    let peak = peak_rss();
    if json {
        eprintln!(
            "{}",
            serde_json::json!({
                "events": report.events, "wall_s": secs,
                "events_per_s": rate, "peak_rss_bytes": peak,
            })
        );
    } else if report.mode == "virtual-time" {
        eprintln!(
            "emulate: {} events in {secs:.2} s wall ({:.0} k events/s), peak memory {} MiB",
            report.events,
            rate / 1e3,
            peak >> 20
        );
    }
}

/// `--realtime`: every node gets a control socket in the emulation socket directory (tools
/// reach it with `--node NAME`), and progress goes to stderr once a second.
fn realtime(topo: Topology, registry: &anode_emu::Registry) -> Result<Report, String> {
    let dir = anode_ctl::path::emulation_socket_dir().join(std::process::id().to_string());
    // Made here (0700, as the node would), so no node warns that it had to make it.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let names: Vec<String> = topo.nodes.iter().map(|n| n.name.clone()).collect();
    eprintln!(
        "realtime: {} nodes; control sockets in {} (e.g. anode status --node {})",
        names.len(),
        dir.display(),
        names.first().map_or("NAME", String::as_str)
    );
    let opts = anode_node::realtime::RealtimeOptions {
        sockets: Some(dir),
        progress: Some(Box::new(|now: Duration, end: Duration| {
            eprintln!(
                "realtime: {:.0} of {:.0} s",
                now.as_secs_f64(),
                end.as_secs_f64()
            );
        })),
    };
    let report = anode_node::realtime::run_with(topo, registry, opts).map_err(|e| e.to_string());
    // The nodes removed their sockets; the run's directory goes too.
    let _ = std::fs::remove_dir(
        anode_ctl::path::emulation_socket_dir().join(std::process::id().to_string()),
    );
    report
}

type LinkFile = Capture<BufWriter<File>>;

/// One pcap per link of an emulation; shared between the emulator (as its [`Tap`]) and the
/// command, which closes the files after the run.
#[derive(Clone)]
struct LinkCaptures(Rc<RefCell<CaptureState>>);

struct CaptureState {
    files: Vec<(PathBuf, LinkFile)>,
    error: Option<String>,
}

impl LinkCaptures {
    fn create(dir: &Path, topo: &Topology) -> Result<LinkCaptures, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create the capture directory {}: {e}", dir.display()))?;
        let mut files = Vec::with_capacity(topo.links.len());
        let mut seen = std::collections::HashMap::new();
        for l in &topo.links {
            let base = format!("{}-{}", topo.node_name(l.a), topo.node_name(l.b));
            // Parallel links between the same two nodes get -2, -3, ...
            let n: &mut u32 = seen.entry(base.clone()).or_default();
            *n += 1;
            let name = if *n == 1 { base } else { format!("{base}-{n}") };
            let path = dir.join(format!("{name}.pcap"));
            let f =
                File::create(&path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            let cap =
                Capture::new(BufWriter::new(f)).map_err(|e| format!("{}: {e}", path.display()))?;
            files.push((path, cap));
        }
        Ok(LinkCaptures(Rc::new(RefCell::new(CaptureState {
            files,
            error: None,
        }))))
    }

    /// Flushes every file; says what was written (on stderr when the report is JSON).
    fn finish(self, json: bool) -> Result<(), String> {
        let mut st = self.0.borrow_mut();
        if let Some(e) = st.error.take() {
            return Err(e);
        }
        let total: u64 = st.files.iter().map(|(_, c)| c.packets()).sum();
        for (path, cap) in st.files.drain(..) {
            use std::io::Write;
            cap.finish()
                .flush()
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        let line = format!("pcap: {total} packets written");
        if json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
        Ok(())
    }
}

impl Tap for LinkCaptures {
    fn packet(&mut self, link: usize, at: Duration, src: NodeAddr, dst: NodeAddr, buf: &[u8]) {
        let mut st = self.0.borrow_mut();
        if st.error.is_some() {
            return;
        }
        if let Some((path, cap)) = st.files.get_mut(link)
            && let Err(e) = cap.record(at, src, dst, buf)
        {
            let e = format!("{}: {e}", path.display());
            st.error = Some(e);
        }
    }
}

/// Prints a report as text or JSON.
pub fn print_report(report: &Report, json: bool) {
    if json {
        print!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
}

/// Ok if every check held, else the message for exit status 1.
pub fn verdict(report: &Report) -> super::CmdResult {
    if report.passed() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} expect checks failed",
            report.checks.failed,
            report.checks.failed + report.checks.passed
        ))
    }
}
