//! `anode capture`: a running node's datagrams, as pcap (for Wireshark, tshark, tcpdump -r)
//! or as one text line each.
//!
//! The node streams copies of what its socket receives and sends ([`Client::capture`]); this
//! module reads the stream until the node ends it (count, time), the caller's `stop` says so
//! (Ctrl-C), or the connection closes, and hands each packet to a sink. [`PcapSink`] writes
//! each datagram as the IP/UDP packet that carried it (`anode_capture`), flushing every
//! record when asked to, so `anode capture -w - | wireshark -k -i -` shows packets as they
//! pass.

use std::io::Write;
use std::time::{Duration, Instant};

use anode_wire::NodeAddr;
use anode_wire::anep::{AnepPacket, TYPE_CAPSULE, TYPE_CONTROL, TYPE_DATAGRAM, TYPE_PLAN};

use crate::{Client, ClientError, PacketInfo, StreamItem};

/// How often the reader looks at `stop` while no packet comes.
const TICK: Duration = Duration::from_millis(200);

/// What to capture.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaptureOptions {
    /// Only this link (name, index or peer address).
    pub link: Option<String>,
    /// Stop after this many packets.
    pub count: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
}

/// How a capture went.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CaptureSummary {
    /// The node captured on.
    pub node: NodeAddr,
    /// Packets received from the node and written.
    pub packets: u64,
    /// Packets the node could not hand to the capture (it forwarded them all the same);
    /// unknown (0) when the capture was interrupted.
    pub dropped: u64,
    /// "count", "time", "interrupted" or "node stopped".
    pub reason: String,
}

/// Why a capture failed.
#[derive(Debug, thiserror::Error)]
pub enum CaptureToolError {
    /// Talking to the node failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The pcap output could not be written.
    #[error(transparent)]
    Pcap(#[from] anode_capture::CaptureError),
    /// The text or JSON output could not be written.
    #[error("writing the capture failed: {0}")]
    Write(#[from] std::io::Error),
}

/// Starts a capture on the node `c` is connected to; returns the node's address and the
/// peer the capture is limited to. Then [`follow`] reads it.
pub fn begin(
    c: &mut Client,
    o: &CaptureOptions,
) -> Result<(NodeAddr, Option<NodeAddr>), CaptureToolError> {
    let millis = o
        .duration
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1));
    Ok(c.capture(o.link.clone(), o.count, millis)?)
}

