//! `anode capture`: a running node's datagrams to a pcap file (`-w FILE`), to stdout as pcap
//! (`-w -`, for `wireshark -k -i -`), or as one line each. The work is in
//! `anode_ctl::capture`; this is the command line.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Duration;

use anode_ctl::capture::{self, CaptureOptions, CaptureSummary, PcapSink};
use anode_ether::signals;

use super::client::{Conn, connect_to};

/// `anode capture` arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    anode capture --node-port 4001 --count 10\n  \
    anode capture --node-port 4001 --link b --seconds 5 -w b.pcap\n  \
    anode capture --node-port 4001 -w - | wireshark -k -i -\n\n\
    Wireshark decodes ANEP with tools/wireshark/anode.lua (see its README).")]
pub struct Args {
    /// Only this link: its name, number or peer address (see `anode links`).
    #[arg(long)]
    link: Option<String>,
    /// Stop after this many packets.
    #[arg(long, short = 'c')]
    count: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    seconds: Option<f64>,
    /// Write pcap to FILE (`-` for stdout) instead of printing one line per packet.
    #[arg(short = 'w', value_name = "FILE")]
    write: Option<PathBuf>,
    #[command(flatten)]
    conn: Conn,
}

/// Runs `anode capture`.
pub fn run(a: Args) -> super::CmdResult {
    let duration = match a.seconds {
        Some(s) if !(0.001..=31_536_000.0).contains(&s) => {
            return Err("--seconds must be between 0.001 and 31536000".into());
        }
        s => s.map(Duration::from_secs_f64),
    };
    let o = CaptureOptions {
        link: a.link.clone(),
        count: a.count,
        duration,
    };
    super::install_signals()?;
    let mut c = connect_to(&a.conn)?;
    let json = a.conn.json();
    let (node, peer) = capture::begin(&mut c, &o).map_err(err)?;
    // As tcpdump does: say what is captured on stderr, so a pipe's reader is not confused.
    match peer {
        Some(p) => eprintln!("anode: capturing on {node}, link to {p}"),
        None => eprintln!("anode: capturing on {node}, all links"),
    }
    let stop = signals::stop_requested;
    let sum = match a.write.as_deref() {
        Some(p) if p.as_os_str() == "-" => {
            let mut sink = PcapSink::new(std::io::stdout().lock(), true).map_err(err)?;
            let s = capture::follow(&mut c, node, &stop, &mut |n, p| sink.write(n, p));
            drop(sink.finish().map_err(err)?);
            s
        }
        Some(p) => {
            let f = File::create(p).map_err(|e| format!("cannot create {}: {e}", p.display()))?;
            let mut sink = PcapSink::new(BufWriter::new(f), false).map_err(err)?;
            let s = capture::follow(&mut c, node, &stop, &mut |n, p| sink.write(n, p));
            sink.finish().map_err(err)?;
            s
        }
        None => {
            let mut out = std::io::stdout().lock();
            capture::follow(&mut c, node, &stop, &mut |n, p| {
                if json {
                    serde_json::to_writer(&mut out, p).map_err(std::io::Error::from)?;
                    writeln!(out)?;
                } else {
                    writeln!(out, "{}", capture::describe(n, p))?;
                }
                Ok(())
            })
        }
    }
    .map_err(err)?;
    report(&sum, json && a.write.is_none());
    Ok(())
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The summary on stderr, as tcpdump prints it (JSON on stdout with `--json` and no `-w`).
fn report(s: &CaptureSummary, json: bool) {
    if json {
        if let Ok(line) = serde_json::to_string(s) {
            println!("{line}");
        }
        return;
    }
    eprintln!(
        "{} packets captured on {} ({})",
        s.packets, s.node, s.reason
    );
    if s.dropped > 0 {
        eprintln!(
            "{} packets dropped by the capture (it fell behind; the node forwarded them)",
            s.dropped
        );
    }
}
