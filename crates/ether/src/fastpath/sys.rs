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
    use netlink_packet_core::{
        NLM_F_ACK, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
    };
    use netlink_packet_route::RouteNetlinkMessage;
    use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage};
    use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

    let index = i32::try_from(ifindex).map_err(|_| io::Error::from_raw_os_error(libc::ENODEV))?;
    let mut tc = TcMessage::with_index(index);
    tc.header.handle = TcHandle {
        major: u16::MAX,
        minor: 0,
    };
    tc.header.parent = TcHandle::CLSACT;
    tc.attributes.push(TcAttribute::Kind("clsact".into()));
    let mut msg = NetlinkMessage::new(
        NetlinkHeader::default(),
        NetlinkPayload::from(RouteNetlinkMessage::DelQueueDiscipline(tc)),
    );
    msg.header.flags = NLM_F_REQUEST | NLM_F_ACK;
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
    match answer.payload {
        NetlinkPayload::Error(e) => match e.code {
            None => Ok(()),
            Some(code) => Err(io::Error::from_raw_os_error(-code.get())),
        },
        _ => Err(io::Error::from_raw_os_error(libc::EPROTO)),
    }
}
