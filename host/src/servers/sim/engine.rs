//! Turns a request into a timed stream of events, by the profile's timing model, and
//! keeps the engine's `/metrics` counters.

use crate::both_sides::clock;
use std::future::ready;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{self, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::batch::{Scheduler, Seq};
use super::event::{after, Event, Events};
use super::metrics::SimMetrics;
use super::prefix::{PrefixReset, PromptBlocks};
use super::profile::{BatchParams, SimConfig, Timing};
use super::router::Router;
use super::wake_lead::{Emitted, WakeLead};
use super::whatif::Replicas;
use crate::both_sides::timer::{Timer, TimerHandle};

/// A running server's engine: its timing model and its metrics.
pub struct Engine {
    model: Model,
    metrics: Arc<SimMetrics>,
}

/// The timing model.
enum Model {
    Fixed {
        ttft: Duration,
        itl: Duration,
        per_chunk: usize,
        clock: TimerHandle,
    },
    Zero {
        per_chunk: usize,
    },
    Batching {
        /// Hands each request to one of the replicas' schedulers.
        router: Router,
        /// One replica's KV capacity (a request must fit one).
        kv_tokens: usize,
        /// Empties each replica's prefix cache.
        prefix_resets: Vec<PrefixReset>,
        /// Times held-back (slow) requests.
        clock: TimerHandle,
        /// How late tokens reach their connections, for the schedulers' aim.
        wake: WakeLead,
    },
}

/// What runs beside the handlers: the scheduler tasks (one per replica) and the clock
/// thread. Dropping it (when the server stops) aborts the ones and joins the other.
pub struct Background {
    schedulers: Vec<JoinHandle<()>>,
    _clock: Option<Timer>,
}

impl Drop for Background {
    fn drop(&mut self) {
        for task in self.schedulers.drain(..) {
            task.abort();
        }
    }
}

impl Engine {
    /// Build the engine of `config`; the batching scheduler is spawned on the current runtime.
    pub fn start(config: &SimConfig) -> (Engine, Background) {
        // With replicas, the KV gauge is the use of their summed capacity.
        let kv_tokens = match &config.timing {
            Timing::Batching(params) => params.kv_tokens.saturating_mul(config.replicas.count),
            _ => 0,
        };
        let metrics = Arc::new(SimMetrics::new(&config.model, kv_tokens));
        let (model, background) = Engine::start_model(config, &metrics);
        (Engine { model, metrics }, background)
    }

    /// The engine's metrics, for `/metrics`.
    pub fn metrics(&self) -> Arc<SimMetrics> {
        self.metrics.clone()
    }

    fn start_model(config: &SimConfig, metrics: &Arc<SimMetrics>) -> (Model, Background) {
        let per_chunk = config.tokens_per_chunk.max(1);
        match &config.timing {
            Timing::Fixed { ttft, itl } => {
                let clock = Timer::start();
                let engine = Model::Fixed {
                    ttft: *ttft,
                    itl: *itl,
                    per_chunk,
                    clock: clock.handle(),
                };
                (
                    engine,
                    Background {
                        schedulers: Vec::new(),
                        _clock: Some(clock),
                    },
                )
            }
            Timing::Zero => (
                Model::Zero { per_chunk },
                Background {
                    schedulers: Vec::new(),
                    _clock: None,
                },
            ),
            Timing::Batching(params) => start_replicas(params, config.replicas, per_chunk, metrics),
        }
    }

    /// Empties the prefix cache before the next prompt is admitted (`POST
    /// /reset_prefix_cache`); the `fixed` and `zero` profiles have none to empty.
    pub fn reset_prefix_cache(&self) {
        if let Model::Batching { prefix_resets, .. } = &self.model {
            for reset in prefix_resets {
                reset.request();
            }
        }
    }

    /// Why a request can never be served, if it cannot: in the batching engine a request
    /// reserves prompt + max_tokens of KV cache, so one larger than the cache would wait forever.
    pub fn check(&self, prompt_tokens: usize, max_tokens: usize) -> Result<(), String> {
        let Model::Batching { kv_tokens, .. } = &self.model else {
            return Ok(());
        };
        let needed = prompt_tokens.saturating_add(max_tokens);
        if needed <= *kv_tokens {
            return Ok(());
        }
        Err(format!(
            "This request needs {needed} KV-cache tokens ({prompt_tokens} in the prompt, \
             {max_tokens} in the completion) but the simulated server holds only {kv_tokens}; \
             reduce the prompt or max_tokens."
        ))
    }

    /// Start generating; `None` when the engine has stopped. `delay` (a slow request) is
    /// added before the first token: in `fixed` every chunk shifts by it, in `zero` and
    /// `default` the request is held that long after arrival before it starts / is queued.
    /// `blocks` are the prompt's for the prefix cache (`default` only).
    pub fn submit(
        &self,
        arrived: Instant,
        delay: Duration,
        prompt_tokens: usize,
        max_tokens: usize,
        blocks: PromptBlocks,
    ) -> Option<Events> {
        if let Model::Batching {
            router,
            clock,
            wake,
            ..
        } = &self.model
        {
            return batching(
                (router, clock, wake),
                (arrived, delay),
                (prompt_tokens, max_tokens, blocks),
            );
        }
        let events = self.unbatched(arrived, delay, max_tokens)?;
        Some(counted(events, self.metrics.clone(), prompt_tokens))
    }

    /// The `fixed` and `zero` models' streams.
    fn unbatched(&self, arrived: Instant, delay: Duration, max_tokens: usize) -> Option<Events> {
        match &self.model {
            Model::Fixed {
                ttft,
                itl,
                per_chunk,
                clock,
            } => Some(fixed(Timetable {
                arrived,
                ttft: ttft.saturating_add(delay),
                itl: *itl,
                max_tokens,
                per_chunk: *per_chunk,
                clock: clock.clone(),
            })),
            Model::Zero { per_chunk } => {
                let events = zero(max_tokens, *per_chunk);
                if delay.is_zero() {
                    return Some(events);
                }
                let hold = clock::sleep_until(after(arrived, delay).into_std());
                Some(Box::pin(
                    stream::once(hold)
                        .filter_map(|()| ready(None))
                        .chain(events),
                ))
            }
            Model::Batching { .. } => None,
        }
    }
}

/// The batching engine's replicas, each its own scheduler task, behind one router.
fn start_replicas(
    params: &BatchParams,
    replicas: Replicas,
    per_chunk: usize,
    metrics: &Arc<SimMetrics>,
) -> (Model, Background) {
    let (clock, wake) = (Timer::start(), WakeLead::default());
    let (mut queues, mut prefix_resets, mut schedulers) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..replicas.count.max(1) {
        let (queue, incoming) = mpsc::unbounded_channel();
        let scheduler =
            Scheduler::new(params.clone(), per_chunk, metrics.clone()).with_wake_lead(wake.clone());
        prefix_resets.push(scheduler.prefix_reset());
        schedulers.push(tokio::spawn(scheduler.run(incoming, clock.handle())));
        queues.push(queue);
    }
    let engine = Model::Batching {
        router: Router::new(replicas.router, queues),
        kv_tokens: params.kv_tokens,
        prefix_resets,
        clock: clock.handle(),
        wake,
    };
    let background = Background {
        schedulers,
        _clock: Some(clock),
    };
    (engine, background)
}

/// A request of the `default` model: queued in the scheduler now, or once held `delay`.
/// Each of its tokens, as its connection takes it, tells `wake` how late it came.
fn batching(
    (router, clock, wake): (&Router, &TimerHandle, &WakeLead),
    (arrived, delay): (Instant, Duration),
    (prompt_tokens, max_tokens, blocks): (usize, usize, PromptBlocks),
) -> Option<Events> {
    let (out, events) = mpsc::unbounded_channel::<Emitted>();
    let seq = Seq::new(prompt_tokens, max_tokens, out).with_prompt(arrived, blocks);
    let events = stream::unfold((events, wake.clone()), |(mut events, wake)| async move {
        let Emitted { event, aimed } = events.recv().await?;
        if let Some(aimed) = aimed {
            wake.observe(aimed, clock::tokio_now());
        }
        Some((event, (events, wake)))
    });
    if delay.is_zero() {
        router.route(seq)?;
        return Some(Box::pin(events));
    }
    if router.is_closed() {
        return None;
    }
    // Queued (and routed) once held long enough, when the body is first polled (a client
    // gone before then never reaches the scheduler).
    let (router, clock) = (router.clone(), clock.clone());
    let at = after(arrived, delay);
    let seq = seq.held_until(at);
    let join = stream::once(async move {
        clock.sleep_until(at).await;
        // A stopped engine drops `seq` and its sender, which ends `events`.
        let _ = router.route(seq);
    })
    .filter_map(|()| ready(None));
    Some(Box::pin(join.chain(events)))
}

/// Counts a `fixed` or `zero` request as running from now until its stream is dropped,
/// and its tokens as each chunk passes.
fn counted(events: Events, metrics: Arc<SimMetrics>, prompt_tokens: usize) -> Events {
    metrics.update(|c| {
        c.running += 1;
        c.prompt_tokens += prompt_tokens as u64;
    });
    let guard = Running { metrics };
    Box::pin(events.map(move |event| {
        if let Event::Tokens(n) = event {
            guard.metrics.generated(n);
        }
        event
    }))
}

/// Holds one request in the running gauge while alive.
struct Running {
    metrics: Arc<SimMetrics>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.metrics
            .update(|c| c.running = c.running.saturating_sub(1));
    }
}

