//! The few system calls aya does not make for us: `BPF_PROG_TEST_RUN` (tests run the loaded
//! program on crafted frames), deleting the clsact qdisc we added (rtnetlink
//! `RTM_DELQDISC`, built and sent with the rust-netlink crates), and ifindex -> name.

use std::ffi::CStr;
use std::io;
use std::os::fd::RawFd;

/// `BPF_PROG_TEST_RUN`.
const BPF_PROG_TEST_RUN: libc::c_long = 10;

/// The `test` member of `union bpf_attr` (linux/bpf.h), up to `batch_size`.
#[repr(C)]
#[derive(Debug, Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// Runs the program `prog` `repeat` times on `data` with the context `ctx` (its leading
/// bytes; the kernel treats the rest as zero). The runs share the packet (each sees the
/// rewrites of the one before). Returns the last return value, the packet after the runs,
/// and the kernel's mean run time in ns.
pub fn test_run_repeat(
    prog: RawFd,
    data: &[u8],
    ctx: &[u8],
    repeat: u32,
) -> io::Result<(u32, Vec<u8>, u32)> {
    let mut out = vec![0u8; data.len() + 512];
    let mut attr = TestRunAttr {
        prog_fd: u32::try_from(prog).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?,
        data_size_in: u32::try_from(data.len())
            .map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?,
        data_size_out: u32::try_from(out.len())
            .map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?,
        data_in: data.as_ptr() as u64,
        data_out: out.as_mut_ptr() as u64,
        repeat: repeat.max(1),
        ctx_size_in: u32::try_from(ctx.len())
            .map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?,
        ctx_in: if ctx.is_empty() {
            0
        } else {
            ctx.as_ptr() as u64
        },
        ..TestRunAttr::default()
    };
    // SAFETY: `attr` is a valid, fully initialised `bpf_attr` prefix of the size passed; the
    // kernel reads `data_size_in` bytes from `data` and `ctx_size_in` bytes from `ctx` (both
    // live slices of those lengths) and writes at most `data_size_out` bytes into `out`, which
    // outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_TEST_RUN,
            &mut attr as *mut TestRunAttr,
            size_of::<TestRunAttr>(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    out.truncate(attr.data_size_out as usize);
    Ok((attr.retval, out, attr.duration))
}

/// The name of the interface `ifindex` (in the calling thread's network namespace).
pub fn if_name(ifindex: u32) -> io::Result<String> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `buf` has the IF_NAMESIZE bytes if_indextoname may write (name and NUL).
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: on success `buf` holds a NUL-terminated name.
    let name = unsafe { CStr::from_ptr(buf.as_ptr()) };
    Ok(name.to_string_lossy().into_owned())
}

/// Deletes the clsact qdisc of `ifindex` (and with it every filter under it), like
/// `tc qdisc del dev IF clsact`: one rtnetlink `RTM_DELQDISC` request built with
/// `netlink-packet-route`, sent and acknowledged over a `netlink-sys` socket.
pub fn del_clsact(ifindex: u32) -> io::Result<()> {
    use netlink_packet_core::NetlinkPayload;
    use netlink_packet_route::RouteNetlinkMessage;
    use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage};

    let index = i32::try_from(ifindex).map_err(|_| io::Error::from_raw_os_error(libc::ENODEV))?;
    let mut tc = TcMessage::with_index(index);
    tc.header.handle = TcHandle {
        major: u16::MAX,
        minor: 0,
    };
    tc.header.parent = TcHandle::CLSACT;
    tc.attributes.push(TcAttribute::Kind("clsact".into()));
    match rtnl_exchange(RouteNetlinkMessage::DelQueueDiscipline(tc), true)? {
        NetlinkPayload::Error(e) => match e.code {
            None => Ok(()),
            Some(code) => Err(io::Error::from_raw_os_error(-code.get())),
        },
        _ => Err(io::Error::from_raw_os_error(libc::EPROTO)),
    }
}

/// Sends one rtnetlink request (asking for an acknowledgement if `ack`) and returns the one
/// answer's payload.
fn rtnl_exchange(
    req: netlink_packet_route::RouteNetlinkMessage,
    ack: bool,
) -> io::Result<netlink_packet_core::NetlinkPayload<netlink_packet_route::RouteNetlinkMessage>> {
    use netlink_packet_core::{
        NLM_F_ACK, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
    };
    use netlink_packet_route::RouteNetlinkMessage;
    use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

    let mut msg = NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::from(req));
    msg.header.flags = NLM_F_REQUEST | if ack { NLM_F_ACK } else { 0 };
    msg.header.sequence_number = 1;
    msg.finalize();
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.serialize(&mut buf);
    let mut sock = Socket::new(NETLINK_ROUTE)?;
    sock.bind_auto()?;
    sock.connect(&SocketAddr::new(0, 0))?;
    sock.send(&buf, 0)?;
    let mut reply = vec![0u8; 8192];
    let n = sock.recv(&mut &mut reply[..], 0)?;
    let answer = NetlinkMessage::<RouteNetlinkMessage>::deserialize(reply.get(..n).unwrap_or(&[]))
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    Ok(answer.payload)
}

