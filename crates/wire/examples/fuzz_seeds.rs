//! Writes the seed corpora of the fuzz targets from real packets:
//! `cargo run -p anode-wire --example fuzz_seeds -- fuzz/corpus`.

use std::path::Path;

use anode_wire::addr::v4;
use anode_wire::anep::{AnepOption, AnepPacket, AnepRepr, TYPE_DATAGRAM};
use anode_wire::capsule::{Capsule, CapsuleRepr};
use anode_wire::control::{Control, Hello, Routes};
use anode_wire::datagram::Datagram;
use anode_wire::transit::{FLAG_EVAL_EVERY_HOP, TransitRepr};

fn main() -> std::io::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "fuzz/corpus".into());
    let dir = Path::new(&dir);
    let (a, b) = (
        v4(198, 18, 0, 1, 3322),
        "[2001:2::2]:3322".parse().expect("literal"),
    );
    let transit = TransitRepr {
        flags: FLAG_EVAL_EVERY_HOP,
        rb: 16,
        flow: 7,
        src: a,
        dst: b,
        prev_hop: a,
    };
    let datagram = Datagram {
        transit,
        port: 7,
        payload: b"hello".to_vec(),
    }
    .to_packet()
    .expect("fits");
    let capsule = Capsule {
        transit,
        header: CapsuleRepr {
            flags: 0,
            code: [0x5a; 32],
            code_source: Some(a),
        },
        payload: vec![1, 2, 3, 4],
    }
    .to_packet()
    .expect("fits");
    let mut h = AnepRepr::new(TYPE_DATAGRAM);
    h.options = vec![
        AnepOption::Source(a),
        AnepOption::Destination(b),
        AnepOption::Checksum(0),
    ];
    h.options.push(AnepOption::Authentication {
        scheme: 1,
        data: vec![9; 20],
    });
    let with_opts = h.emit_packet(&transit.to_vec()).expect("fits");
    let hello = Control::Hello(Hello {
        sender: a,
        hello_ms: 1000,
        dead_ms: 3500,
        seq: 1,
        seen: vec![b],
    });
    let routes = Control::Routes(Routes {
        sender: a,
        seq: 3,
        flags: Routes::FULL_FIRST | Routes::FULL_LAST,
        entries: vec![(b, 1), (a, 16)],
    });
    let chunk = Control::CodeChunk {
        hash: [1; 32],
        total: 10,
        offset: 2,
        data: vec![0; 8],
    };
    // A datagram with a scheme-1 authentication option (a dummy signature: the target
    // exercises the layout, not the curve).
    let signed = anode_wire::auth::with_auth(
        &datagram,
        &anode_wire::auth::AuthData {
            key: [3; 32],
            seq: 42,
            sig: [4; 64],
        },
    )
    .expect("fits");
    let payload = |p: &[u8]| {
        AnepPacket::new_checked(p)
            .map(|p| p.payload().to_vec())
            .expect("valid")
    };
    let seeds: Vec<(&str, Vec<Vec<u8>>)> = vec![
        (
            "anep",
            vec![datagram.clone(), capsule.clone(), with_opts.clone()],
        ),
        ("transit", vec![payload(&datagram), payload(&capsule)]),
        (
            "auth",
            vec![signed.clone(), capsule.clone(), with_opts.clone()],
        ),
        ("capsule", vec![payload(&capsule)]),
        (
            "control",
            vec![
                hello.to_bytes().expect("fits"),
                routes.to_bytes().expect("fits"),
                chunk.to_bytes().expect("fits"),
            ],
        ),
        ("node_input", {
            let framed = |p: &[u8], link: u8| {
                let mut v = (p.len() as u16).to_be_bytes().to_vec();
                v.push(link);
                v.extend_from_slice(p);
                v
            };
            vec![
                [
                    framed(&hello.to_packet().expect("fits"), 1),
                    framed(&datagram, 0),
                ]
                .concat(),
                [
                    framed(&capsule, 0),
                    framed(&with_opts, 0),
                    framed(&routes.to_packet().expect("fits"), 1),
                ]
                .concat(),
            ]
        }),
    ];
    for (target, list) in seeds {
        let d = dir.join(target);
        std::fs::create_dir_all(&d)?;
        for (i, s) in list.iter().enumerate() {
            std::fs::write(d.join(format!("seed-{i}")), s)?;
        }
    }
    Ok(())
}
