//! Packet capture for anode: what nodes send each other, as pcap files Wireshark and tshark
//! read.
//!
//! anode nodes exchange ANEP packets in UDP datagrams between node addresses (IP and port).
//! A capture record is one such datagram, written as the IP packet that carried it (or, in
//! the emulator, would have): an IPv4 or IPv6 header and a UDP header synthesized from the
//! two node addresses, then the ANEP bytes. The link type is `LINKTYPE_RAW` (101: raw IPv4
//! or IPv6, by the version nibble), so Wireshark's UDP dissector hands the payload to the
//! ANEP dissector (`tools/wireshark/anode.lua`) by port, as on a real wire.
//!
//! Contract: [`ip_udp`] never fails for a payload up to 65,507 bytes (IPv4) / 65,527 (IPv6);
//! longer ones are refused ([`CaptureError::TooLong`]). Headers carry valid checksums (IPv4
//! header, UDP over the pseudo-header) so no "bad checksum" expert info clutters a capture.
//! A source and destination of different IP families get an IPv6 frame with the IPv4 address
//! mapped (`::ffff:a.b.c.d`).

use std::io::Write;
use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

use anode_wire::NodeAddr;
use anode_wire::checksum::{checksum, sum};
use pcap_file::DataLink;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};

/// What went wrong writing a capture.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The payload does not fit one UDP datagram.
    #[error("a {len}-byte payload does not fit one UDP datagram")]
    TooLong {
        /// Its length.
        len: usize,
    },
    /// The pcap writer failed (the file or pipe could not be written).
    #[error("writing the capture failed: {0}")]
    Pcap(#[from] pcap_file::PcapError),
}

const UDP_LEN: usize = 8;
const V4_LEN: usize = 20;
const V6_LEN: usize = 40;
const PROTO_UDP: u8 = 17;

/// The IP packet that carries `payload` from `src` to `dst` in a UDP datagram.
pub fn ip_udp(src: NodeAddr, dst: NodeAddr, payload: &[u8]) -> Result<Vec<u8>, CaptureError> {
    let too_long = || CaptureError::TooLong { len: payload.len() };
    let udp_len = u16::try_from(UDP_LEN + payload.len()).map_err(|_| too_long())?;
    let mut udp = Vec::with_capacity(UDP_LEN + payload.len());
    udp.extend_from_slice(&src.port().to_be_bytes());
    udp.extend_from_slice(&dst.port().to_be_bytes());
    udp.extend_from_slice(&udp_len.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = u16::try_from(V4_LEN + udp.len()).map_err(|_| too_long())?;
            let mut pseudo = Vec::with_capacity(12 + udp.len());
            pseudo.extend_from_slice(&s.octets());
            pseudo.extend_from_slice(&d.octets());
            pseudo.extend_from_slice(&[0, PROTO_UDP]);
            pseudo.extend_from_slice(&udp_len.to_be_bytes());
            pseudo.extend_from_slice(&udp);
            set_udp_checksum(&mut udp, &pseudo);
            let mut ip = Vec::with_capacity(V4_LEN + udp.len());
            ip.extend_from_slice(&[0x45, 0]);
            ip.extend_from_slice(&total.to_be_bytes());
            ip.extend_from_slice(&[0, 0, 0x40, 0, 64, PROTO_UDP, 0, 0]);
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            let c = checksum(&ip);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            ip.extend_from_slice(&udp);
            Ok(ip)
        }
        (s, d) => {
            let (s, d) = (v6(s), v6(d));
            let mut pseudo = Vec::with_capacity(40 + udp.len());
            pseudo.extend_from_slice(&s.octets());
            pseudo.extend_from_slice(&d.octets());
            pseudo.extend_from_slice(&u32::from(udp_len).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, PROTO_UDP]);
            pseudo.extend_from_slice(&udp);
            set_udp_checksum(&mut udp, &pseudo);
            let mut ip = Vec::with_capacity(V6_LEN + udp.len());
            ip.extend_from_slice(&[0x60, 0, 0, 0]);
            ip.extend_from_slice(&udp_len.to_be_bytes());
            ip.extend_from_slice(&[PROTO_UDP, 64]);
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            ip.extend_from_slice(&udp);
            Ok(ip)
        }
    }
}

