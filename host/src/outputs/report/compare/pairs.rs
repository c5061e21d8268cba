//! Which phase of one result `runner compare` sets against which phase of another. By
//! name when the names match; by position when both have as many phases and the names
//! differ only in their numbers (a parameter in the name: shared_prefix's `prefix 0.75`
//! and `prefix 0.5`), and, with `--force`, whenever both have as many phases.

/// How the phases were paired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// Same names.
    Name,
    /// Same order, names that differ only in numbers.
    NumbersInNames,
    /// Same order, as `--force` asked, names that differ otherwise.
    Forced,
}

/// The pairs (index in A, index in B), in A's order.
#[derive(Debug, PartialEq, Eq)]
pub struct Pairing {
    pub pairs: Vec<(usize, usize)>,
    pub how: How,
}

impl How {
    /// The line that says how phases were paired, when not by name.
    pub fn describe(self) -> Option<&'static str> {
        match self {
            How::Name => None,
            How::NumbersInNames => {
                Some("phases paired by position: their names differ only in numbers (parameters)")
            }
            How::Forced => Some("phases paired by position (--force): their names differ"),
        }
    }
}

/// A phase name with each number (digits, with any decimal point among them) as `#`.
fn shape(name: &str) -> String {
    let mut out = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if !c.is_ascii_digit() {
            out.push(c);
            continue;
        }
        while chars.next_if(|c| c.is_ascii_digit() || *c == '.').is_some() {}
        out.push('#');
    }
    out
}

/// The phases of `a` and `b` paired; `None` when nothing pairs.
pub fn pair(a: &[&str], b: &[&str], force: bool) -> Option<Pairing> {
    let in_order = |how| {
        Some(Pairing {
            pairs: (0..a.len()).map(|i| (i, i)).collect(),
            how,
        })
    };
    if a == b {
        return in_order(How::Name);
    }
    let same_shape = a.len() == b.len() && a.iter().zip(b).all(|(x, y)| shape(x) == shape(y));
    if same_shape {
        return in_order(How::NumbersInNames);
    }
    let by_name: Vec<(usize, usize)> = a
        .iter()
        .enumerate()
        .filter_map(|(i, n)| Some((i, b.iter().position(|m| m == n)?)))
        .collect();
    if !by_name.is_empty() {
        return Some(Pairing {
            pairs: by_name,
            how: How::Name,
        });
    }
    (force && a.len() == b.len()).then(|| in_order(How::Forced))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(a: &[&str], b: &[&str], force: bool) -> Option<(Vec<(usize, usize)>, How)> {
        pair(a, b, force).map(|p| (p.pairs, p.how))
    }

    #[test]
    fn names_pair_first_then_positions() {
        assert_eq!(
            pairs(&["main"], &["main"], false),
            Some((vec![(0, 0)], How::Name))
        );
        // shared_prefix at two prefix_ratios: the ratio is in the name.
        assert_eq!(
            pairs(&["prefix 0.75"], &["prefix 0.5"], false),
            Some((vec![(0, 0)], How::NumbersInNames))
        );
        assert_eq!(
            pairs(&["rate 2", "rate 4"], &["rate 3", "rate 6"], false),
            Some((vec![(0, 0), (1, 1)], How::NumbersInNames))
        );
        // Some names in common: those pair, by name, wherever they are.
        assert_eq!(
            pairs(&["warm", "main", "tail"], &["main", "other"], false),
            Some((vec![(1, 0)], How::Name))
        );
        // Nothing in common: only --force pairs, and only as many phases as many.
        assert_eq!(pairs(&["short"], &["long"], false), None);
        assert_eq!(
            pairs(&["short"], &["long"], true),
            Some((vec![(0, 0)], How::Forced))
        );
        assert_eq!(pairs(&["a", "b"], &["c"], true), None);
        // Other words around the numbers are not "only parameters".
        assert_eq!(pairs(&["prefix 0.75"], &["suffix 0.5"], false), None);
    }

    #[test]
    fn numbers_become_one_mark() {
        assert_eq!(shape("prefix 0.75"), "prefix #");
        assert_eq!(shape("rate 12.5 req/s, c64"), "rate # req/s, c#");
        assert_eq!(shape("main"), "main");
    }
}
