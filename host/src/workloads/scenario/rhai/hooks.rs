//! The functions the runner calls in a script, and near misses of them: a hook defined
//! under a misspelled name (`fn stp(s)`) or with the wrong number of parameters is never
//! called, and without a warning the mistake would pass silently.

/// Every hook: its name, its parameters, and how the runner calls it.
pub const HOOKS: [(&str, usize, &str); 8] = [
    ("describe", 0, "describe()"),
    ("phases", 0, "phases()"),
    ("next_request", 2, "next_request(phase, index)"),
    ("arrival", 2, "arrival(phase, index)"),
    ("on_response", 1, "on_response(outcome)"),
    ("stop", 1, "stop(snapshot)"),
    ("next_phase", 1, "next_phase(history)"),
    ("session_step", 1, "session_step(s)"),
];

/// One warning for each defined function that looks like a hook the script does not
/// define: the same name with another number of parameters, or a name at most two edits
/// away from a hook's.
pub fn near_misses(defined: &[(String, usize)]) -> Vec<String> {
    let has = |name: &str, arity: usize| defined.iter().any(|(n, a)| n == name && *a == arity);
    let mut warnings = Vec::new();
    for (name, arity) in defined {
        if has(
            name,
            HOOKS
                .iter()
                .find(|h| h.0 == name)
                .map_or(usize::MAX, |h| h.1),
        ) {
            continue;
        }
        for (hook, hook_arity, call) in HOOKS {
            if has(hook, hook_arity) {
                continue;
            }
            if name == hook {
                warnings.push(format!(
                    "`fn {name}` takes {arity} parameter(s) but the runner calls `{call}`: it is never called"
                ));
            } else if name.len() >= 3 && strsim::levenshtein(name, hook) <= 2 {
                warnings.push(format!(
                    "`fn {name}` is never called by the runner: did you mean `fn {call}`?"
                ));
            }
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defined(fns: &[(&str, usize)]) -> Vec<(String, usize)> {
        fns.iter().map(|(n, a)| (n.to_string(), *a)).collect()
    }

    #[test]
    fn a_misspelled_or_misdeclared_hook_is_named() {
        let base = [("describe", 0), ("phases", 0), ("next_request", 2)];
        let w = near_misses(&defined(&[&base[..], &[("stp", 1)]].concat()));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("did you mean `fn stop(snapshot)`"), "{w:?}");
        let w = near_misses(&defined(&[&base[..], &[("on_response", 0)]].concat()));
        assert!(w[0].contains("takes 0 parameter(s)"), "{w:?}");
    }

    #[test]
    fn helpers_and_defined_hooks_give_no_warning() {
        let fns = [
            ("describe", 0),
            ("phases", 0),
            ("next_request", 2),
            ("stop", 1),
            ("make_prompt", 1),
            ("pick", 2),
            ("stops", 1),
        ];
        assert_eq!(near_misses(&defined(&fns)), Vec::<String>::new());
    }
}
