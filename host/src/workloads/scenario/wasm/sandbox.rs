//! The sandbox a component runs in: a wasmtime engine with epoch interruption, a store
//! whose memory is capped, and a WASI context with nothing open but a read-only view of
//! the scenario's own directory. Clocks and randomness are deterministic, so a component
//! cannot make a run depend on when or where it ran.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wasmtime::component::ResourceTable;
use wasmtime::{Config, Engine, ResourceLimiter};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::random::Deterministic;
use wasmtime_wasi::{
    FsPerms, HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView,
};

use crate::workloads::scenario::params::Params;
use crate::workloads::scenario::HostContext;

/// How often the engine's epoch advances; call deadlines are counted in these ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// What a guest may write to stderr (a Rust panic message lands there); kept to quote
/// it when the guest traps.
const STDERR_CAPACITY: usize = 1 << 20;

/// An engine for one run: compiled once, with a thread that ticks its epoch until the
/// engine is dropped.
pub fn engine() -> wasmtime::Result<Engine> {
    let mut config = Config::new();
    config.epoch_interruption(true);
    let engine = Engine::new(&config)?;
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("wasm-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .map_err(|e| wasmtime::Error::msg(format!("cannot start the epoch thread: {e}")))?;
    Ok(engine)
}

/// Bytes counted per table element: wasmtime stores a pointer for each.
const TABLE_ELEMENT_BYTES: usize = std::mem::size_of::<usize>();

/// How many memories, tables and core instances one guest may create; a Rust component
/// has one memory and a handful of each of the others.
const MAX_MEMORIES: usize = 100;
const MAX_TABLES: usize = 1_000;
const MAX_INSTANCES: usize = 1_000;

/// Caps the sum of a guest's linear memories and tables (a component may hold several
/// of each), and remembers that the cap was hit, so the error can say so instead of
/// quoting whatever trap followed. Memories and tables live as long as the store, so
/// the sum only grows.
pub struct MemoryCap {
    pub max_bytes: usize,
    pub hit: bool,
    /// Bytes of all memories and tables so far.
    used: usize,
    /// The last growth allowed, given back if wasmtime then fails to grow.
    pending: usize,
}

impl MemoryCap {
    pub fn new(max_bytes: usize) -> MemoryCap {
        MemoryCap {
            max_bytes,
            hit: false,
            used: 0,
            pending: 0,
        }
    }

    fn grow(&mut self, what: &str, by: usize) -> wasmtime::Result<bool> {
        let total = self.used.saturating_add(by);
        if total > self.max_bytes {
            self.hit = true;
            return Err(wasmtime::Error::msg(format!(
                "the scenario tried to grow its {what} to {} MiB in all, past its {} MiB cap",
                total >> 20,
                self.max_bytes >> 20
            )));
        }
        self.used = total;
        self.pending = by;
        Ok(true)
    }

    fn undo(&mut self) {
        self.used -= std::mem::take(&mut self.pending);
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.grow("memory", desired.saturating_sub(current))
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.undo();
        Ok(())
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let by = desired.saturating_sub(current);
        self.grow("tables", by.saturating_mul(TABLE_ELEMENT_BYTES))
    }

    fn table_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.undo();
        Ok(())
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }
}

/// The wall-clock deadline of the guest call in progress; host time counts toward it.
#[derive(Debug, Default)]
pub struct Deadline {
    at: Option<(Instant, Duration)>,
}

impl Deadline {
    pub fn start(&mut self, limit: Duration) {
        self.at = Some((Instant::now() + limit, limit));
    }

    /// The call's limit, once the call is past it.
    pub fn passed(&self) -> Option<Duration> {
        match self.at {
            Some((at, limit)) if Instant::now() > at => Some(limit),
            _ => None,
        }
    }
}

