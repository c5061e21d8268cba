//! Scenario parameters: declared with defaults by `describe`, overridden with `-p name=value`.
//! The type of a parameter is the type of its default, so `-p requests=2x` is refused early.

use std::fmt;
use std::time::Duration;

use super::ScenarioError;

#[derive(Clone, Debug, PartialEq)]
pub enum ParamValue {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
}

impl ParamValue {
    pub fn type_name(&self) -> &'static str {
        match self {
            ParamValue::Int(_) => "an integer",
            ParamValue::Float(_) => "a number",
            ParamValue::Bool(_) => "a boolean",
            ParamValue::Str(_) => "a string",
        }
    }

    /// Parses `text` as a value of the same type as `self`.
    fn parse_like(&self, text: &str) -> Option<ParamValue> {
        let t = text.trim();
        match self {
            ParamValue::Int(_) => t.replace('_', "").parse().ok().map(ParamValue::Int),
            ParamValue::Float(_) => t
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .map(ParamValue::Float),
            ParamValue::Bool(_) => match t.to_ascii_lowercase().as_str() {
                "true" | "yes" | "1" | "on" => Some(ParamValue::Bool(true)),
                "false" | "no" | "0" | "off" => Some(ParamValue::Bool(false)),
                _ => None,
            },
            ParamValue::Str(_) => Some(ParamValue::Str(text.to_string())),
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            ParamValue::Int(v) => Some(*v as f64),
            ParamValue::Float(v) => Some(*v),
            _ => None,
        }
    }
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Int(v) => write!(f, "{v}"),
            // `4.0`, not `4`: shows the parameter takes a number, not only integers.
            ParamValue::Float(v) => write!(f, "{v:?}"),
            ParamValue::Bool(v) => write!(f, "{v}"),
            ParamValue::Str(v) => write!(f, "{v}"),
        }
    }
}

#[derive(Clone, Debug)]
pub struct ParamSpec {
    pub name: String,
    pub default: ParamValue,
    pub help: String,
}

/// Resolved parameter values, in declaration order.
#[derive(Clone, Debug, Default)]
pub struct Params {
    values: Vec<(String, ParamValue)>,
}

impl Params {
    /// Defaults overridden by `name=value` pairs; unknown names and values of the wrong
    /// type are errors that list what is accepted.
    pub fn resolve(
        scenario: &str,
        specs: &[ParamSpec],
        overrides: &[(String, String)],
    ) -> Result<Params, ScenarioError> {
        let mut values: Vec<(String, ParamValue)> = specs
            .iter()
            .map(|s| (s.name.clone(), s.default.clone()))
            .collect();
        for (name, text) in overrides {
            let Some(slot) = values.iter_mut().find(|(n, _)| n == name) else {
                let known: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
                return Err(ScenarioError::Param(format!(
                    "unknown parameter `{name}` for scenario {scenario}; it accepts: {}",
                    if known.is_empty() {
                        "no parameters".to_string()
                    } else {
                        known.join(", ")
                    }
                )));
            };
            slot.1 = slot.1.parse_like(text).ok_or_else(|| {
                ScenarioError::Param(format!(
                    "parameter `{name}` of scenario {scenario} must be {}, got `{text}`",
                    slot.1.type_name()
                ))
            })?;
        }
        Ok(Params { values })
    }

    pub fn get(&self, name: &str) -> Option<&ParamValue> {
        self.values.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &ParamValue)> {
        self.values.iter().map(|(n, v)| (n.as_str(), v))
    }

    /// The run's seed: the `seed` parameter when the scenario declares one, else 0.
    pub fn seed(&self) -> u64 {
        match self.get("seed") {
            Some(ParamValue::Int(v)) => *v as u64,
            _ => 0,
        }
    }
}

/// Splits `name=value` as given to `-p`.
pub fn parse_override(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((n, v)) if !n.trim().is_empty() => Ok((n.trim().to_string(), v.to_string())),
        _ => Err(format!("expected NAME=VALUE, got `{s}`")),
    }
}

/// Parses a duration given as seconds (`90`, `1.5`) or with a unit (`500ms`, `30s`, `20m`, `1h`).
/// `secs` as a Duration, or `None` when it is negative, not finite, or beyond what a
/// Duration holds (about 5.8e11 years): such a value must be refused, never converted with
/// `Duration::from_secs_f64`, which panics on it.
pub fn duration_of(secs: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(secs).ok()
}

pub fn parse_duration_secs(text: &str) -> Option<f64> {
    let t = text.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    num.trim()
        .parse::<f64>()
        .ok()
        .map(|v| v * mult)
        .filter(|v| v.is_finite() && *v >= 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs() -> Vec<ParamSpec> {
        vec![
            ParamSpec {
                name: "requests".into(),
                default: ParamValue::Int(100),
                help: String::new(),
            },
            ParamSpec {
                name: "rate".into(),
                default: ParamValue::Float(1.0),
                help: String::new(),
            },
            ParamSpec {
                name: "duration".into(),
                default: ParamValue::Str("20m".into()),
                help: String::new(),
            },
        ]
    }

    #[test]
    fn overrides_are_typed_by_default() {
        let p = Params::resolve(
            "s",
            &specs(),
            &[
                ("requests".into(), "200".into()),
                ("rate".into(), "2.5".into()),
            ],
        )
        .unwrap();
        assert_eq!(p.get("requests"), Some(&ParamValue::Int(200)));
        assert_eq!(p.get("rate"), Some(&ParamValue::Float(2.5)));
        assert_eq!(p.get("duration"), Some(&ParamValue::Str("20m".into())));
    }

    #[test]
    fn unknown_and_mistyped_parameters_are_refused() {
        let e = Params::resolve("s", &specs(), &[("request".into(), "2".into())])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown parameter `request`") && e.contains("requests, rate, duration"),
            "{e}"
        );
        let e = Params::resolve("s", &specs(), &[("requests".into(), "2x".into())])
            .unwrap_err()
            .to_string();
        assert!(e.contains("must be an integer, got `2x`"), "{e}");
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration_secs("20m"), Some(1200.0));
        assert_eq!(parse_duration_secs("90"), Some(90.0));
        assert_eq!(parse_duration_secs("500ms"), Some(0.5));
        assert_eq!(parse_duration_secs("1h"), Some(3600.0));
        assert_eq!(parse_duration_secs("x"), None);
        assert_eq!(parse_duration_secs("-1s"), None);
    }
}
