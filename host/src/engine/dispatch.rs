//! The dispatcher of one phase: sends each planned request on time (or when a
//! concurrency slot frees), runs it in its own task, and drains the phase at its end.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use super::record_builder::builders;
use super::{Collect, EngineConfig, EngineError, FromScenario, Live, Planned, Signals, StopReason};
use crate::client::{Client, Exchange};
use crate::clock::Clock;
use crate::metrics::record::{Chunk, ErrorKind, Reach, RequestRecord};
use crate::scenario::{Outcome, PhaseSpec};
use crate::tokenizer::Tokenizer;

/// Waits at least this long end with [`STAY_AWAKE`] on the CPU.
const LONG_WAIT: Duration = Duration::from_millis(3);
/// How long before a send time the dispatcher stops sleeping after a long wait.
const STAY_AWAKE: Duration = Duration::from_millis(1);

/// When to wake for a send at `at`. After an idle gap the worker thread and its virtual
/// CPU are asleep, and waking them takes milliseconds on a VM (measured: trace replay's
/// p99 send lateness was 3 ms with 8-28 ms gaps), so a long wait wakes [`STAY_AWAKE`]
/// early and yields until the send time. Short waits (high rates) sleep to the send time:
/// there the worker is busy anyway, and yielding through every gap would cost a core.
fn stay_awake_from(now: Instant, at: Instant) -> Instant {
    if at.duration_since(now) >= LONG_WAIT {
        at - STAY_AWAKE
    } else {
        at
    }
}

/// When a request scheduled `offset` seconds into the phase is due.
#[derive(Debug, PartialEq)]
enum SendTime {
    At(Instant),
    /// So far ahead (1e300 s) that no clock reaches it: the request waits for the phase to
    /// be stopped.
    Never,
}