/// Everything a guest's calls can reach.
pub struct GuestState {
    pub host: HostContext,
    pub params: Params,
    pub limits: MemoryCap,
    /// The deadline of the call in progress, which host functions check.
    pub deadline: Deadline,
    pub stderr: MemoryOutputPipe,
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl GuestState {
    /// A closed WASI context: no environment, arguments, stdin, network or sockets; stdout
    /// discarded; stderr captured; a fixed clock; randomness from the run's seed; the
    /// scenario's readable files mounted read-only where `mount` says (see
    /// [`crate::workloads::scenario::files`]).
    pub fn new(
        host: HostContext,
        params: Params,
        memory_bytes: usize,
        mount: Option<(&Path, &str)>,
    ) -> wasmtime::Result<GuestState> {
        let seed = params.seed();
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        let mut b = WasiCtxBuilder::new();
        b.stderr(stderr.clone())
            .allow_blocking_current_thread(true)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .wall_clock(FixedClock::default())
            .monotonic_clock(FixedClock::default())
            .secure_random(Deterministic::new(seeded_bytes(seed ^ 0x5EC0_5EC0)))
            .insecure_random(Deterministic::new(seeded_bytes(seed ^ 0x1A5E_C0DE)))
            .insecure_random_seed(u128::from(seed));
        if let Some((dir, at)) = mount {
            b.preopened_dir(dir, at, FsPerms::ReadOnly)?;
        }
        Ok(GuestState {
            host,
            params,
            limits: MemoryCap::new(memory_bytes),
            deadline: Deadline::default(),
            stderr,
            wasi: b.build(),
            table: ResourceTable::new(),
        })
    }
}

/// WASI's random streams (what a guest's std uses for hash keys) repeat a block drawn
/// from the run's seed. Workload randomness belongs to `host.random` and friends.
fn seeded_bytes(seed: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; 64 << 10];
    ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut bytes);
    bytes
}

/// The only clock a guest sees: it starts at zero (the Unix epoch for wall time) and
/// advances one microsecond each time it is read, so loops that wait on it end, and do
/// so identically on every run.
#[derive(Default)]
struct FixedClock {
    reads: AtomicU64,
}

impl FixedClock {
    fn tick(&self) -> u64 {
        self.reads.fetch_add(1, Ordering::Relaxed) * 1_000
    }
}

impl HostWallClock for FixedClock {
    fn resolution(&self) -> Duration {
        Duration::from_micros(1)
    }
    fn now(&self) -> Duration {
        Duration::from_nanos(self.tick())
    }
}

impl HostMonotonicClock for FixedClock {
    fn resolution(&self) -> u64 {
        1_000
    }
    fn now(&self) -> u64 {
        self.tick()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::{Instance, Module, Store};

    fn leb(mut v: u32, out: &mut Vec<u8>) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    /// A core module with a memory of each size in `memories` (64 KiB pages) and a
    /// funcref table of `table` elements, written out byte by byte (this build has no
    /// WAT parser): magic and version, the table section (4), the memory section (5).
    fn module(memories: &[u32], table: u32) -> Vec<u8> {
        let mut m = b"\0asm\x01\0\0\0".to_vec();
        let mut tables = vec![1u8, 0x70, 0];
        leb(table, &mut tables);
        let mut mems = vec![memories.len() as u8];
        for &pages in memories {
            mems.push(0);
            leb(pages, &mut mems);
        }
        for (id, body) in [(4u8, tables), (5, mems)] {
            m.push(id);
            m.push(body.len() as u8);
            m.extend(body);
        }
        m
    }

    /// Instantiates `bytes` under a 1 GiB cap: whether it worked, and whether the cap
    /// says it was hit.
    fn instantiate(bytes: &[u8]) -> (bool, bool) {
        let engine = engine().unwrap();
        let module = Module::new(&engine, bytes).unwrap();
        let mut store = Store::new(&engine, MemoryCap::new(1 << 30));
        store.limiter(|cap| cap);
        let ok = Instance::new(&mut store, &module, &[]).is_ok();
        (ok, store.data().hit)
    }

    const MIB_PAGES: u32 = 16; // 64 KiB pages per MiB

    #[test]
    fn the_cap_is_on_all_memories_and_tables_together() {
        // Each memory alone is under the 1 GiB cap; together they are over it.
        assert_eq!(instantiate(&module(&[600 * MIB_PAGES], 0)), (true, false));
        assert_eq!(
            instantiate(&module(&[600 * MIB_PAGES, 600 * MIB_PAGES], 0)),
            (false, true)
        );
        assert_eq!(
            instantiate(&module(&[250 * MIB_PAGES, 250 * MIB_PAGES], 0)),
            (true, false)
        );
        // A table's elements count too: 600 MiB of memory plus 64 Mi elements (512 MiB).
        assert_eq!(
            instantiate(&module(&[600 * MIB_PAGES], 64 << 20)),
            (false, true)
        );
    }

    #[test]
    fn a_failed_growth_is_given_back() {
        let mut cap = MemoryCap::new(100);
        assert!(cap.memory_growing(0, 60, None).unwrap());
        cap.memory_grow_failed(wasmtime::Error::msg("no")).unwrap();
        assert!(cap.memory_growing(0, 90, None).unwrap());
        assert!(cap.memory_growing(0, 20, None).is_err());
        assert!(cap.hit);
    }
}
