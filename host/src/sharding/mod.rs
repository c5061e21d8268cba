//! Sharded runs: the slice of the schedule a shard sends, and the merge of the shards into one report.

pub mod merge;
pub mod shard;
