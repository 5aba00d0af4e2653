//! The generators: sizes, shapes, determinism, parameter checks.

use super::*;
use crate::error::ParamError;

fn gen_(kind: Kind, seed: u64) -> Output {
    generate(&kind, seed, &Options::default()).unwrap()
}

fn count(toml: &str, table: &str) -> usize {
    toml.matches(&format!("[[{table}]]\n")).count()
}

#[test]
fn ring_grid_and_fat_tree_have_their_textbook_sizes() {
    let o = gen_(Kind::Ring { nodes: 10 }, 1);
    assert_eq!(
        (o.summary.nodes, o.summary.links, o.summary.diameter_hops),
        (10, 10, 5)
    );
    assert!(o.warnings.is_empty());
    assert!(
        o.toml
            .contains("a = \"n9\"\nb = \"n0\"\ndelay_ms = 1\nbandwidth_mbps = 1000\n")
    );
    let o = gen_(Kind::Grid { rows: 5, cols: 10 }, 1);
    assert_eq!(
        (o.summary.nodes, o.summary.links, o.summary.diameter_hops),
        (50, 85, 13)
    );
    assert!(o.toml.contains("name = \"n4_9\"\n"));
    let o = gen_(Kind::FatTree { k: 4, hosts: false }, 1);
    // 4 core, 8 aggregation, 8 edge; 16 core links + 16 pod links.
    assert_eq!(
        (o.summary.nodes, o.summary.links, o.summary.diameter_hops),
        (20, 32, 4)
    );
    let o = gen_(Kind::FatTree { k: 4, hosts: true }, 1);
    assert_eq!(
        (o.summary.nodes, o.summary.links, o.summary.diameter_hops),
        (36, 48, 6)
    );
    assert!(o.toml.contains("name = \"host-3-1-1\"\n"));
    assert_eq!(count(&o.toml, "node"), 36);
}

#[test]
fn known_diameters_match_the_search() {
    for kind in [
        Kind::Ring { nodes: 11 },
        Kind::Ring { nodes: 12 },
        Kind::Grid { rows: 3, cols: 7 },
        Kind::Grid { rows: 1, cols: 2 },
        Kind::FatTree { k: 2, hosts: false },
        Kind::FatTree { k: 6, hosts: true },
    ] {
        let mut rng = Rng(ChaCha8Rng::seed_from_u64(0));
        let g = match kind {
            Kind::Ring { nodes } => ring(nodes as usize),
            Kind::Grid { rows, cols } => grid(rows as usize, cols as usize),
            Kind::FatTree { k, hosts } => fat_tree(k as usize, hosts),
            _ => ba(10, 2, &mut rng),
        };
        let adj = Csr::new(g.nodes.len(), g.edges.iter().map(|e| (e.a, e.b)));
        let searched = crate::graph::diameter(&adj, u64::MAX, 0).0;
        let out = gen_(kind.clone(), 0);
        assert_eq!(out.summary.diameter_hops, searched, "{kind:?}");
    }
}

#[test]
fn ba_is_deterministic_and_has_m_links_per_node() {
    let a = gen_(Kind::Ba { nodes: 200, m: 3 }, 7);
    let b = gen_(Kind::Ba { nodes: 200, m: 3 }, 7);
    let c = gen_(Kind::Ba { nodes: 200, m: 3 }, 8);
    assert_eq!(a.toml, b.toml);
    assert_ne!(a.toml, c.toml);
    // A clique of 4 (6 links), then 3 links for each of 196 nodes.
    assert_eq!((a.summary.nodes, a.summary.links), (200, 6 + 196 * 3));
    assert!(a.warnings.is_empty());
    assert!(
        a.toml
            .contains("anode topo gen ba --nodes 200 --m 3 --seed 7")
    );
}

#[test]
fn waxman_is_deterministic_connected_and_has_distance_delays() {
    let k = Kind::Waxman {
        nodes: 300,
        alpha: 0.05,
        beta: 0.3,
        region_km: 4000.0,
    };
    let a = gen_(k.clone(), 3);
    assert_eq!(a.toml, gen_(k, 3).toml);
    assert_eq!(a.summary.nodes, 300);
    assert_eq!(a.summary.components, 1);
    assert!(a.toml.contains(" km\n"));
    // Sparse: many components to join, and the joins are said.
    let sparse = gen_(
        Kind::Waxman {
            nodes: 500,
            alpha: 0.01,
            beta: 0.05,
            region_km: 4000.0,
        },
        1,
    );
    assert_eq!(sparse.summary.nodes, 500);
    assert_eq!(sparse.summary.components, 1);
    assert!(
        matches!(sparse.warnings.first(), Some(Warning::ComponentsJoined { components, links_added }) if *links_added == components - 1 && *components > 10),
        "{:?}",
        sparse.warnings
    );
}

