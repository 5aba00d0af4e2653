//! Emulator speed: simulated packets per wall-clock second for a 5-node ring in which every
//! node floods every other node with datagrams (plus the routing protocol's own traffic).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn ring_flood() -> String {
    let mut s = String::from(
        "[network]\nseed = 1\nduration_ms = 4000\n[routing]\nhello_interval_ms = 250\ndead_interval_ms = 800\nupdate_interval_ms = 1000\nroute_timeout_ms = 6000\ngc_interval_ms = 4000\ntriggered_delay_ms = 20\n",
    );
    let names = ["a", "b", "c", "d", "e"];
    for n in names {
        s += &format!("[[node]]\nname = \"{n}\"\n");
    }
    for i in 0..5 {
        s += &format!(
            "[[link]]\na = \"{}\"\nb = \"{}\"\ndelay_ms = 1\nbandwidth_mbps = 1000\nqueue_bytes = 1000000\n",
            names[i],
            names[(i + 1) % 5]
        );
    }
    // 5 senders x 4 destinations x 1000 datagrams of 256 bytes over one second.
    for n in names {
        s += &format!(
            "[[step]]\nat_ms = 2000\naction = \"send\"\nfrom = \"{n}\"\nto = \"*\"\nsize = 256\ncount = 1000\ninterval_ms = 1\n"
        );
    }
    s
}

/// Link-level packet deliveries in one run (each hop of each packet counts once).
fn packets(r: &anode_emu::Report) -> u64 {
    r.links
        .iter()
        .map(|l| l.a_to_b.map_or(0, |d| d.delivered) + l.b_to_a.map_or(0, |d| d.delivered))
        .sum()
}

fn bench(c: &mut Criterion) {
    let src = ring_flood();
    let run = || {
        let t = anode_emu::Topology::parse(&src, "flood.toml").unwrap_or_else(|e| panic!("{e}"));
        anode_emu::run(t).unwrap_or_else(|e| panic!("{e}"))
    };
    let n = packets(&run());
    let mut g = c.benchmark_group("sim");
    g.throughput(Throughput::Elements(n));
    g.sample_size(10);
    g.bench_function("ring5_flood_packets", |b| b.iter(run));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
