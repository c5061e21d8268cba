//! Messages that say what happened: a run whose every request was cancelled says so, not
//! that nothing was sent; a phase too long for any run is "too large"; a full disk names
//! requests.jsonl's cut and leaves no torn result.json; an SSE event with empty data is a
//! keep-alive, not malformed JSON; a megabyte of manifest name is one short line.

use std::path::Path;
use std::process::Command;

use crate::fault_server::{Fault, FaultServer};
use crate::support::*;

/// The `error:` lines of a run's stderr.
fn error_lines(err: &str) -> Vec<&str> {
    err.lines().filter(|l| l.starts_with("error:")).collect()
}

/// chat_abandon cancelling every request after its first token: the run fails saying all
/// of them were cancelled, never that nothing was sent.
#[test]
fn a_run_whose_every_request_was_cancelled_says_so() {
    let out = runner(&[
        &scenario("chat_abandon.rhai"),
        "-p",
        "requests=4",
        "-p",
        "abandon_every=1",
        "-p",
        "abandon_after_tokens=1",
        "--sim-profile",
        "fixed",
        "--sim-ttft-ms",
        "5",
        "--sim-itl-ms",
        "20",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let lines = error_lines(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("all 4 requests were cancelled") && !err.contains("nothing was sent"),
        "{err}"
    );
}

/// `max_duration: 1e300` is refused as too large, naming the largest accepted.
#[test]
fn a_phase_longer_than_any_run_is_too_large_not_negative() {
    let out = runner(&[&scenario("poisson_duration.rhai"), "-p", "duration=1e300"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let lines = error_lines(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("of 1e300 s is too large") && lines[0].contains("at most 1000000000 s"),
        "{err}"
    );
    assert!(!err.contains(">= 0"), "{err}");
}

/// A tmpfs of `kib` KiB mounted at a fresh directory, unmounted when dropped; `None` when
/// this process may not mount (not root, or a container without the capability).
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount(kib: u32) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().ok()?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        status.success().then_some(SmallDisk(dir))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

/// A disk that fills up mid-run: the run says in one line how many records requests.jsonl
/// kept and lost, the file holds exactly those whole records, and no empty or torn
/// result.json (nor a temporary file) is left. Needs a tmpfs mount (root, as in CI, which
/// sets `RUNNER_REQUIRE_TMPFS=1`); skipped with the reason otherwise.
#[test]
fn a_full_disk_says_where_requests_jsonl_was_cut_and_leaves_no_torn_result() {
    let Some(disk) = SmallDisk::mount(256) else {
        skip_unless_required(
            "RUNNER_REQUIRE_TMPFS",
            "cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN)",
        );
        return;
    };
    let out_dir = disk.path().join("out");
    let out = runner(&[
        &scenario("throughput.rhai"),
        "-p",
        "requests=2000",
        "-p",
        "output_tokens=4",
        "-p",
        "input_tokens=16",
        "--sim-profile",
        "zero",
        "--output",
        &out_dir.display().to_string(),
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let cut = err
        .lines()
        .find(|l| l.contains("requests.jsonl was cut: "))
        .unwrap_or_else(|| panic!("no line about requests.jsonl: {err}"));
    let written: usize = cut
        .split("requests.jsonl was cut: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{cut}"));
    assert!(
        cut.contains(&format!(
            "{written} of 2000 request records written to {}",
            out_dir.join("requests.jsonl").display()
        )) && cut.contains(&format!("{} lost", 2000 - written)),
        "{cut}"
    );
    assert!(written > 0 && written < 2000, "{cut}");
    assert_eq!(lines_in(&out_dir.join("requests.jsonl")), written, "{cut}");
    let result = out_dir.join("result.json");
    if let Ok(text) = std::fs::read_to_string(&result) {
        let parsed: Result<serde_json::Value, _> = serde_json::from_str(&text);
        assert!(parsed.is_ok(), "a torn result.json of {} bytes", text.len());
    }
    let temporary: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(temporary.is_empty(), "{temporary:?}");
    tell(&format!(
        "full disk: {written} of 2000 records kept before the 256 KiB tmpfs filled"
    ));
}

/// `data:` events with nothing in them, among a normal stream's: every request succeeds
/// with its three tokens; none is `malformed_json`.
#[test]
fn sse_events_with_empty_data_are_skipped() {
    let server = FaultServer::start(|_| Fault::EmptyData);
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().display().to_string();
    let out = runner(&[
        &fixture("faults.rhai"),
        "--target",
        &server.url,
        "--model",
        "fault-model",
        "-p",
        "requests=20",
        "-p",
        "concurrency=4",
        "--output",
        &out_dir,
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}\n{text}", stderr(&out));
    assert_eq!(
        report_row(&text, "Successful requests:"),
        Some(20),
        "{text}"
    );
    assert_eq!(
        report_row(&text, "Total generated tokens:"),
        Some(60),
        "{text}"
    );
}

/// A package whose manifest `name` is a megabyte of valid characters: pack, info and run
/// each refuse it in one line of a few hundred bytes, never quoting it whole.
#[test]
fn a_megabyte_of_manifest_name_is_refused_in_one_short_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pkg");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        repo().join("scenarios/long_context.rhai"),
        dir.join("x.rhai"),
    )
    .unwrap();
    let manifest = format!(
        "name = \"{}\"\nversion = \"1.0.0\"\nentry = \"x.rhai\"\ninterface = \"bench:scenario@0.3.0\"\n",
        "a".repeat(1_000_000)
    );
    std::fs::write(dir.join("scenario.toml"), manifest).unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let (d, o) = (dir.display().to_string(), out.display().to_string());
    for args in [vec!["pack", &d, "--out", &o], vec!["info", &d], vec![&d]] {
        let r = runner(&args);
        let err = stderr(&r);
        let head: String = err.chars().take(300).collect();
        assert_eq!(r.status.code(), Some(1), "{args:?}: {head}");
        assert!(err.len() < 400, "{args:?}: {} bytes: {head}", err.len());
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains("`name` is 1000000 bytes long, at most 128 are accepted"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
}