/// Reads the capture [`begin`] started at `node` until it ends; `sink` gets every packet.
pub fn follow(
    c: &mut Client,
    node: NodeAddr,
    stop: &dyn Fn() -> bool,
    sink: &mut dyn FnMut(NodeAddr, &PacketInfo) -> Result<(), CaptureToolError>,
) -> Result<CaptureSummary, CaptureToolError> {
    let mut packets = 0;
    loop {
        if stop() {
            return Ok(CaptureSummary {
                node,
                packets,
                dropped: 0,
                reason: "interrupted".into(),
            });
        }
        match c.next_item(Some(Instant::now() + TICK)) {
            Ok(StreamItem::Packet(p)) => {
                packets += 1;
                sink(node, &p)?;
            }
            Ok(StreamItem::CaptureEnd(e)) => {
                return Ok(CaptureSummary {
                    node,
                    packets,
                    dropped: e.dropped,
                    reason: e.reason,
                });
            }
            Ok(_) | Err(ClientError::Timeout) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// The (source, destination) of a captured packet at `node`.
pub fn endpoints(node: NodeAddr, p: &PacketInfo) -> (NodeAddr, NodeAddr) {
    if p.out {
        (node, p.peer)
    } else {
        (p.peer, node)
    }
}

/// Writes captured packets as pcap records.
#[derive(Debug)]
pub struct PcapSink<W: Write> {
    cap: anode_capture::Capture<Flushing<W>>,
}

impl<W: Write> PcapSink<W> {
    /// A pcap stream on `out` (the file header is written now); with `flush_each`, every
    /// record is flushed as it is written (for a pipe to Wireshark).
    pub fn new(out: W, flush_each: bool) -> Result<Self, CaptureToolError> {
        // With `flush_each` the file header goes out at once too, so a reader on a pipe
        // starts before the first packet.
        let cap = anode_capture::Capture::new(Flushing {
            inner: out,
            each: flush_each,
        })?;
        Ok(PcapSink { cap })
    }

    /// Writes one packet seen at `node`.
    pub fn write(&mut self, node: NodeAddr, p: &PacketInfo) -> Result<(), CaptureToolError> {
        let (src, dst) = endpoints(node, p);
        self.cap
            .record(Duration::from_nanos(p.ts_ns), src, dst, p.data.as_bytes())?;
        Ok(())
    }

    /// Flushes and returns the writer.
    pub fn finish(self) -> Result<W, CaptureToolError> {
        let mut f = self.cap.finish();
        f.inner.flush()?;
        Ok(f.inner)
    }
}

/// A writer that flushes after every write when `each` is set.
#[derive(Debug)]
pub struct Flushing<W: Write> {
    inner: W,
    each: bool,
}

impl<W: Write> Write for Flushing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        if self.each {
            self.inner.flush()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// One line for a captured packet, tcpdump-like:
/// `12:00:01.123456 127.0.0.1:4001 > 127.0.0.1:4002: ANEP capsule, 136 bytes` (UTC).
pub fn describe(node: NodeAddr, p: &PacketInfo) -> String {
    let (src, dst) = endpoints(node, p);
    let secs = p.ts_ns / 1_000_000_000;
    let micros = (p.ts_ns % 1_000_000_000) / 1_000;
    let day = secs % 86_400;
    let what = match AnepPacket::new_checked(p.data.as_bytes()) {
        Ok(a) => match a.type_id() {
            TYPE_CONTROL => "ANEP control".to_string(),
            TYPE_DATAGRAM => "ANEP datagram".to_string(),
            TYPE_CAPSULE => "ANEP capsule".to_string(),
            TYPE_PLAN => "ANEP PLAN".to_string(),
            t => format!("ANEP type {t:#06x}"),
        },
        Err(e) => format!("malformed ANEP ({e})"),
    };
    format!(
        "{:02}:{:02}:{:02}.{micros:06} {src} > {dst}: {what}, {} bytes",
        day / 3600,
        day / 60 % 60,
        day % 60,
        p.data.as_bytes().len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Payload;

    #[test]
    fn describes_a_received_capsule_and_a_malformed_packet() {
        let node: NodeAddr = "127.0.0.1:4001".parse().unwrap();
        let peer: NodeAddr = "127.0.0.1:4002".parse().unwrap();
        let capsule = anode_wire::anep::AnepRepr::new(TYPE_CAPSULE)
            .emit_packet(&[0; 8])
            .unwrap();
        let p = PacketInfo {
            ts_ns: 3_723_000_004_000,
            out: false,
            peer,
            data: Payload(capsule.clone()),
        };
        assert_eq!(
            describe(node, &p),
            format!(
                "01:02:03.000004 127.0.0.1:4002 > 127.0.0.1:4001: ANEP capsule, {} bytes",
                capsule.len()
            )
        );
        let bad = PacketInfo {
            out: true,
            data: Payload(vec![1, 2, 3]),
            ..p
        };
        let line = describe(node, &bad);
        assert!(
            line.contains("127.0.0.1:4001 > 127.0.0.1:4002: malformed ANEP"),
            "{line}"
        );
    }

    #[test]
    fn pcap_sink_writes_ip_udp_records_in_the_right_direction() {
        let node: NodeAddr = "127.0.0.1:4001".parse().unwrap();
        let mut sink = PcapSink::new(Vec::new(), true).unwrap();
        let p = PacketInfo {
            ts_ns: 1_000_000_123,
            out: true,
            peer: "127.0.0.1:4002".parse().unwrap(),
            data: Payload(vec![0xaa; 10]),
        };
        sink.write(node, &p).unwrap();
        let bytes = sink.finish().unwrap();
        let mut r = pcap_file::pcap::PcapReader::new(&bytes[..]).unwrap();
        let pkt = r.next_packet().unwrap().unwrap();
        assert_eq!(pkt.timestamp, Duration::from_nanos(1_000_000_123));
        let d = &pkt.data;
        assert_eq!(d.len(), 20 + 8 + 10);
        // IPv4 source and destination ports: 4001 -> 4002.
        assert_eq!(&d[20..24], &[0x0f, 0xa1, 0x0f, 0xa2]);
    }
}