/// The skipping sampler gives the same expected link count as trying every pair, for
/// dense and for sparse parameters (where far cells' bounds underflow).
#[test]
fn waxman_sampling_matches_the_direct_method_in_expectation() {
    for (alpha, beta, tolerance) in [(0.2, 0.5, 0.02), (0.02, 0.5, 0.06), (0.002, 0.9, 0.15)] {
        let (n, region) = (400usize, 1000.0);
        let (mut expected, mut got) = (0.0, 0.0);
        for seed in 0..20 {
            let mut rng = Rng(ChaCha8Rng::seed_from_u64(seed));
            let mut w = Vec::new();
            let g = waxman(n, alpha, beta, region, &mut rng, &mut w).unwrap();
            let joined = match w.first() {
                Some(Warning::ComponentsJoined { links_added, .. }) => *links_added,
                _ => 0,
            };
            got += (g.edges.len() - joined) as f64;
            // The same positions (drawn first from the same seed), every pair's probability.
            let mut rng = Rng(ChaCha8Rng::seed_from_u64(seed));
            let pos: Vec<(f64, f64)> = (0..n)
                .map(|_| (rng.unit() * region, rng.unit() * region))
                .collect();
            let scale = alpha * region * std::f64::consts::SQRT_2;
            for a in 0..n {
                for b in a + 1..n {
                    expected += beta * (-dist(&pos, a, b) / scale).exp();
                }
            }
        }
        let ratio = got / expected;
        assert!(
            (ratio - 1.0).abs() < tolerance,
            "alpha {alpha} beta {beta}: sampled {got}, expected {expected}"
        );
    }
}

#[test]
fn parameters_out_of_range_are_refused() {
    let o = Options::default();
    let err = |k: Kind| generate(&k, 1, &o).unwrap_err();
    assert!(matches!(
        err(Kind::Ring { nodes: 2 }),
        TopoError::Param(ParamError::Range { .. })
    ));
    assert!(matches!(
        err(Kind::Grid { rows: 1, cols: 1 }),
        TopoError::Param(_)
    ));
    assert!(matches!(
        err(Kind::Ba { nodes: 3, m: 3 }),
        TopoError::Param(ParamError::BaM { .. })
    ));
    assert!(matches!(
        err(Kind::FatTree { k: 5, hosts: false }),
        TopoError::Param(ParamError::OddK(5))
    ));
    assert!(matches!(
        err(Kind::Ring { nodes: u64::MAX }),
        TopoError::Param(ParamError::TooManyNodes { .. })
    ));
    assert!(matches!(
        err(Kind::Grid {
            rows: u64::MAX,
            cols: u64::MAX
        }),
        TopoError::Param(ParamError::TooManyNodes { .. })
    ));
    assert!(matches!(
        err(Kind::FatTree {
            k: 1 << 40,
            hosts: true
        }),
        TopoError::Param(ParamError::TooManyNodes { .. })
    ));
    assert!(matches!(
        err(Kind::Ba {
            nodes: 50_000,
            m: 1000
        }),
        TopoError::Param(ParamError::TooManyLinks { .. })
    ));
    for (alpha, beta) in [(0.0, 0.5), (f64::NAN, 0.5), (0.1, 0.0), (0.1, 1.5)] {
        let k = Kind::Waxman {
            nodes: 10,
            alpha,
            beta,
            region_km: 100.0,
        };
        assert!(matches!(err(k), TopoError::Param(ParamError::Range { .. })));
    }
    let e = err(Kind::Ring { nodes: 2 }).to_string();
    assert_eq!(e, "--nodes = 2 is out of range: give at least 3 for a ring");
}

#[test]
fn a_ring_too_long_for_distance_vector_says_so() {
    let o = gen_(Kind::Ring { nodes: 3000 }, 1);
    assert_eq!(o.summary.infinity, 1024);
    assert!(matches!(
        o.warnings.as_slice(),
        [Warning::DiameterBeyondInfinity {
            diameter: 1500,
            infinity: 1024
        }]
    ));
}
