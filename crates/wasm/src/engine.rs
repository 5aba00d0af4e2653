//! The engine settings every anode wasmtime engine shares.
//!
//! [`config`] returns a [`Config`] with:
//! - fuel metering on (`consume_fuel`): every store must be given fuel before a call;
//! - Cranelift at `OptLevel::Speed` (the default strategy, unless the caller sets another);
//! - the pooling instance allocator sized by a [`Pool`]: `max_instances` instance, memory and
//!   table slots, each memory at most `max_memory_bytes`, each table at most
//!   `max_table_elements`, and per module at most [`MAX_MEMORIES_PER_MODULE`] memory and
//!   [`MAX_TABLES_PER_MODULE`] tables (a module asking for more fails to compile).
//!
//! Callers add what differs (the capsule EE: `strategy` and `parallel_compilation` per tier)
//! and build the [`Engine`](wasmtime::Engine) themselves, mapping its error into their own.

use wasmtime::{Config, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig};

/// Most linear memories one module may define.
pub const MAX_MEMORIES_PER_MODULE: u32 = 1;
/// Most tables one module may define.
pub const MAX_TABLES_PER_MODULE: u32 = 4;

/// The pooling allocator's bounds of one engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool {
    /// Instances that may be live at once (also the memory and table slots).
    pub max_instances: u32,
    /// Largest linear memory of one instance, bytes.
    pub max_memory_bytes: usize,
    /// Most elements of one table.
    pub max_table_elements: usize,
}

/// The shared engine configuration for `pool` (see the module docs).
pub fn config(pool: &Pool) -> Config {
    let mut p = PoolingAllocationConfig::new();
    p.total_core_instances(pool.max_instances)
        .total_memories(pool.max_instances)
        .total_tables(pool.max_instances)
        .max_memory_size(pool.max_memory_bytes)
        .table_elements(pool.max_table_elements)
        .max_memories_per_module(MAX_MEMORIES_PER_MODULE)
        .max_tables_per_module(MAX_TABLES_PER_MODULE);
    let mut c = Config::new();
    c.consume_fuel(true)
        .cranelift_opt_level(OptLevel::Speed)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(p));
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wat(text: &str) -> Vec<u8> {
        wat::parse_str(text).expect("wat")
    }

    #[test]
    fn engine_meters_fuel_and_pools() {
        let pool = Pool {
            max_instances: 2,
            max_memory_bytes: 1 << 20,
            max_table_elements: 100,
        };
        let engine = wasmtime::Engine::new(&config(&pool)).expect("engine");
        let two_memories = r#"(module (memory 1) (memory 1))"#;
        let err = wasmtime::Module::new(&engine, wat(two_memories)).expect_err("two memories");
        assert!(format!("{err:#}").contains("memor"), "{err:#}");
        let m =
            wasmtime::Module::new(&engine, wat(r#"(module (func (export "f")))"#)).expect("module");
        let mut store = wasmtime::Store::new(&engine, ());
        // Fuel metering is on: a store starts with none, so a call traps until it gets some.
        let inst = wasmtime::Instance::new(&mut store, &m, &[]).expect("instance");
        let f = inst
            .get_typed_func::<(), ()>(&mut store, "f")
            .expect("export");
        assert!(f.call(&mut store, ()).is_err());
        store.set_fuel(100).expect("fuel");
        f.call(&mut store, ()).expect("call with fuel");
    }
}
