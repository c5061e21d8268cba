//! Streaming statistics over finished requests (vLLM-compatible definitions, plus our own).

pub mod answer;
pub mod catalogue;
pub mod options;
pub mod prefix_cache;
pub mod record;
pub mod sessions;
pub mod spread;
pub mod stamp_source;
pub mod stat;
pub mod steady_state;
pub mod summary;
pub mod tags;

pub use options::{parse_percentiles, MetricsOptions, ParseError, Slo};
pub use prefix_cache::PrefixCacheSummary;
pub use record::{Chunk, ErrorKind, RequestError, RequestRecord, SessionRecord};
pub use sessions::SessionsSummary;
pub use stamp_source::StampSources;
pub(crate) use stat::add_count;
pub use stat::{Distribution, StatStateError};
pub use steady_state::{SteadyState, SteadyWindow};
pub use summary::PhaseState;
pub use summary::{
    DecisionLatencies, FailureCount, PhaseAccumulator, PhaseInfo, PhaseSummary, TokenAccounting,
    CLIENT_BOUND_LATENESS_MS, ERROR_KINDS,
};
pub use tags::TagSummary;
