//! `--sim replicas=N,router=…`: N independent batching engines (each its own scheduler,
//! KV cache and prefix cache) behind the one endpoint, and the router that hands each
//! request to one of them: `round-robin` (in turn) or `least-loaded` (the replica with the
//! fewest requests routed to it and not finished, waiting or running; ties to the lowest
//! index, as vLLM production-stack's and Dynamo's load-aware routers break them).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;

use super::batch::{InFlight, Seq};
pub use super::whatif::RouterPolicy;

/// The replica `policy` picks for the `turn`-th request, given each replica's load.
pub fn choose(policy: RouterPolicy, turn: usize, loads: &[usize]) -> usize {
    match policy {
        RouterPolicy::RoundRobin => turn % loads.len().max(1),
        // `min_by_key` keeps the first of equal keys: ties go to the lowest index.
        RouterPolicy::LeastLoaded => loads
            .iter()
            .enumerate()
            .min_by_key(|(_, load)| **load)
            .map_or(0, |(i, _)| i),
    }
}

/// The engines' queues and loads; cloned into each request that is queued later (held back).
#[derive(Clone)]
pub struct Router {
    inner: Arc<Inner>,
}

struct Inner {
    policy: RouterPolicy,
    queues: Vec<mpsc::UnboundedSender<Seq>>,
    /// Requests routed to each replica and not yet dropped by its scheduler.
    loads: Vec<Arc<AtomicUsize>>,
    turn: AtomicUsize,
}

impl Router {
    pub fn new(policy: RouterPolicy, queues: Vec<mpsc::UnboundedSender<Seq>>) -> Router {
        let loads = queues.iter().map(|_| Arc::default()).collect();
        Router {
            inner: Arc::new(Inner {
                policy,
                queues,
                loads,
                turn: AtomicUsize::new(0),
            }),
        }
    }

    /// Hands `seq` to a replica; `None` when the engines have stopped.
    pub fn route(&self, seq: Seq) -> Option<()> {
        let inner = &self.inner;
        let turn = inner.turn.fetch_add(1, Ordering::Relaxed);
        let loads: Vec<usize> = inner
            .loads
            .iter()
            .map(|l| l.load(Ordering::Relaxed))
            .collect();
        let i = choose(inner.policy, turn, &loads);
        let seq = seq.counted_in(InFlight::new(inner.loads[i].clone()));
        inner.queues.get(i)?.send(seq).ok()
    }

    /// Whether the engines have stopped.
    pub fn is_closed(&self) -> bool {
        self.inner.queues.iter().all(|q| q.is_closed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_takes_each_replica_in_turn_whatever_its_load() {
        let picks: Vec<usize> = (0..5)
            .map(|t| choose(RouterPolicy::RoundRobin, t, &[9, 0, 0]))
            .collect();
        assert_eq!(picks, [0, 1, 2, 0, 1]);
    }

    #[test]
    fn least_loaded_takes_the_fewest_in_flight_and_ties_go_to_the_lowest_index() {
        let ll = |loads: &[usize]| choose(RouterPolicy::LeastLoaded, 7, loads);
        assert_eq!(ll(&[3, 1, 2]), 1);
        assert_eq!(ll(&[2, 1, 1]), 1);
        assert_eq!(ll(&[0, 0, 0]), 0);
        assert_eq!(ll(&[5]), 0);
    }

    #[test]
    fn a_request_counts_in_its_replicas_load_until_its_sequence_is_dropped() {
        let (queues, mut receivers): (Vec<_>, Vec<_>) =
            (0..2).map(|_| mpsc::unbounded_channel()).unzip();
        let router = Router::new(RouterPolicy::LeastLoaded, queues);
        let request = || Seq::new(10, 10, mpsc::unbounded_channel().0);
        // Both idle: the first goes to replica 0, the next to 1, the third to 0 again.
        for _ in 0..3 {
            router.route(request()).expect("running");
        }
        let load = |i: usize| router.inner.loads[i].load(Ordering::Relaxed);
        assert_eq!((load(0), load(1)), (2, 1));
        // Replica 0 finishes both of its requests: the next request goes there.
        let first = receivers[0].try_recv().expect("queued");
        drop(first);
        drop(receivers[0].try_recv().expect("queued"));
        assert_eq!((load(0), load(1)), (0, 1));
        router.route(request()).expect("running");
        assert_eq!((load(0), load(1)), (1, 1));
        assert!(receivers[1].try_recv().is_ok());
        drop(receivers);
        assert!(router.is_closed());
        assert!(router.route(request()).is_none());
    }
}