fn v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// Stores the UDP checksum computed over `pseudo` (pseudo-header + UDP with a zero checksum);
/// 0 is sent as 0xffff (RFC 768).
fn set_udp_checksum(udp: &mut [u8], pseudo: &[u8]) {
    let mut c = !sum(pseudo);
    if c == 0 {
        c = 0xffff;
    }
    if let Some(f) = udp.get_mut(6..8) {
        f.copy_from_slice(&c.to_be_bytes());
    }
}

/// A pcap file (or pipe) of ANEP datagrams; see the crate docs.
pub struct Capture<W: Write> {
    w: PcapWriter<W>,
    packets: u64,
}

impl<W: Write> std::fmt::Debug for Capture<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("packets", &self.packets)
            .finish()
    }
}

impl<W: Write> Capture<W> {
    /// Starts a capture on `out` (writes the pcap file header).
    pub fn new(out: W) -> Result<Capture<W>, CaptureError> {
        let header = PcapHeader {
            datalink: DataLink::RAW,
            ts_resolution: pcap_file::TsResolution::NanoSecond,
            ..PcapHeader::default()
        };
        Ok(Capture {
            w: PcapWriter::with_header(out, header)?,
            packets: 0,
        })
    }

    /// Records the datagram `payload` from `src` to `dst` at `ts` (since the Unix epoch, or
    /// since the start of an emulation).
    pub fn record(
        &mut self,
        ts: Duration,
        src: NodeAddr,
        dst: NodeAddr,
        payload: &[u8],
    ) -> Result<(), CaptureError> {
        let frame = ip_udp(src, dst, payload)?;
        let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        self.w.write_packet(&PcapPacket::new(ts, len, &frame))?;
        self.packets += 1;
        Ok(())
    }

    /// Packets recorded so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Flushes and returns the writer.
    pub fn finish(self) -> W {
        self.w.into_writer()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anode_wire::addr::v4;
    use pcap_file::pcap::PcapReader;

    #[test]
    fn ipv4_frame_has_valid_checksums() {
        let f = ip_udp(v4(198, 18, 0, 1, 3322), v4(198, 18, 0, 2, 3323), b"anep").unwrap();
        assert_eq!(f.len(), 20 + 8 + 4);
        assert_eq!(f[0], 0x45);
        assert_eq!(checksum(&f[..20]), 0, "IPv4 header checksum");
        assert_eq!(&f[20..24], &[0x0c, 0xfa, 0x0c, 0xfb]);
        // UDP checksum over the pseudo-header verifies to zero.
        let mut p = Vec::new();
        p.extend_from_slice(&f[12..20]);
        p.extend_from_slice(&[0, 17, 0, 12]);
        p.extend_from_slice(&f[20..]);
        assert_eq!(checksum(&p), 0);
    }

    #[test]
    fn ipv6_and_mixed_families() {
        let a: NodeAddr = "[2001:2::1]:3322".parse().unwrap();
        let b: NodeAddr = "[2001:2::2]:3322".parse().unwrap();
        let f = ip_udp(a, b, &[1, 2, 3]).unwrap();
        assert_eq!(f[0] >> 4, 6);
        assert_eq!(u16::from_be_bytes([f[4], f[5]]), 11);
        let m = ip_udp(v4(198, 18, 0, 1, 1), b, &[]).unwrap();
        assert_eq!(m[0] >> 4, 6);
        assert_eq!(&m[8..24], &v6("198.18.0.1".parse().unwrap()).octets());
    }

    #[test]
    fn too_long_is_refused() {
        let big = vec![0u8; 70_000];
        assert!(matches!(
            ip_udp(v4(198, 18, 0, 1, 1), v4(198, 18, 0, 2, 1), &big),
            Err(CaptureError::TooLong { len: 70_000 })
        ));
    }

    #[test]
    fn a_capture_reads_back() {
        let mut c = Capture::new(Vec::new()).unwrap();
        let (a, b) = (v4(198, 18, 0, 1, 3322), v4(198, 18, 0, 2, 3322));
        c.record(Duration::from_millis(5), a, b, b"one").unwrap();
        c.record(Duration::from_millis(7), b, a, b"two!").unwrap();
        assert_eq!(c.packets(), 2);
        let bytes = c.finish();
        let mut r = PcapReader::new(&bytes[..]).unwrap();
        assert_eq!(r.header().datalink, DataLink::RAW);
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!(p.timestamp, Duration::from_millis(5));
        assert_eq!(&p.data[28..], b"one");
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!(&p.data[28..], b"two!");
        assert!(r.next_packet().is_none());
    }
}
