//! The XDP program in front of the AF_XDP sockets (`bpf/xsk.c`): every frame arriving on an
//! interface is redirected to the socket bound to its receive queue, through an `XSKMAP`.
//!
//! One copy of the object per interface, so each interface has its own map (an `XSKMAP`
//! entry only delivers to a socket bound to the same device and queue the frame came in
//! on, and every veth has one queue, 0). Native (driver) XDP is tried first, then generic
//! (skb) XDP; [`XskProgram::mode`] says which one is attached. Dropping an `XskProgram`
//! detaches it. Like every netlink and ifindex operation here, attach in the network
//! namespace of the interface (the calling thread's).

use std::fmt;
use std::os::fd::AsFd;

use aya::maps::{MapData, XskMap};
use aya::programs::{Xdp, XdpMode};
use aya::{Ebpf, EbpfLoader};

use super::XskError;

/// The compiled program (see `build.rs`).
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xsk.o"));

/// The program's name in the object.
const PROGRAM: &str = "anode_xsk_redirect";

/// Entries of the `xsks` map (`max_entries` in `bpf/xsk.c`): receive queues 0..64.
pub const XSKS_MAX: u32 = 64;

/// How the XDP program runs on an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpAttach {
    /// Native: in the driver's receive path (veth has it: in the NAPI poll of the
    /// receiving end, on the frames its peer transmitted).
    Driver,
    /// Generic: in the stack's receive path, on an skb (any device).
    Skb,
}

impl fmt::Display for XdpAttach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            XdpAttach::Driver => "native (driver)",
            XdpAttach::Skb => "generic (skb)",
        })
    }
}

/// Which XDP attach modes to try.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpPref {
    /// Native, else generic.
    #[default]
    Auto,
    /// Native only.
    Driver,
    /// Generic only.
    Skb,
}

impl std::str::FromStr for XdpPref {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(XdpPref::Auto),
            "driver" | "native" | "drv" => Ok(XdpPref::Driver),
            "skb" | "generic" => Ok(XdpPref::Skb),
            _ => Err(format!("XDP mode {s:?}: expected auto, driver or skb")),
        }
    }
}

/// The redirect program attached to one interface.
pub struct XskProgram {
    /// The program and its link; dropping it detaches.
    ebpf: Option<Ebpf>,
    ifindex: u32,
    mode: XdpAttach,
    /// Why native mode was not used (when it was not).
    note: Option<String>,
}

impl fmt::Debug for XskProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XskProgram")
            .field("ifindex", &self.ifindex)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl XskProgram {
    /// Loads a copy of the program, puts the sockets in its map (`(queue, socket)`), and
    /// attaches it to `ifindex` (`name` for messages).
    pub fn attach(
        name: &str,
        ifindex: u32,
        sockets: &[(u32, &impl AsFd)],
        pref: XdpPref,
    ) -> Result<XskProgram, XskError> {
        let prog_err = |reason: String| XskError::Program { reason };
        let mut ebpf = EbpfLoader::new()
            .load(OBJECT)
            .map_err(|e| prog_err(format!("loading the object: {e}")))?;
        let map = ebpf
            .take_map("xsks")
            .ok_or_else(|| prog_err("map xsks missing from the object".into()))?;
        // Taken out of the object; the program keeps its own reference once loaded.
        let mut xsks: XskMap<MapData> =
            XskMap::try_from(map).map_err(|e| prog_err(format!("map xsks: {e}")))?;
        for &(queue, fd) in sockets {
            if queue >= XSKS_MAX {
                return Err(XskError::Config {
                    reason: format!("queue {queue}: the XSKMAP holds queues 0..{XSKS_MAX}"),
                });
            }
            xsks.set(queue, fd.as_fd(), 0)
                .map_err(|e| prog_err(format!("setting xsks[{queue}]: {e}")))?;
        }
        let prog: &mut Xdp = ebpf
            .program_mut(PROGRAM)
            .ok_or_else(|| prog_err(format!("program {PROGRAM} missing from the object")))?
            .try_into()
            .map_err(|e| prog_err(format!("program {PROGRAM}: {e}")))?;
        prog.load()
            .map_err(|e| prog_err(format!("the verifier rejected {PROGRAM}: {e}")))?;
        let attach_err = |reason: String| XskError::Attach {
            name: name.to_string(),
            reason,
        };
        let tries: &[(XdpMode, XdpAttach)] = match pref {
            XdpPref::Auto => &[
                (XdpMode::Driver, XdpAttach::Driver),
                (XdpMode::Skb, XdpAttach::Skb),
            ],
            XdpPref::Driver => &[(XdpMode::Driver, XdpAttach::Driver)],
            XdpPref::Skb => &[(XdpMode::Skb, XdpAttach::Skb)],
        };
        let mut note = None;
        for &(m, attached) in tries {
            match prog.attach_to_if_index(ifindex, m) {
                Ok(_) => {
                    return Ok(XskProgram {
                        ebpf: Some(ebpf),
                        ifindex,
                        mode: attached,
                        note,
                    });
                }
                Err(e) => {
                    note = Some(format!("{attached} XDP refused: {e}"));
                }
            }
        }
        Err(attach_err(
            note.unwrap_or_else(|| "no attach mode to try".into()),
        ))
    }

    /// How the program runs.
    pub fn mode(&self) -> XdpAttach {
        self.mode
    }

    /// Why a preferred mode was not used, if one was not.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }
}

impl Drop for XskProgram {
    fn drop(&mut self) {
        // aya's links detach when the program goes.
        drop(self.ebpf.take());
    }
}
