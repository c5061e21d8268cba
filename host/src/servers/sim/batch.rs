//! The `default` profile: a continuous-batching engine in the manner of vLLM's scheduler.
//!
//! One task runs engine steps back to back. Each step admits waiting requests in FIFO
//! order while there is a sequence slot and KV room for prompt + max_tokens, spends the
//! step's token budget on one decode token per decoding sequence and the rest on chunked
//! prefill (FIFO), sleeps the step's simulated GPU time, then emits one token for every
//! sequence that decoded or finished its prefill in that step. A request admitted skips
//! the prefill of its prompt's leading blocks found in the prefix cache (`prefix`), and
//! every step leaves its state in the `/metrics` counters (`metrics`). With a draft model
//! (`spec_decode`) each decode step yields 1 + the accepted draft tokens.

use crate::both_sides::clock;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::event::{after, Event};
use super::metrics::SimMetrics;
use super::prefix::{PrefixCache, PrefixReset, PromptBlocks, BLOCK_TOKENS};
use super::profile::BatchParams;
use super::spec_decode::{Drafter, Drafts, Tally};
use super::wake_lead::{Emitted, WakeLead};
use crate::both_sides::timer::TimerHandle;

/// When the scheduler falls this far behind its simulated clock (CPU starvation), it
/// restarts the clock at now instead of running a burst of zero-length steps to catch up.
const MAX_LAG: Duration = Duration::from_millis(20);

/// One request inside the engine.
pub struct Seq {
    prompt: usize,
    max_tokens: usize,
    prefilled: usize,
    generated: usize,
    /// Tokens generated but not yet sent (tokens_per_chunk > 1).
    unsent: usize,
    /// Whether this step yields a token for it (a decode, or the end of its prefill).
    emits: bool,
    out: mpsc::UnboundedSender<Emitted>,
    /// When the request reached the engine (its queue time and TTFT count from here).
    arrived: Instant,
    /// When it may enter a step: its arrival, or the end of a slow request's hold.
    enters: Instant,
    /// Its prompt's block hashes, for the prefix cache.
    blocks: PromptBlocks,
    /// Its draft model's acceptance stream (`--sim-spec-decode`).
    drafts: Option<Drafts>,
    /// Tokens the current step yields for it (`count_step`).
    step_tokens: usize,
    /// Its replica's load count (`router`), held until the engine drops it.
    _in_flight: Option<InFlight>,
}

