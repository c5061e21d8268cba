//! One row of `runner compare`: a metric of two results and which side is better. Its
//! own module because both the client's rows (compare.rs) and the server's
//! (server_compare.rs) are built of it.

use crate::metrics::catalogue::Better;

/// One metric of one pair.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub key: String,
    pub label: String,
    pub a: f64,
    pub b: f64,
    pub better: Better,
}

impl Row {
    pub fn change(&self) -> f64 {
        self.b - self.a
    }

    /// Change relative to A, percent; `None` when A is 0.
    pub fn percent(&self) -> Option<f64> {
        (self.a != 0.0).then(|| 100.0 * (self.b - self.a) / self.a)
    }

    /// Which side is better: Some(true) for B, Some(false) for A, None for a tie or no
    /// direction.
    pub fn b_wins(&self) -> Option<bool> {
        match self.better {
            _ if self.a == self.b => None,
            Better::Higher => Some(self.b > self.a),
            Better::Lower => Some(self.b < self.a),
            Better::Neither => None,
        }
    }
}
