//! What a script may hold, checked in constant time.
//!
//! Rhai's own limits (`set_max_string_size`, `set_max_array_size`, `set_max_map_size`)
//! are not used: with any of them set, Rhai measures a value by walking it whole after
//! every call that may change it (rhai 1.27, src/eval/data_check.rs, called from
//! src/func/func_call.rs for each `&mut` argument), so `arr.push(s)` costs in proportion
//! to `arr` and filling an array or a map is quadratic (20,000 strings 1.2 s, 40,000 4.9 s;
//! a 50,000-line trace did not load in 60 s). Instead:
//! - each call may add at most [`call_heap_limit`] bytes to the heap (1 GiB for a setup
//!   call, 256 MiB for the others, a quarter of the budget at most), read from the
//!   runner's counting allocator ([`crate::safeguards::memory_budget`]) at every
//!   operation: one atomic load, whatever the data;
//! - the one function that makes a value far larger than its arguments, `pad`, is
//!   replaced by one that refuses a size over [`MAX_PAD_CHARS`] or [`MAX_PAD_ITEMS`]
//!   before allocating;
//! - the process's budget bounds the rest (what is kept across calls).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rhai::{Array, Dynamic, Engine, ImmutableString, INT};

use super::RhaiResult;
use crate::safeguards::memory_budget;

/// What `on_progress` returns to stop a call over its heap limit, recognised in its error.
pub const TOKEN: &str = "runner: call heap limit";

/// The characters a `pad` may make a string (64 MiB of ASCII).
pub const MAX_PAD_CHARS: usize = 64 << 20;
/// The elements a `pad` may add to an array, nested elements of the item counted.
pub const MAX_PAD_ITEMS: usize = 4_000_000;
/// The most a setup call (which may load a dataset) may add to the heap, whatever the
/// budget.
const MAX_SETUP_CALL_HEAP: usize = 1 << 30;
/// The most a call made for a request or a response may add.
const MAX_REQUEST_CALL_HEAP: usize = 256 << 20;

/// The bytes a call to `function` may add to the heap: a quarter of the runner's budget,
/// at most 1 GiB for a setup call and 256 MiB for the others. A quarter, so that the
/// operation that passes it (at most a doubling: `s += s` holds the old and the new
/// string for a moment) still fits in the budget.
pub fn call_heap_limit(function: &str) -> usize {
    let most = if is_setup(function) {
        MAX_SETUP_CALL_HEAP
    } else {
        MAX_REQUEST_CALL_HEAP
    };
    (memory_budget::budget() / 4).min(most)
}

/// Whether a call to `function` is a setup call, which may load a dataset (and so has
/// the longer wall-clock limit too, see [`super::deadline`]).
pub fn is_setup(function: &str) -> bool {
    matches!(
        function,
        "<top level>" | "describe" | "phases" | "next_phase"
    )
}

/// The heap held when the call in progress started, and the call's limit.
#[derive(Clone)]
pub struct CallHeap {
    start: Arc<AtomicUsize>,
    limit: Arc<AtomicUsize>,
}

impl CallHeap {
    pub fn new() -> CallHeap {
        CallHeap {
            start: Arc::new(AtomicUsize::new(0)),
            limit: Arc::new(AtomicUsize::new(usize::MAX)),
        }
    }

    /// Starts counting a call to `function`'s growth from what is held now.
    pub fn start(&self, function: &str) {
        self.limit
            .store(call_heap_limit(function), Ordering::Relaxed);
        self.start.store(memory_budget::held(), Ordering::Relaxed);
    }

    /// Whether the call in progress grew the heap past its limit.
    pub fn passed(&self) -> bool {
        self.grew_past(memory_budget::held())
    }

    fn grew_past(&self, held: usize) -> bool {
        held.saturating_sub(self.start.load(Ordering::Relaxed)) > self.limit.load(Ordering::Relaxed)
    }
}

/// Replaces Rhai's `pad` functions with ones that check the size first.
pub fn register_pad(engine: &mut Engine) {
    engine.register_fn(
        "pad",
        |s: &mut ImmutableString, len: INT, c: char| -> RhaiResult<()> {
            pad_string(s, len, &c.to_string())
        },
    );
    engine.register_fn(
        "pad",
        |s: &mut ImmutableString, len: INT, padding: &str| -> RhaiResult<()> {
            pad_string(s, len, padding)
        },
    );
    engine.register_fn(
        "pad",
        |array: &mut Array, len: INT, item: Dynamic| -> RhaiResult<()> {
            let Some(len) = usize::try_from(len).ok().filter(|l| *l > array.len()) else {
                return Ok(());
            };
            let items = (len - array.len()).saturating_mul(1 + nested_len(&item));
            if len > MAX_PAD_ITEMS || items > MAX_PAD_ITEMS {
                return Err(format!(
                    "pad({len}, …) would add {items} elements: at most {MAX_PAD_ITEMS} (the scenario size limit)"
                )
                .into());
            }
            array.resize(len, item);
            Ok(())
        },
    );
}

