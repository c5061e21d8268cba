//! `runner info SCENARIO`: name, description, package manifest and parameters.

use anyhow::Result;

use super::load_tokenizer;
use super::source::load_scenario;
use crate::commands::cli::InfoArgs;
use crate::safeguards::display::{escape_control, escape_control_multiline};

pub fn info(a: InfoArgs) -> Result<()> {
    let tokenizer = load_tokenizer("o200k_base")?;
    let loaded = load_scenario(&a.source, tokenizer, &[], true)?;
    let d = &loaded.description;
    // Names, descriptions and help come from the package: shown, never obeyed.
    crate::outln!(
        "{}  ({})",
        escape_control(&d.name),
        a.source.scenario.display()
    );
    if !d.description.is_empty() {
        crate::outln!("{}", escape_control_multiline(&d.description));
    }
    match &loaded.package {
        Some(p) => {
            let m = &p.manifest;
            crate::outln!("\nPackage:    {} {}", m.name, m.version);
            if !m.description.is_empty() {
                crate::outln!("            {}", escape_control_multiline(&m.description));
            }
            if !m.authors.is_empty() {
                crate::outln!("Authors:    {}", escape_control(&m.authors.join(", ")));
            }
            crate::outln!("Entry:      {}", m.entry);
            crate::outln!("Interface:  {}", m.interface);
            if !m.data.is_empty() {
                crate::outln!("Data:       {}", m.data.join(", "));
            }
            crate::outln!("Digest:     sha256 {}", p.digest);
            if let Some(t) = &m.target {
                for (label, v) in [
                    ("Server flags", &t.server_flags),
                    ("Model", &t.model),
                    ("Notes", &t.notes),
                ] {
                    if let Some(v) = v {
                        let v = match label {
                            "Notes" => escape_control_multiline(v),
                            _ => escape_control(v),
                        };
                        crate::outln!("Recommended {label}: {v}");
                    }
                }
            }
        }
        None => crate::outln!("\nsha256 {}", loaded.digest),
    }
    if d.params.is_empty() {
        crate::outln!("\nNo parameters.");
        return Ok(());
    }
    crate::outln!("\nParameters (override with -p NAME=VALUE):");
    let name_w = d
        .params
        .iter()
        .map(|p| p.name.len())
        .max()
        .unwrap_or(0)
        .max(4);
    let def_w = d
        .params
        .iter()
        .map(|p| p.default.to_string().len())
        .max()
        .unwrap_or(0)
        .max(7);
    crate::outln!("  {:<name_w$}  {:<def_w$}  meaning", "name", "default");
    for p in &d.params {
        crate::outln!(
            "  {:<name_w$}  {:<def_w$}  {}",
            escape_control(&p.name),
            escape_control(&p.default.to_string()),
            escape_control(&p.help)
        );
    }
    Ok(())
}
