//! The merge states of the phase's accumulated latencies, one per entry of
//! [`catalogue::accumulated`], written into the phase's state under each entry's
//! `state_key` (`"ttft"`, `"lateness"`, …: the names shard.json has always used).

use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::measuring::metrics::catalogue::{self, Latency};
use crate::measuring::metrics::stat::StatState;

/// One [`StatState`] per accumulated latency, in the catalogue's order.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyStates(Vec<StatState>);

impl LatencyStates {
    /// The states of [`catalogue::accumulated`], in its order.
    pub(crate) fn new(states: Vec<StatState>) -> LatencyStates {
        assert_eq!(states.len(), catalogue::accumulated().count());
        LatencyStates(states)
    }

    /// Each state with the catalogue's name for it.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &StatState)> {
        catalogue::accumulated()
            .map(|(_, a)| a.state_key)
            .zip(&self.0)
    }

    /// The state of an accumulated latency of the catalogue.
    pub fn get(&self, latency: &Latency) -> &StatState {
        &self.0[catalogue::accumulated_index(latency).expect("an accumulated latency")]
    }

    /// The state of an accumulated latency of the catalogue, to edit.
    pub fn get_mut(&mut self, latency: &Latency) -> &mut StatState {
        &mut self.0[catalogue::accumulated_index(latency).expect("an accumulated latency")]
    }
}

impl Serialize for LatencyStates {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, state) in self.iter() {
            map.serialize_entry(key, state)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for LatencyStates {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(StatesVisitor)
    }
}

struct StatesVisitor;

impl<'de> Visitor<'de> for StatesVisitor {
    type Value = LatencyStates;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the phase's latency histograms")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LatencyStates, A::Error> {
        let keys: Vec<&'static str> = catalogue::accumulated().map(|(_, a)| a.state_key).collect();
        let mut states: Vec<Option<StatState>> = keys.iter().map(|_| None).collect();
        // The phase state's other fields reach a flattened map too: they are skipped.
        while let Some(key) = map.next_key::<String>()? {
            match keys.iter().position(|k| *k == key) {
                Some(at) if states[at].is_some() => {
                    return Err(de::Error::duplicate_field(keys[at]))
                }
                Some(at) => states[at] = Some(map.next_value()?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let states = keys
            .iter()
            .zip(states)
            .map(|(key, s)| s.ok_or_else(|| de::Error::missing_field(key)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(LatencyStates(states))
    }
}
