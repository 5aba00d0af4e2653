//! The resource limiter of one store.

use wasmtime::ResourceLimiter;

use crate::engine::{MAX_MEMORIES_PER_MODULE, MAX_TABLES_PER_MODULE};

/// The resource limiter of one store (`Store::limiter(|s| &mut s.limits)`).
///
/// Contract:
/// - a memory growth to more than `max_memory_bytes` fails with
///   `memory limit: {desired} bytes wanted, {max} allowed`, a table growth to more than
///   `max_table_elements` with `table limit: {desired} elements wanted`; either sets
///   [`Limits::hit`], which stays set until [`Limits::clear_hit`] (call it before each guest
///   call to tell that call's limit trap from its other traps);
/// - the store holds at most `instances` instances, with at most one memory and four tables
///   each (the pooling bounds of [`crate::engine`]).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    max_memory: usize,
    max_table: usize,
    instances: usize,
    hit: bool,
}

impl Limits {
    /// A limiter for a store of `instances` instances.
    pub fn new(max_memory_bytes: usize, max_table_elements: usize, instances: usize) -> Limits {
        Limits {
            max_memory: max_memory_bytes,
            max_table: max_table_elements,
            instances,
            hit: false,
        }
    }

    /// Whether a growth was refused since the last [`Limits::clear_hit`].
    #[inline]
    pub fn hit(&self) -> bool {
        self.hit
    }

    /// Forgets a refused growth (before the next guest call).
    #[inline]
    pub fn clear_hit(&mut self) {
        self.hit = false;
    }
}

impl ResourceLimiter for Limits {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_memory {
            self.hit = true;
            return Err(wasmtime::format_err!(
                "memory limit: {desired} bytes wanted, {} allowed",
                self.max_memory
            ));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_table {
            self.hit = true;
            return Err(wasmtime::format_err!(
                "table limit: {desired} elements wanted"
            ));
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.instances
    }

    fn tables(&self) -> usize {
        MAX_TABLES_PER_MODULE as usize * self.instances
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES_PER_MODULE as usize * self.instances
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_growth_is_recorded_until_cleared() {
        let mut l = Limits::new(2 << 16, 10, 1);
        assert_eq!(l.memory_growing(0, 2 << 16, None).ok(), Some(true));
        assert!(!l.hit());
        let e = l
            .memory_growing(0, 3 << 16, None)
            .expect_err("past the bound");
        assert_eq!(
            e.to_string(),
            "memory limit: 196608 bytes wanted, 131072 allowed"
        );
        assert!(l.hit());
        l.clear_hit();
        assert!(!l.hit());
        let e = l.table_growing(0, 11, None).expect_err("past the bound");
        assert_eq!(e.to_string(), "table limit: 11 elements wanted");
        assert!(l.hit());
        assert_eq!((l.instances(), l.tables(), l.memories()), (1, 4, 1));
    }

    #[test]
    fn guest_growth_past_the_bound_traps() {
        let pool = crate::Pool {
            max_instances: 1,
            max_memory_bytes: 4 << 16,
            max_table_elements: 10,
        };
        let engine = wasmtime::Engine::new(&crate::engine::config(&pool)).expect("engine");
        let text = r#"(module (memory 1)
            (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0))))"#;
        let m = wasmtime::Module::new(&engine, wat::parse_str(text).expect("wat")).expect("module");
        let mut store = wasmtime::Store::new(&engine, Limits::new(2 << 16, 10, 1));
        store.limiter(|l| l);
        store.set_fuel(1000).expect("fuel");
        let inst = wasmtime::Instance::new(&mut store, &m, &[]).expect("instance");
        let grow = inst
            .get_typed_func::<i32, i32>(&mut store, "grow")
            .expect("export");
        assert_eq!(grow.call(&mut store, 1).ok(), Some(1));
        assert!(!store.data().hit());
        assert!(grow.call(&mut store, 1).is_err());
        assert!(store.data().hit());
    }
}
