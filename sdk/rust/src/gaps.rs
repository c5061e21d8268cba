//! Gaps between requests for phases with custom arrivals (`Phase::custom`), drawn from the
//! run's seeded generator: return one of these from `Scenario::arrival`, or mix them (an
//! on/off process switches between two Poisson rates).

/// A Poisson process at `rate` requests per second: exponential gaps, mean 1/rate.
pub fn poisson(rate: f64) -> Result<f64, String> {
    crate::exponential(rate)
}

/// Gamma gaps with mean 1/rate and shape `burstiness` (1 is Poisson, larger is more
/// regular), as vLLM's `--burstiness`.
pub fn gamma(rate: f64, burstiness: f64) -> Result<f64, String> {
    if !(rate > 0.0 && burstiness > 0.0) {
        return Err(format!(
            "gaps::gamma({rate}, {burstiness}): rate and burstiness must be > 0"
        ));
    }
    crate::gamma(burstiness, 1.0 / (rate * burstiness))
}

/// One request every 1/rate seconds.
pub fn constant(rate: f64) -> Result<f64, String> {
    if rate > 0.0 && rate.is_finite() {
        Ok(1.0 / rate)
    } else {
        Err(format!("gaps::constant({rate}): rate must be > 0"))
    }
}