/// One request in a replica's load (`router`'s least-loaded choice): counted from when it
/// is routed until the scheduler drops it (finished, cancelled, or the engine stopped).
pub struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    pub fn new(load: Arc<AtomicUsize>) -> InFlight {
        load.fetch_add(1, Ordering::Relaxed);
        InFlight(load)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Seq {
    pub fn new(prompt: usize, max_tokens: usize, out: mpsc::UnboundedSender<Emitted>) -> Seq {
        let now = clock::tokio_now();
        Seq {
            prompt,
            max_tokens,
            prefilled: 0,
            generated: 0,
            unsent: 0,
            emits: false,
            out,
            arrived: now,
            enters: now,
            blocks: PromptBlocks::default(),
            drafts: None,
            step_tokens: 1,
            _in_flight: None,
        }
    }

    /// The same request, counted in a replica's load while it lives.
    pub fn counted_in(mut self, in_flight: InFlight) -> Seq {
        self._in_flight = Some(in_flight);
        self
    }

    /// The same request, arrived at `arrived`, with its prompt's block hashes.
    pub fn with_prompt(mut self, arrived: Instant, blocks: PromptBlocks) -> Seq {
        self.arrived = arrived;
        self.enters = arrived;
        self.blocks = blocks;
        self
    }

    /// The same request, held back until `until` (a slow request) before it may enter a step.
    pub fn held_until(mut self, until: Instant) -> Seq {
        self.enters = until;
        self
    }

    /// KV-cache tokens reserved for the whole life of the sequence.
    fn kv(&self) -> usize {
        self.prompt.saturating_add(self.max_tokens)
    }

    fn decoding(&self) -> bool {
        self.prefilled >= self.prompt
    }
}

/// One engine step as laid out so far.
struct Step {
    /// On the simulated clock.
    start: Instant,
    decoding: usize,
    prefill: usize,
    /// Tokens left for prefill.
    budget: usize,
    /// The running sequences (from the front) that have their part of it.
    laid_out: usize,
}

impl Step {
    /// Its simulated GPU time.
    fn duration(&self, params: &BatchParams) -> Duration {
        params.step_time(self.decoding, self.prefill)
    }
}

pub struct Scheduler {
    params: BatchParams,
    per_chunk: usize,
    waiting: VecDeque<Seq>,
    running: Vec<Seq>,
    kv_used: usize,
    prefix: PrefixCache,
    metrics: Arc<SimMetrics>,
    drafter: Option<Drafter>,
    /// (running, waiting, KV used) as last added to the shared gauges: with replicas,
    /// each scheduler adds its change, so `/metrics` shows the sum over the replicas.
    published: (usize, usize, usize),
    /// How early to wake before a step's deadline, from the recent tokens' lateness.
    wake: WakeLead,
    /// What this step's wake-up was aimed at (or when the task went to sleep, if later).
    aimed: Option<Instant>,
    /// The end of the last step on the simulated clock (an early wake-up can leave the
    /// engine idle before it).
    last_end: Option<Instant>,
}

impl Scheduler {
    pub fn new(params: BatchParams, per_chunk: usize, metrics: Arc<SimMetrics>) -> Scheduler {
        Scheduler {
            // The prefix cache lives in the KV cache's blocks.
            prefix: PrefixCache::new(params.kv_tokens / BLOCK_TOKENS),
            drafter: params
                .spec_decode
                .clone()
                .map(|m| Drafter::new(m, &metrics.spec)),
            params,
            per_chunk: per_chunk.max(1),
            waiting: VecDeque::new(),
            running: Vec::new(),
            kv_used: 0,
            metrics,
            published: (0, 0, 0),
            wake: WakeLead::default(),
            aimed: None,
            last_end: None,
        }
    }

    /// Aims by `wake`, the lead its engine's streams measure (`engine.rs`).
    pub fn with_wake_lead(mut self, wake: WakeLead) -> Scheduler {
        self.wake = wake;
        self
    }

    /// What empties the prefix cache from the HTTP side (`POST /reset_prefix_cache`).
    pub fn prefix_reset(&self) -> PrefixReset {
        self.prefix.reset_handle()
    }

    /// Leaves the engine's state in the `/metrics` gauges (its change since the last time,
    /// so the gauges of several replicas add up).
    fn publish(&mut self) {
        let now = (self.running.len(), self.waiting.len(), self.kv_used);
        let was = std::mem::replace(&mut self.published, now);
        let moved = |gauge: usize, was: usize, now: usize| (gauge + now).saturating_sub(was);
        self.metrics.update(|c| {
            c.running = moved(c.running, was.0, now.0);
            c.waiting = moved(c.waiting, was.1, now.1);
            c.kv_used = moved(c.kv_used, was.2, now.2);
        });
    }

    /// Run steps until every sender of `incoming` is gone; waits without spinning when idle.
    pub async fn run(mut self, mut incoming: mpsc::UnboundedReceiver<Seq>, clock: TimerHandle) {
        // Start of the next step on the simulated clock; None after an idle period.
        let mut next_start: Option<Instant> = None;
        loop {
            while let Ok(seq) = incoming.try_recv() {
                self.waiting.push_back(seq);
            }
            self.drop_cancelled();
            if self.running.is_empty() && self.waiting.is_empty() {
                self.publish();
                match incoming.recv().await {
                    Some(seq) => self.waiting.push_back(seq),
                    None => return,
                }
                next_start = None;
                continue;
            }
            let start = self.step_start(next_start, clock::tokio_now());
            self.admit(|entered| entered <= start);
            self.publish();
            let mut step = self.plan(start);
            let deadline = self.await_step(&mut step, &mut incoming, &clock).await;
            if deadline == start {
                // Zero-cost steps would otherwise never give the connections a turn.
                tokio::task::yield_now().await;
            }
            self.complete();
            (next_start, self.last_end) = (Some(deadline), Some(deadline));
        }
    }

    /// When the next step starts on the simulated clock. Steps chain on absolute
    /// deadlines, so timer lateness does not accumulate (a chained start can lie ahead
    /// of `now`: the last wake-up was aimed early, `wake_lead.rs`); from idle, a step
    /// starts when the request that woke the engine arrived, not when this task got it
    /// (the HTTP side's parsing is the simulator's own time; a twin's prefill cost
    /// already holds the real server's), and not before the last step's end. `now` when
    /// the task has fallen `MAX_LAG` behind.
    fn step_start(&self, chained: Option<Instant>, now: Instant) -> Instant {
        let from = chained.or_else(|| {
            let arrived = self.waiting.front()?.enters.min(now);
            Some(self.last_end.map_or(arrived, |end| arrived.max(end)))
        });
        match from {
            Some(t) if now.saturating_duration_since(t) <= MAX_LAG => t,
            _ => now,
        }
    }

    /// Sleeps until `step`'s deadline (aimed early by the recent tokens' lateness,
    /// `wake_lead.rs`) and returns it. A request that arrived before the
    /// step began but reached this task during it (the HTTP side was still reading it)
    /// joins the step, as it would have on the engine simulated; the deadline moves by
    /// its prefill.
    async fn await_step(
        &mut self,
        step: &mut Step,
        incoming: &mut mpsc::UnboundedReceiver<Seq>,
        clock: &TimerHandle,
    ) -> Instant {
        loop {
            let deadline = after(step.start, step.duration(&self.params));
            let aim = self.wake.aim(deadline);
            // An aim already past (a step shorter than the lead) returns at once; the
            // tokens' lateness then counts from now.
            self.aimed = Some(aim.max(clock::tokio_now()));
            tokio::select! {
                biased;
                () = clock.sleep_until(aim) => return deadline,
                seq = incoming.recv() => match seq {
                    Some(seq) => {
                        self.waiting.push_back(seq);
                        self.join_late(step);
                    }
                    None => {
                        clock.sleep_until(deadline).await;
                        return deadline;
                    }
                },
            }
        }
    }

    /// Admits the waiting requests that arrived before `step` began (FIFO, while slots
    /// and KV allow) into it.
    fn join_late(&mut self, step: &mut Step) {
        let before = self.running.len();
        self.admit(|entered| entered < step.start);
        if self.running.len() == before {
            return;
        }
        let decoding = self.running[before..]
            .iter()
            .filter(|s| s.decoding())
            .count();
        step.decoding += decoding;
        step.budget = step
            .budget
            .saturating_sub(decoding.saturating_mul(self.per_decode()));
        self.lay_out(step);
        self.publish();
    }

    /// Free the slots and KV of requests whose client went away.
    fn drop_cancelled(&mut self) {
        let mut freed = 0;
        self.running.retain(|s| {
            let keep = !s.out.is_closed();
            if !keep {
                freed += s.kv();
            }
            keep
        });
        self.kv_used = self.kv_used.saturating_sub(freed);
        self.waiting.retain(|s| !s.out.is_closed());
    }

    /// Admit from the head of the queue while a slot and KV room are free and the head
    /// had `entered` (strict FIFO: a large request at the head holds back the ones behind
    /// it, as in vLLM).
    fn admit(&mut self, entered: impl Fn(Instant) -> bool) {
        while let Some(head) = self.waiting.front() {
            if !entered(head.enters) {
                return;
            }
            if head.kv() > self.params.kv_tokens {
                // Rejected with 400 before it gets here; drop defensively so it cannot block.
                self.waiting.pop_front();
                continue;
            }
            if self.running.len() >= self.params.max_seqs
                || self.kv_used.saturating_add(head.kv()) > self.params.kv_tokens
            {
                return;
            }
            let Some(mut seq) = self.waiting.pop_front() else {
                return;
            };
            // The prefix cache is looked up as the engine takes the request; a client
            // gone by then has still cost the lookup, as on vLLM.
            let cached = self.use_prefix_cache(&mut seq);
            let admitted = Event::Admitted {
                cached: Some(cached),
            };
            let admitted = Emitted {
                event: admitted,
                aimed: None,
            };
            if seq.out.send(admitted).is_ok() {
                self.kv_used += seq.kv();
                seq.drafts = self.drafter.as_mut().map(Drafter::stream);
                self.running.push(seq);
            }
        }
    }

    /// Skips the prefill of the prompt's cached leading blocks (at least its last token is
    /// computed, as in vLLM, to sample the first output token); the prompt tokens found
    /// in cache.
    fn use_prefix_cache(&mut self, seq: &mut Seq) -> usize {
        let blocks = self.prefix.admit(&seq.blocks);
        let cached = seq.blocks.covered(blocks, seq.prompt);
        seq.prefilled = cached.min(seq.prompt.saturating_sub(1));
        let (prompt, queued) = (seq.prompt as u64, clock::since(seq.arrived.into_std()));
        self.metrics.update(|c| {
            c.prefix_queries += prompt;
            c.prefix_hits += cached as u64;
            c.prompt_tokens += prompt;
        });
        self.metrics.admitted(queued);
        cached
    }

    /// Lay out one step starting at `start`.
    fn plan(&mut self, start: Instant) -> Step {
        let decoding = self.running.iter().filter(|s| s.decoding()).count();
        let budget = self
            .params
            .max_batched_tokens
            .saturating_sub(decoding.saturating_mul(self.per_decode()));
        let mut step = Step {
            start,
            decoding,
            prefill: 0,
            budget,
            laid_out: 0,
        };
        self.lay_out(&mut step);
        step
    }

    /// Tokens of the step's budget a decoding sequence takes: its draft tokens are
    /// verified in the step too, when there is a draft model.
    fn per_decode(&self) -> usize {
        1 + self.drafter.as_ref().map_or(0, Drafter::k)
    }

    /// Gives the running sequences not yet in `step` their part of it: a decode token
    /// each, or chunked prefill from the budget left (FIFO).
    fn lay_out(&mut self, step: &mut Step) {
        for s in &mut self.running[step.laid_out..] {
            if s.decoding() {
                s.emits = true;
                continue;
            }
            let take = (s.prompt - s.prefilled).min(step.budget);
            s.prefilled += take;
            step.budget -= take;
            step.prefill += take;
            // The step that finishes a prefill also samples the first token.
            s.emits = s.decoding();
        }
        step.laid_out = self.running.len();
    }

    /// The tokens each emitting sequence gets from this step, counted in `/metrics`
    /// before any is sent, so a scrape taken once a client has its tokens counts them and
    /// their drafts. The step that ends a prefill samples one token and drafts nothing; a
    /// decode step verifies a draft when there is a draft model.
    fn count_step(&mut self) {
        let (mut generated, mut drafted) = (0, Tally::default());
        for s in self.running.iter_mut().filter(|s| s.emits) {
            let n = match s.drafts.as_mut() {
                Some(drafts) if s.generated > 0 => drafts.step(&mut drafted),
                _ => 1,
            };
            s.step_tokens = n.min(s.max_tokens.saturating_sub(s.generated).max(1));
            generated += s.step_tokens;
        }
        self.metrics.generated(generated);
        self.metrics.spec.add(&drafted);
    }

    /// Deliver the step's tokens and retire finished sequences.
    fn complete(&mut self) {
        self.count_step();
        let (per_chunk, aimed) = (self.per_chunk, self.aimed);
        let metrics = &self.metrics;
        let mut freed = 0;
        self.running.retain_mut(|s| {
            if !s.emits {
                return true;
            }
            s.emits = false;
            let first = s.generated == 0;
            s.generated += s.step_tokens;
            s.unsent += s.step_tokens;
            if first {
                metrics.first_token(clock::since(s.arrived.into_std()));
            }
            let done = s.generated >= s.max_tokens;
            if s.unsent >= per_chunk || done {
                let tokens = Emitted {
                    event: Event::Tokens(s.unsent),
                    aimed,
                };
                let sent = s.out.send(tokens).is_ok();
                s.unsent = 0;
                if !sent {
                    freed += s.kv();
                    return false;
                }
            }
            if done {
                freed += s.kv();
                metrics.finished(clock::since(s.arrived.into_std()));
            }
            !done
        });
        self.kv_used = self.kv_used.saturating_sub(freed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(max_seqs: usize, budget: usize, kv: usize) -> BatchParams {
        BatchParams {
            max_seqs,
            max_batched_tokens: budget,
            kv_tokens: kv,
            ..BatchParams::default()
        }
    }

    fn scheduler(p: BatchParams, per_chunk: usize) -> Scheduler {
        let metrics = Arc::new(SimMetrics::new("m", p.kv_tokens));
        Scheduler::new(p, per_chunk, metrics)
    }

    fn seq(s: &mut Scheduler, prompt: usize, max: usize) -> mpsc::UnboundedReceiver<Emitted> {
        let (tx, rx) = mpsc::unbounded_channel();
        s.waiting.push_back(Seq::new(prompt, max, tx));
        rx
    }

    fn drain(rx: &mut mpsc::UnboundedReceiver<Emitted>) -> Vec<Event> {
        std::iter::from_fn(|| rx.try_recv().ok().map(|e| e.event)).collect()
    }

    #[test]
    fn admission_respects_max_seqs_and_kv() {
        let mut s = scheduler(params(2, 8192, 1000), 1);
        let mut rxs: Vec<_> = (0..3).map(|_| seq(&mut s, 100, 100)).collect();
        s.admit(|_| true);
        assert_eq!((s.running.len(), s.waiting.len(), s.kv_used), (2, 1, 400));
        assert_eq!(
            drain(&mut rxs[0]),
            vec![Event::Admitted { cached: Some(0) }]
        );
        assert!(drain(&mut rxs[2]).is_empty());

        let mut s = scheduler(params(8, 8192, 500), 1);
        let _rxs: Vec<_> = (0..3).map(|_| seq(&mut s, 100, 100)).collect();
        s.admit(|_| true);
        assert_eq!(s.running.len(), 2, "a third would need 600 > 500 KV tokens");
    }

    #[test]
    fn prefill_is_chunked_by_the_token_budget() {
        let mut s = scheduler(params(4, 300, 100_000), 1);
        let mut a = seq(&mut s, 250, 2);
        let mut b = seq(&mut s, 250, 2);
        s.admit(|_| true);
        // Step 1: a prefills 250, b gets the remaining 50 tokens.
        assert_eq!(
            s.plan(Instant::now()).duration(&s.params),
            s.params.step_time(0, 300)
        );
        s.complete();
        assert_eq!(
            drain(&mut a),
            vec![Event::Admitted { cached: Some(0) }, Event::Tokens(1)]
        );
        assert_eq!(drain(&mut b), vec![Event::Admitted { cached: Some(0) }]);
        // Step 2: a decodes (1 token of budget), b prefills its last 200.
        assert_eq!(
            s.plan(Instant::now()).duration(&s.params),
            s.params.step_time(1, 200)
        );
        s.complete();
        assert_eq!(drain(&mut a), vec![Event::Tokens(1)]);
        assert_eq!(drain(&mut b), vec![Event::Tokens(1)]);
        // a finished and freed its slot and KV.
        assert_eq!((s.running.len(), s.kv_used), (1, 252));
        assert_eq!(
            s.plan(Instant::now()).duration(&s.params),
            s.params.step_time(1, 0)
        );
        s.complete();
        assert_eq!((s.running.len(), s.kv_used), (0, 0));
    }

    #[test]
    fn tokens_are_grouped_per_chunk() {
        let mut s = scheduler(params(4, 8192, 100_000), 3);
        let mut rx = seq(&mut s, 10, 7);
        s.admit(|_| true);
        for _ in 0..7 {
            s.plan(Instant::now());
            s.complete();
        }
        let events = drain(&mut rx);
        assert_eq!(
            events,
            vec![
                Event::Admitted { cached: Some(0) },
                Event::Tokens(3),
                Event::Tokens(3),
                Event::Tokens(1)
            ]
        );
        assert!(s.running.is_empty());
    }

    #[test]
    fn a_draft_model_yields_its_accepted_tokens_and_the_bonus_each_decode_step() {
        let always = super::super::spec_decode::parse("1,1").expect("a draft model");
        let p = BatchParams {
            spec_decode: Some(always),
            ..params(4, 8192, 100_000)
        };
        let mut s = scheduler(p, 1);
        let mut rx = seq(&mut s, 10, 6);
        s.admit(|_| true);
        for _ in 0..3 {
            s.plan(Instant::now());
            s.complete();
        }
        // The prefill step samples one token; each decode step 2 accepted + 1, the last
        // held to max_tokens.
        let events = drain(&mut rx);
        let want = [Event::Tokens(1), Event::Tokens(3), Event::Tokens(2)];
        assert_eq!(events[1..], want);
        assert!(s.running.is_empty());
        let text = s.metrics.render();
        assert!(
            text.contains("vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 2\n")
        );
        assert!(text.contains(
            "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 4\n"
        ));
        // Without the flag: no counters.
        let plain = scheduler(params(4, 8192, 100_000), 1);
        assert!(!plain.metrics.render().contains("spec_decode"));
    }

    #[test]
    fn replicas_sharing_the_metrics_show_their_sum() {
        let metrics = Arc::new(SimMetrics::new("m", 2000));
        let replica = || Scheduler::new(params(1, 8192, 1000), 1, metrics.clone());
        let (mut a, mut b) = (replica(), replica());
        let _rx = [
            seq(&mut a, 100, 100),
            seq(&mut a, 100, 100),
            seq(&mut b, 100, 100),
        ];
        for s in [&mut a, &mut b] {
            s.admit(|_| true);
            s.publish();
        }
        let gauge = |name: &str| {
            let text = metrics.render();
            let line = text
                .lines()
                .find(|l| l.starts_with(name))
                .map(str::to_string);
            line.and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        };
        // a: 1 running, 1 waiting; b: 1 running; 400 of 2000 KV tokens in use.
        assert_eq!(gauge("vllm:num_requests_running{"), Some(2.0));
        assert_eq!(gauge("vllm:num_requests_waiting{"), Some(1.0));
        assert_eq!(gauge("vllm:kv_cache_usage_perc{"), Some(0.2));
        b.running.clear();
        b.kv_used = 0;
        b.publish();
        assert_eq!(gauge("vllm:num_requests_running{"), Some(1.0));
        assert_eq!(gauge("vllm:kv_cache_usage_perc{"), Some(0.1));
    }

    #[test]
    fn cancelled_sequences_free_their_slot() {
        let mut s = scheduler(params(1, 8192, 100_000), 1);
        let a = seq(&mut s, 10, 1000);
        let _b = seq(&mut s, 10, 10);
        s.admit(|_| true);
        assert_eq!((s.running.len(), s.waiting.len()), (1, 1));
        drop(a);
        s.drop_cancelled();
        s.admit(|_| true);
        assert_eq!((s.running.len(), s.waiting.len(), s.kv_used), (1, 0, 20));
    }

    /// A request that arrived at `at` (the kernel's stamp the HTTP side passes on).
    fn seq_at(s: &mut Scheduler, prompt: usize, at: Instant) -> mpsc::UnboundedReceiver<Emitted> {
        let (tx, rx) = mpsc::unbounded_channel();
        let seq = Seq::new(prompt, 4, tx).with_prompt(at, PromptBlocks::default());
        s.waiting.push_back(seq);
        rx
    }

    #[test]
    fn a_request_that_arrived_before_its_step_began_joins_it_late() {
        let mut s = scheduler(params(4, 8192, 100_000), 1);
        let t0 = Instant::now();
        let start = t0 + Duration::from_millis(1);
        let mut a = seq_at(&mut s, 100, t0);
        s.admit(|entered| entered <= start);
        let mut step = s.plan(start);
        assert_eq!(step.duration(&s.params), s.params.step_time(0, 100));
        // Read by the HTTP side before the step began, handed over during it: it joins.
        let mut b = seq_at(&mut s, 200, t0 + Duration::from_micros(500));
        s.join_late(&mut step);
        assert_eq!(step.duration(&s.params), s.params.step_time(0, 300));
        // Arrived as the step began: the next step's.
        let mut c = seq_at(&mut s, 50, start);
        s.join_late(&mut step);
        assert_eq!(step.duration(&s.params), s.params.step_time(0, 300));
        assert_eq!((s.running.len(), s.waiting.len()), (2, 1));
        s.complete();
        let first = vec![Event::Admitted { cached: Some(0) }, Event::Tokens(1)];
        assert_eq!((drain(&mut a), drain(&mut b)), (first.clone(), first));
        assert!(drain(&mut c).is_empty());
    }

    #[test]
    fn a_step_from_idle_starts_when_its_request_arrived() {
        let mut s = scheduler(params(4, 8192, 100_000), 1);
        let now = Instant::now() + MAX_LAG * 2;
        let chained = now - Duration::from_millis(3);
        assert_eq!(s.step_start(Some(chained), now), chained);
        assert_eq!(s.step_start(None, now), now, "nothing waiting");
        let arrived = now - Duration::from_micros(300);
        let _a = seq_at(&mut s, 10, arrived);
        assert_eq!(s.step_start(None, now), arrived);
        // Fallen too far behind (a starved task): the clock restarts at now.
        assert_eq!(s.step_start(Some(now - MAX_LAG * 2), now), now);
        // The last step's wake-up came early: the next one starts at its deadline, ahead
        // of now, and so does a step from idle whose request came before that deadline.
        let ahead = now + Duration::from_micros(200);
        assert_eq!(s.step_start(Some(ahead), now), ahead);
        s.last_end = Some(ahead);
        assert_eq!(s.step_start(None, now), ahead);
        s.last_end = Some(arrived - Duration::from_millis(1));
        assert_eq!(s.step_start(None, now), arrived);
    }
}
