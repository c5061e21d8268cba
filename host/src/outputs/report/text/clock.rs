//! How the reports say which clock a phase's latencies were read on (`metrics::stamp_source`):
//! one line in the runner's extras (result.json writes the counts as `runner.clock`).

use crate::measuring::metrics::StampSources;

/// `part` of `whole` as a percentage with one decimal. A share that is neither none nor
/// all never reads `0.0 %` or `100.0 %`: the line must not claim a clock for every chunk
/// when one was read on the other.
fn share(part: u64, whole: u64) -> String {
    let percent = 100.0 * part as f64 / whole.max(1) as f64;
    let percent = if part == 0 || part == whole {
        percent
    } else {
        percent.clamp(0.1, 99.9)
    };
    format!("{percent:.1} %")
}

/// Which time the chunks carry.
fn chunk_clause(c: &StampSources) -> String {
    let chunks = c.kernel_chunks + c.read_chunks;
    if chunks == 0 {
        "no content chunk was received".to_string()
    } else if c.kernel_chunks == 0 {
        "user-space read times (the kernel gave no receive timestamps)".to_string()
    } else if c.read_chunks == 0 {
        format!(
            "kernel receive times (SO_TIMESTAMPING) for {} of chunks",
            share(c.kernel_chunks, chunks)
        )
    } else {
        format!(
            "kernel receive times (SO_TIMESTAMPING) for {} of chunks, user-space read times for the rest",
            share(c.kernel_chunks, chunks)
        )
    }
}

/// Which time the sends carry, after a `; `; nothing when no request was sent.
fn send_clause(c: &StampSources) -> String {
    let sends = c.socket_write_sends + c.handoff_sends;
    let writes = || {
        format!(
            "P99 write {:.3} ms, max {:.3} ms",
            c.send_write.percentile(99.0).unwrap_or(0.0),
            c.send_write.max
        )
    };
    if sends == 0 {
        String::new()
    } else if c.socket_write_sends == 0 {
        "; sends stamped at the hand-off to the HTTP client".to_string()
    } else if c.handoff_sends == 0 {
        format!("; sends stamped at the socket write ({})", writes())
    } else {
        format!(
            "; sends stamped at the socket write for {} of requests ({}), at the hand-off to the HTTP client for the rest",
            share(c.socket_write_sends, sends),
            writes()
        )
    }
}

/// `Latency clock: …`, one line without its newline: which time the chunks and the sends
/// carry, and the bound on a send stamp's error.
pub fn clock_line(c: &StampSources) -> String {
    format!("Latency clock: {}{}", chunk_clause(c), send_clause(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::metrics::Distribution;

    fn clock(kernel: u64, read: u64, writes: u64, handoffs: u64) -> StampSources {
        StampSources {
            kernel_chunks: kernel,
            read_chunks: read,
            socket_write_sends: writes,
            handoff_sends: handoffs,
            send_write: Distribution {
                count: writes,
                max: if writes > 0 { 0.040 } else { 0.0 },
                percentiles: vec![(99.0, if writes > 0 { 0.012 } else { 0.0 })],
                ..Distribution::default()
            },
        }
    }

    #[test]
    fn every_chunk_on_the_kernel_clock() {
        assert_eq!(
            clock_line(&clock(1200, 0, 40, 0)),
            "Latency clock: kernel receive times (SO_TIMESTAMPING) for 100.0 % of chunks; \
             sends stamped at the socket write (P99 write 0.012 ms, max 0.040 ms)"
        );
    }

    #[test]
    fn no_chunk_on_the_kernel_clock() {
        assert_eq!(
            clock_line(&clock(0, 1200, 0, 40)),
            "Latency clock: user-space read times (the kernel gave no receive timestamps); \
             sends stamped at the hand-off to the HTTP client"
        );
    }

    #[test]
    fn a_mix_gives_the_shares() {
        assert_eq!(
            clock_line(&clock(300, 100, 30, 10)),
            "Latency clock: kernel receive times (SO_TIMESTAMPING) for 75.0 % of chunks, \
             user-space read times for the rest; sends stamped at the socket write for 75.0 % \
             of requests (P99 write 0.012 ms, max 0.040 ms), at the hand-off to the HTTP \
             client for the rest"
        );
        // One chunk in 10 000 on the other clock is a mix, never 100.0 % or 0.0 %.
        let line = clock_line(&clock(9_999, 1, 1, 9_999));
        assert!(line.contains("for 99.9 % of chunks, user-space"), "{line}");
        assert!(line.contains("for 0.1 % of requests"), "{line}");
    }

    #[test]
    fn an_empty_phase_says_so_on_one_line() {
        let line = clock_line(&clock(0, 0, 0, 0));
        assert_eq!(line, "Latency clock: no content chunk was received");
        assert!(!line.contains('\n'));
    }
}
