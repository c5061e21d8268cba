//! The scenario's notes of a merged run. Each shard's scenario saw its own stripe (its
//! `stop` gets that shard's counters), and `note(key, value)` has no way to say how values
//! of several shards add up: a sum, a maximum and "the last one" are all plausible. So a
//! merge keeps every shard's notes as they are, and the run's own notes are only those
//! that every shard reported with the same value.

use crate::workloads::scenario::NoteValue;

/// The notes every shard reported with one value they all agree on, in the first shard's
/// order.
pub fn agreed(shards: &[&[(String, NoteValue)]]) -> Vec<(String, NoteValue)> {
    let Some((first, rest)) = shards.split_first() else {
        return Vec::new();
    };
    first
        .iter()
        .filter(|note| rest.iter().all(|s| s.contains(note)))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(key: &str, v: NoteValue) -> (String, NoteValue) {
        (key.to_string(), v)
    }

    #[test]
    fn only_notes_every_shard_agrees_on_are_the_runs() {
        let a = [
            note("found", NoteValue::Float(4.5)),
            note("sent", NoteValue::Int(16)),
            note("mode", NoteValue::Text("fixed".into())),
        ];
        let b = [
            note("mode", NoteValue::Text("fixed".into())),
            note("sent", NoteValue::Int(15)),
            note("found", NoteValue::Float(4.5)),
        ];
        // Different values, a key one shard lacks, 2 against 2.0: no combined value.
        let c = [
            note("found", NoteValue::Float(4.5)),
            note("mode", NoteValue::Text("fixed".into())),
        ];
        let d = [note("found", NoteValue::Int(4))];
        assert_eq!(
            agreed(&[&a, &b]),
            [a[0].clone(), a[2].clone()],
            "in the first shard's order"
        );
        assert_eq!(agreed(&[&a, &b, &c]), [a[0].clone(), a[2].clone()]);
        assert!(agreed(&[&a, &d]).is_empty());
        assert_eq!(agreed(&[&a]), a);
        assert!(agreed(&[]).is_empty());
        let nan = [note("x", NoteValue::Float(f64::NAN))];
        assert!(agreed(&[&nan, &nan]).is_empty(), "NaN equals nothing");
    }
}