/// The chunk timetable of one request in the `fixed` profile.
struct Timetable {
    arrived: Instant,
    ttft: Duration,
    itl: Duration,
    max_tokens: usize,
    per_chunk: usize,
    clock: TimerHandle,
}

/// Chunk `i` at exactly `arrived + ttft + i × itl`: absolute deadlines, so timer lateness
/// never accumulates along a stream.
fn fixed(table: Timetable) -> Events {
    let chunks = stream::unfold((table, 0usize), |(table, sent)| async move {
        if sent >= table.max_tokens {
            return None;
        }
        let index = u32::try_from(sent / table.per_chunk).unwrap_or(u32::MAX);
        let offset = table.ttft.saturating_add(table.itl.saturating_mul(index));
        table.clock.sleep_until(after(table.arrived, offset)).await;
        let n = table.per_chunk.min(table.max_tokens - sent);
        Some((Event::Tokens(n), (table, sent + n)))
    });
    Box::pin(stream::once(ready(Event::Admitted { cached: None })).chain(chunks))
}

/// Every chunk at once; yielding between chunks makes each its own write, as a real server's.
fn zero(max_tokens: usize, per_chunk: usize) -> Events {
    let chunks = stream::unfold(0usize, move |sent| async move {
        if sent >= max_tokens {
            return None;
        }
        tokio::task::yield_now().await;
        let n = per_chunk.min(max_tokens - sent);
        Some((Event::Tokens(n), sent + n))
    });
    Box::pin(stream::once(ready(Event::Admitted { cached: None })).chain(chunks))
}