fn send_time(phase_start: Instant, offset: f64) -> SendTime {
    Duration::try_from_secs_f64(offset.max(0.0))
        .ok()
        .and_then(|d| phase_start.checked_add(d))
        .map_or(SendTime::Never, SendTime::At)
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn dispatch_phase(
    phase: usize,
    spec: &PhaseSpec,
    phase_start: Instant,
    req_rx: &mut mpsc::Receiver<FromScenario>,
    client: &Client,
    tokenizer: &Arc<Tokenizer>,
    config: &EngineConfig,
    rec_tx: &mpsc::UnboundedSender<Collect>,
    live: &Arc<Mutex<Live>>,
    digest: &mut Sha256,
    signals: &mut Signals,
    wants_responses: bool,
) -> Result<(StopReason, u64, Duration), EngineError> {
    let slots = spec
        .concurrency_limit()
        .map(|n| Arc::new(Semaphore::new(n.min(Semaphore::MAX_PERMITS as u64) as usize)));
    let deadline = spec
        .max_duration
        .and_then(|d| phase_start.checked_add(d))
        .map(tokio::time::Instant::from_std);
    let (cancel_tx, cancel_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let far = tokio::time::Instant::now() + Duration::from_secs(86400 * 365);
    let until_deadline = async { tokio::time::sleep_until(deadline.unwrap_or(far)).await };
    tokio::pin!(until_deadline);
    let mut released_at = phase_start;
    // tokio's timer wheel rounds deadlines up to whole milliseconds, which would show as
    // 0-2 ms of send lateness on every scheduled request; this clock thread wakes the
    // dispatcher within tens of microseconds, without spinning.
    let clock = Clock::start();
    let timer = clock.handle();

    let stop = loop {
        let msg = tokio::select! {
            biased;
            r = signals.stopped() => break r,
            _ = &mut until_deadline => break StopReason::MaxDuration,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            m = req_rx.recv() => m,
        };
        let planned = match msg {
            None => return Err(EngineError::ScenarioThread),
            Some(FromScenario::Failed(e)) => return Err(e.into()),
            Some(FromScenario::Exhausted) => break StopReason::Exhausted,
            // A phase answer comes only between phases; neither follows a phase's requests.
            Some(FromScenario::Closed | FromScenario::NextPhase(_)) => break StopReason::Exhausted,
            Some(FromScenario::Request(p)) => p,
        };
        // Open loop: wait for the send time, or for whatever stops the phase first.
        let ideal = match planned.offset.map(|o| send_time(phase_start, o)) {
            None => None,
            Some(SendTime::At(at)) => {
                let now = Instant::now();
                if at > now {
                    let wake = stay_awake_from(now, at);
                    tokio::select! {
                        biased;
                        r = signals.stopped() => break r,
                        _ = &mut until_deadline => break StopReason::MaxDuration,
                        _ = timer.sleep_until(tokio::time::Instant::from_std(wake)) => {}
                    }
                    // The last stretch of a long wait is spent on the CPU: see
                    // `stay_awake_from`.
                    while Instant::now() < at {
                        tokio::task::yield_now().await;
                    }
                }
                Some(at)
            }
            // Beyond any clock: only a stop ends the wait.
            Some(SendTime::Never) => tokio::select! {
                biased;
                r = signals.stopped() => break r,
                _ = &mut until_deadline => break StopReason::MaxDuration,
            },
        };
        // Lateness measures the client only. Under a concurrency cap a request cannot leave
        // before a slot frees, and, requests leaving in order, not before the one ahead
        // of it got its slot: its schedule moves to the last moment the cap released the
        // dispatcher.
        let permit: Option<OwnedSemaphorePermit> = match &slots {
            None => None,
            Some(sem) => match sem.clone().try_acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => {
                    let p = tokio::select! {
                        biased;
                        r = signals.stopped() => break r,
                        _ = &mut until_deadline => break StopReason::MaxDuration,
                        p = sem.clone().acquire_owned() => p,
                    };
                    released_at = Instant::now();
                    p.ok()
                }
            },
        };
        let scheduled = ideal.unwrap_or_else(Instant::now).max(released_at);
        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            break StopReason::MaxDuration;
        }
        digest.update((phase as u64).to_le_bytes());
        digest.update(planned.index.to_le_bytes());
        digest.update(
            planned
                .offset
                .map(|o| (o * 1e9).round() as i64)
                .unwrap_or(-1)
                .to_le_bytes(),
        );
        digest.update(planned.digest);
        live.lock().unwrap_or_else(|e| e.into_inner()).snapshot.sent += 1;

        let client = client.clone();
        let tokenizer = tokenizer.clone();
        let rec_tx = rec_tx.clone();
        let mut cancel = cancel_rx.clone();
        tasks.spawn(async move {
            let request_id = client.request_id(format_args!("{phase}-{}", planned.index));
            let sent = Instant::now();
            let exchange = client
                .execute(&planned.prepared, &request_id, &mut cancel)
                .await;
            drop(permit);
            // Counting tokens is CPU work on text of any size a server sends: done on the
            // record builders, never on the I/O threads that timestamp other streams'
            // chunks. The record is sent from there, so a drain that gives up waiting
            // loses none.
            builders()
                .run(move || {
                    let (record, outcome) = build_record(
                        phase,
                        &planned,
                        request_id,
                        phase_start,
                        scheduled,
                        sent,
                        exchange,
                        &tokenizer,
                        wants_responses,
                    );
                    let _ = rec_tx.send(Collect::Record(Box::new(record), outcome.map(Box::new)));
                })
                .await;
        });
    };

    // Drain. Requests of a phase that ran out of work are all part of it: wait for every
    // one (each is bounded by the request timeout). A phase stopped by time or by its stop
    // condition lets in-flight requests finish up to the drain limit, then cuts them.
    let drain = match stop {
        StopReason::Exhausted => None,
        // The run ends on an error (left in the queue for the phase's close): what is in
        // flight gets the short drain of an interrupt.
        StopReason::Interrupted | StopReason::ScenarioFailed => Some(config.interrupt_drain),
        StopReason::MaxDuration | StopReason::ScenarioStop | StopReason::MaxErrorRate { .. } => {
            Some(config.drain_timeout)
        }
    };
    let wait_all = async {
        loop {
            tokio::select! {
                biased;
                // An interrupt during the drain cuts what is left at once.
                _ = signals.interrupt.wait_for(|i| *i), if stop != StopReason::Interrupted => return false,
                r = tasks.join_next() => if r.is_none() { return true },
            }
        }
    };
    let drained = match drain {
        Some(limit) => tokio::time::timeout(limit, wait_all).await.unwrap_or(false),
        None => wait_all.await,
    };
    let mut cut = 0;
    if !drained {
        cut = tasks.len() as u64;
        let _ = cancel_tx.send(true);
        while tasks.join_next().await.is_some() {}
    }
    let stop = if !drained && stop != StopReason::Interrupted && *signals.interrupt.borrow() {
        StopReason::Interrupted
    } else {
        stop
    };
    Ok((stop, cut, phase_start.elapsed()))
}

/// Whether the request reached the server: an answer says yes; a refused connection on
/// the only attempt says no; anything else cannot be known from the client.
fn reach(ex: &Exchange) -> Reach {
    let refused = ex
        .error
        .as_ref()
        .is_some_and(|e| e.kind == ErrorKind::Connect);
    match (ex.status, refused && !ex.retried) {
        (Some(_), _) => Reach::Yes,
        (None, true) => Reach::No,
        (None, false) => Reach::Unknown,
    }
}

