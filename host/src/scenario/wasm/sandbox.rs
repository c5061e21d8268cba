//! The sandbox a component runs in: a wasmtime engine with epoch interruption, a store
//! whose memory is capped, and a WASI context with nothing open but a read-only view of
//! the scenario's own directory. Clocks and randomness are deterministic, so a component
//! cannot make a run depend on when or where it ran.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wasmtime::component::ResourceTable;
use wasmtime::{Config, Engine, ResourceLimiter};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::random::Deterministic;
use wasmtime_wasi::{
    FsPerms, HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView,
};

use crate::scenario::params::Params;
use crate::scenario::HostContext;

/// How often the engine's epoch advances; call deadlines are counted in these ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Where the scenario's own directory appears inside the sandbox (read-only).
pub const PACKAGE_MOUNT: &str = "/scenario";

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

/// Caps a guest's linear memory and remembers that the cap was hit, so the error can
/// say so instead of quoting whatever trap followed.
pub struct MemoryCap {
    pub max_bytes: usize,
    pub hit: bool,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.hit = true;
            return Err(wasmtime::Error::msg(format!(
                "the scenario tried to grow its memory to {} MiB, past its {} MiB cap",
                desired >> 20,
                self.max_bytes >> 20
            )));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// Everything a guest's calls can reach.
pub struct GuestState {
    pub host: HostContext,
    pub params: Params,
    pub limits: MemoryCap,
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
    /// scenario's directory mounted read-only at [`PACKAGE_MOUNT`] when there is one.
    pub fn new(
        host: HostContext,
        params: Params,
        memory_bytes: usize,
        package_dir: Option<&Path>,
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
        if let Some(dir) = package_dir {
            b.preopened_dir(dir, PACKAGE_MOUNT, FsPerms::ReadOnly)?;
        }
        Ok(GuestState {
            host,
            params,
            limits: MemoryCap {
                max_bytes: memory_bytes,
                hit: false,
            },
            stderr,
            wasi: b.build(),
            table: ResourceTable::new(),
        })
    }

    /// The last lines the guest wrote to stderr (a panic message), if any.
    pub fn stderr_tail(&self) -> Option<String> {
        let text = String::from_utf8_lossy(&self.stderr.contents()).into_owned();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        if lines.is_empty() {
            return None;
        }
        let start = lines.len().saturating_sub(3);
        Some(lines[start..].join(" / "))
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
