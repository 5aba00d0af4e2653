//! The few system calls aya does not make for us: `BPF_PROG_TEST_RUN` (tests run the loaded
//! program on crafted frames), deleting the clsact qdisc we added (rtnetlink
//! `RTM_DELQDISC`), and ifindex -> name.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

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

const TC_H_CLSACT: u32 = 0xffff_fff1;
const TCA_KIND: u16 = 1;

/// `struct tcmsg`.
#[repr(C)]
struct TcMsg {
    family: u8,
    pad1: u8,
    pad2: u16,
    ifindex: i32,
    handle: u32,
    parent: u32,
    info: u32,
}

/// Deletes the clsact qdisc of `ifindex` (and with it every filter under it), like
/// `tc qdisc del dev IF clsact`.
pub fn del_clsact(ifindex: u32) -> io::Result<()> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a freshly created descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };

    let kind = b"clsact\0";
    let attr_len = 4 + kind.len();
    let attr_space = (attr_len + 3) & !3;
    let hdr = size_of::<libc::nlmsghdr>();
    let total = hdr + size_of::<TcMsg>() + attr_space;
    let mut msg = vec![0u8; total];
    let nlh = libc::nlmsghdr {
        nlmsg_len: total as u32,
        nlmsg_type: libc::RTM_DELQDISC,
        nlmsg_flags: (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16,
        nlmsg_seq: 1,
        nlmsg_pid: 0,
    };
    let tc = TcMsg {
        family: libc::AF_UNSPEC as u8,
        pad1: 0,
        pad2: 0,
        ifindex: i32::try_from(ifindex).map_err(|_| io::Error::from_raw_os_error(libc::ENODEV))?,
        handle: TC_H_CLSACT & 0xffff_0000,
        parent: TC_H_CLSACT,
        info: 0,
    };
    // SAFETY: both are plain `repr(C)` integer structs; viewing them as bytes is sound.
    let (nlh_b, tc_b) = unsafe {
        (
            std::slice::from_raw_parts((&nlh as *const libc::nlmsghdr).cast::<u8>(), hdr),
            std::slice::from_raw_parts((&tc as *const TcMsg).cast::<u8>(), size_of::<TcMsg>()),
        )
    };
    let mut w = 0;
    for part in [nlh_b, tc_b] {
        if let Some(dst) = msg.get_mut(w..w + part.len()) {
            dst.copy_from_slice(part);
        }
        w += part.len();
    }
    let mut attr = Vec::with_capacity(attr_len);
    attr.extend_from_slice(&(attr_len as u16).to_ne_bytes());
    attr.extend_from_slice(&TCA_KIND.to_ne_bytes());
    attr.extend_from_slice(kind);
    if let Some(dst) = msg.get_mut(w..w + attr.len()) {
        dst.copy_from_slice(&attr);
    }

    // SAFETY: `msg` is a live buffer of `msg.len()` bytes; `fd` is open.
    let n = unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = [0u8; 4096];
    // SAFETY: `buf` is a live buffer of `buf.len()` bytes; `fd` is open.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // The reply: nlmsghdr (type NLMSG_ERROR) then the error code (0: done).
    let reply = buf.get(..n as usize).unwrap_or(&[]);
    let ty = reply
        .get(4..6)
        .and_then(|b| <[u8; 2]>::try_from(b).ok())
        .map(u16::from_ne_bytes)
        .unwrap_or(0);
    let code = reply
        .get(hdr..hdr + 4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(i32::from_ne_bytes)
        .unwrap_or(-libc::EPROTO);
    if i32::from(ty) != libc::NLMSG_ERROR {
        return Err(io::Error::from_raw_os_error(libc::EPROTO));
    }
    if code != 0 {
        return Err(io::Error::from_raw_os_error(-code));
    }
    Ok(())
}