/// Rhai's string `pad`: `padding` repeated (its last copy cut) until the string has `len`
/// characters.
fn pad_string(s: &mut ImmutableString, len: INT, padding: &str) -> RhaiResult<()> {
    let Some(len) = usize::try_from(len).ok().filter(|l| *l > 0) else {
        return Ok(());
    };
    if len > MAX_PAD_CHARS {
        return Err(format!(
            "pad({len}, …): at most {MAX_PAD_CHARS} characters (the scenario size limit)"
        )
        .into());
    }
    let have = s.chars().count();
    if len <= have || padding.is_empty() {
        return Ok(());
    }
    let text = s.make_mut();
    text.extend(padding.chars().cycle().take(len - have));
    Ok(())
}

/// The elements nested in a value (arrays' and maps', all levels).
fn nested_len(value: &Dynamic) -> usize {
    if let Some(a) = value.read_lock::<Array>() {
        a.iter().map(|v| 1 + nested_len(v)).sum()
    } else if let Some(m) = value.read_lock::<rhai::Map>() {
        m.values().map(|v| 1 + nested_len(v)).sum()
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_stopped_once_it_adds_more_than_its_limit() {
        let heap = CallHeap {
            start: Arc::new(AtomicUsize::new(1000)),
            limit: Arc::new(AtomicUsize::new(100)),
        };
        assert!(!heap.grew_past(1100));
        assert!(heap.grew_past(1101));
        // What was freed during the call is not a negative growth.
        assert!(!heap.grew_past(10));
    }

    /// CPU time of this thread: a busy machine delays the test but does not add to it.
    fn thread_cpu() -> std::time::Duration {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: writes the clock's value into `t`, which we own.
        assert_eq!(
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) },
            0
        );
        std::time::Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    }

    /// The least CPU time of `runs` runs of `body` `n` times over, in the sandboxed engine.
    fn cost(body: &str, n: usize, runs: usize) -> std::time::Duration {
        let engine = super::super::api::sandboxed_engine();
        let script =
            format!("let a = []; let m = #{{}}; for i in 0..{n} {{ {body}; }} a.len() + m.len()");
        let ast = engine.compile(&script).unwrap();
        (0..runs)
            .map(|_| {
                let t0 = thread_cpu();
                assert_eq!(engine.eval_ast::<INT>(&ast).unwrap(), n as INT);
                thread_cpu() - t0
            })
            .min()
            .unwrap()
    }

    #[test]
    fn filling_an_array_or_a_map_costs_in_proportion_to_its_length() {
        for body in [
            "a.push(`s${i}`)",
            "a.push(#{ i: i, s: `s${i}` })",
            "m[`k${i}`] = [`s${i}`, i]",
        ] {
            let small = cost(body, 10_000, 3);
            let large = cost(body, 40_000, 2);
            let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-6);
            assert!(
                ratio < 8.0,
                "`{body}`: 4 times as many cost {ratio:.1} times the CPU time ({small:?} for 10,000, {large:?} for 40,000): linear is 4, quadratic 16"
            );
        }
    }

    #[test]
    fn the_engine_sets_no_limit_that_rhai_checks_by_walking_the_value() {
        let engine = super::super::api::sandboxed_engine();
        assert_eq!(
            (
                engine.max_string_size(),
                engine.max_array_size(),
                engine.max_map_size()
            ),
            (0, 0, 0)
        );
    }

    #[test]
    fn pad_refuses_a_size_over_the_limit_before_allocating_and_pads_as_rhai_does() {
        let engine = super::super::api::sandboxed_engine();
        let padded: String = engine.eval(r#"let s = "ab"; s.pad(7, "xyz"); s"#).unwrap();
        assert_eq!(padded, "abxyzxy");
        let padded: String = engine.eval(r#"let s = "ab"; s.pad(4, '*'); s"#).unwrap();
        assert_eq!(padded, "ab**");
        let len: INT = engine.eval("let a = [1]; a.pad(3, 0); a.len()").unwrap();
        assert_eq!(len, 3);
        for script in [
            r#"let s = ""; s.pad(1 << 40, "x");"#,
            "let a = []; a.pad(1 << 40, 0);",
            "let a = []; a.pad(1000000, [1, 2, 3, 4, 5]);",
        ] {
            let err = engine.run(script).unwrap_err().to_string();
            assert!(err.contains("the scenario size limit"), "{script}: {err}");
        }
    }

    #[test]
    fn the_limit_is_at_most_a_quarter_of_the_budget() {
        let quarter = memory_budget::budget() / 4;
        assert_eq!(call_heap_limit("phases"), quarter.min(MAX_SETUP_CALL_HEAP));
        assert_eq!(
            call_heap_limit("next_request"),
            quarter.min(MAX_REQUEST_CALL_HEAP)
        );
    }
}