/// Tokens carried by each content chunk: from the server's cumulative usage when it
/// reports it on every chunk; one each when its final count equals the number of chunks;
/// else the tokenizer's count of each chunk's text. Never 0 for a chunk with content.
fn chunk_tokens<'a>(
    ex: &'a Exchange,
    usage_output: Option<u64>,
    text_tokens: u64,
    tokenizer: &'a Tokenizer,
) -> impl Iterator<Item = u32> + 'a {
    let continuous = !ex.chunks.is_empty() && ex.chunks.iter().all(|c| c.3.is_some());
    let ones = usage_output == Some(ex.chunks.len() as u64);
    // One chunk holds the whole text, already counted.
    let whole = ex.chunks.len() == 1;
    let mut previous = 0u64;
    ex.chunks.iter().map(move |&(_, a, b, cumulative)| {
        let n = if continuous {
            let now = cumulative.unwrap_or(previous);
            let n = now.saturating_sub(previous);
            previous = now;
            n
        } else if ones {
            1
        } else if whole {
            text_tokens
        } else {
            tokenizer.count(&ex.text[a..b]) as u64
        };
        n.clamp(1, u64::from(u32::MAX)) as u32
    })
}

#[allow(clippy::too_many_arguments)]
fn build_record(
    phase: usize,
    planned: &Planned,
    request_id: String,
    phase_start: Instant,
    scheduled: Instant,
    sent: Instant,
    ex: Exchange,
    tokenizer: &Tokenizer,
    wants_responses: bool,
) -> (RequestRecord, Option<Outcome>) {
    let ns = |t: Instant| t.saturating_duration_since(phase_start).as_nanos() as u64;
    let usage_output = ex.completion_tokens.filter(|&n| n > 0);
    let text_tokens = tokenizer.count(&ex.text) as u64;
    let chunks = chunk_tokens(&ex, usage_output, text_tokens, tokenizer)
        .zip(&ex.chunks)
        .map(|(tokens, c)| Chunk {
            t_ns: ns(c.0),
            tokens,
        })
        .collect();
    let reached = reach(&ex);
    let output_tokens = usage_output.unwrap_or(text_tokens);
    let input_tokens = ex
        .prompt_tokens
        .filter(|&n| n > 0)
        .unwrap_or(planned.input_tokens);
    let record = RequestRecord {
        phase,
        index: planned.index,
        tag: planned.tag.clone(),
        request_id,
        scheduled_ns: ns(scheduled),
        sent_ns: ns(sent),
        first_byte_ns: ex.first_byte.map(ns),
        chunks,
        end_ns: ns(ex.end),
        input_tokens,
        output_tokens: if ex.error.is_none() { output_tokens } else { 0 },
        usage_output_tokens: usage_output,
        text_tokens,
        warmup: planned.warmup,
        http_status: ex.status,
        error: ex.error,
        reached,
        retried: ex.retried,
        server_timings: ex.server_timings,
    };
    let outcome = wants_responses.then(|| Outcome {
        phase,
        index: planned.index,
        tag: planned.tag.clone(),
        session: planned.session.clone(),
        ok: record.succeeded(),
        error: record.error.as_ref().map(|e| e.message.clone()),
        text: ex.text,
        ttft_ms: record.ttft_ns().unwrap_or(0) as f64 / 1e6,
        e2el_ms: record.e2el_ns().unwrap_or(0) as f64 / 1e6,
        input_tokens: record.input_tokens,
        output_tokens: record.output_tokens,
    });
    (record, outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_times_beyond_the_clock_never_come() {
        let now = Instant::now();
        assert_eq!(
            send_time(now, 1.5),
            SendTime::At(now + Duration::from_millis(1500))
        );
        assert_eq!(send_time(now, -1.0), SendTime::At(now));
        for far in [1e300, f64::INFINITY, f64::MAX] {
            assert_eq!(send_time(now, far), SendTime::Never, "{far}");
        }
        // NaN is no time at all: sent at once rather than never (the schedule refuses it).
        assert_eq!(send_time(now, f64::NAN), SendTime::At(now));
    }

    #[test]
    fn only_long_waits_wake_early() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(stay_awake_from(now, now + ms(10)), now + ms(9));
        assert_eq!(stay_awake_from(now, now + ms(3)), now + ms(2));
        assert_eq!(stay_awake_from(now, now + ms(2)), now + ms(2));
    }
}