/// One rtnetlink request and its one answer (an error answer becomes the `Err`).
fn rtnl_request(
    req: netlink_packet_route::RouteNetlinkMessage,
) -> io::Result<netlink_packet_route::RouteNetlinkMessage> {
    use netlink_packet_core::NetlinkPayload;
    match rtnl_exchange(req, false)? {
        NetlinkPayload::InnerMessage(m) => Ok(m),
        NetlinkPayload::Error(e) => Err(match e.code {
            Some(code) => io::Error::from_raw_os_error(-code.get()),
            None => io::Error::from_raw_os_error(libc::EPROTO),
        }),
        _ => Err(io::Error::from_raw_os_error(libc::EPROTO)),
    }
}

/// How a packet from this host to one address leaves: interface, its MTU and MAC, and the
/// MAC of the next hop on it (the address itself or the route's gateway).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct L2Path {
    /// The outgoing interface.
    pub oif: u32,
    /// Its MTU (IP bytes).
    pub mtu: u32,
    /// Its MAC.
    pub smac: [u8; 6],
    /// The next hop's MAC.
    pub dmac: [u8; 6],
    /// The interface is a veth: a TC program may hand a packet straight to its peer's
    /// ingress (`bpf_redirect_peer`) instead of sending it out of this end.
    pub veth: bool,
}

/// The kernel's answer to "how does a packet to `dst` leave?" (`ip route get DST`, then
/// `ip neigh get NEXTHOP dev IF`). `Err` when there is no route, the next hop's neighbor
/// entry is not (or no longer) valid, or the interface has no Ethernet address.
pub fn l2_path(dst: std::net::IpAddr) -> io::Result<L2Path> {
    use netlink_packet_route::neighbour::{
        NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
    };
    use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage};
    use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};

    let (family, plen, addr) = match dst {
        std::net::IpAddr::V4(a) => (AddressFamily::Inet, 32, RouteAddress::Inet(a)),
        std::net::IpAddr::V6(a) => (AddressFamily::Inet6, 128, RouteAddress::Inet6(a)),
    };
    let mut rm = RouteMessage::default();
    rm.header.address_family = family;
    rm.header.destination_prefix_length = plen;
    rm.attributes.push(RouteAttribute::Destination(addr));
    let RouteNetlinkMessage::NewRoute(route) = rtnl_request(RouteNetlinkMessage::GetRoute(rm))?
    else {
        return Err(io::Error::from_raw_os_error(libc::EPROTO));
    };
    let mut oif = None;
    let mut hop = dst;
    for a in &route.attributes {
        match a {
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::Gateway(RouteAddress::Inet(g)) => hop = (*g).into(),
            RouteAttribute::Gateway(RouteAddress::Inet6(g)) => hop = (*g).into(),
            _ => {}
        }
    }
    let oif = oif.ok_or_else(|| io::Error::from_raw_os_error(libc::ENETUNREACH))?;
    let mut nm = NeighbourMessage::default();
    nm.header.family = family;
    nm.header.ifindex = oif;
    nm.attributes
        .push(NeighbourAttribute::Destination(match hop {
            std::net::IpAddr::V4(a) => NeighbourAddress::Inet(a),
            std::net::IpAddr::V6(a) => NeighbourAddress::Inet6(a),
        }));
    let RouteNetlinkMessage::NewNeighbour(n) = rtnl_request(RouteNetlinkMessage::GetNeighbour(nm))?
    else {
        return Err(io::Error::from_raw_os_error(libc::EPROTO));
    };
    let valid = matches!(
        n.header.state,
        NeighbourState::Reachable
            | NeighbourState::Stale
            | NeighbourState::Delay
            | NeighbourState::Probe
            | NeighbourState::Permanent
    );
    let dmac = n.attributes.iter().find_map(|a| match a {
        NeighbourAttribute::LinkLayerAddress(m) => <[u8; 6]>::try_from(m.as_slice()).ok(),
        _ => None,
    });
    let (true, Some(dmac)) = (valid, dmac) else {
        return Err(io::Error::from_raw_os_error(libc::EHOSTUNREACH));
    };
    let name = if_name(oif)?;
    let read = |f: &str| std::fs::read_to_string(format!("/sys/class/net/{name}/{f}"));
    let mtu = read("mtu")?
        .trim()
        .parse()
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mac: Vec<u8> = read("address")?
        .trim()
        .split(':')
        .filter_map(|h| u8::from_str_radix(h, 16).ok())
        .collect();
    let smac = <[u8; 6]>::try_from(mac.as_slice())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    Ok(L2Path {
        oif,
        mtu,
        smac,
        dmac,
        veth: is_veth(oif),
    })
}

/// Whether interface `ifindex` is a veth (its link kind, `ip -d link show`); false when the
/// kernel does not say.
fn is_veth(ifindex: u32) -> bool {
    use netlink_packet_route::RouteNetlinkMessage;
    use netlink_packet_route::link::{InfoKind, LinkAttribute, LinkInfo, LinkMessage};
    let mut lm = LinkMessage::default();
    lm.header.index = ifindex;
    let Ok(RouteNetlinkMessage::NewLink(l)) = rtnl_request(RouteNetlinkMessage::GetLink(lm)) else {
        return false;
    };
    l.attributes.iter().any(|a| match a {
        LinkAttribute::LinkInfo(infos) => infos
            .iter()
            .any(|i| matches!(i, LinkInfo::Kind(InfoKind::Veth))),
        _ => false,
    })
}
