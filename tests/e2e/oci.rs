//! Packages shared through a real OCI registry: CNCF Distribution (Debian's
//! `docker-registry`) started by the test on a loopback port, with its storage in the
//! test's temp dir. `runner push`, then runs by tag and by digest from another working
//! directory with a cache of its own; a wrong pin, a moved digest tag and a tampered blob
//! are refused before anything runs; with the registry stopped a pinned reference runs
//! from the cache; `runner verify --expect` refuses a re-packed, modified package; a
//! registry behind htpasswd takes credentials from the environment or a Docker
//! configuration, and no output shows them. `runner pull` writes the checked archive; a
//! version tag is not moved to other content without `--force`; a damaged cached archive
//! is pulled again and said so; a registry that cannot be reached, or stays silent, is
//! named with the cause. The registry runs from the committed loopback configuration,
//! deploy/registry/config.yml, the one the README tells users to start.
//!
//! Skipped with a reason when `docker-registry` is not installed, unless
//! RUNNER_REQUIRE_REGISTRY=1.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::support::{free_port, repo, stderr, stdout, wait_until};

const REPOSITORY: &str = "team-a/long-ctx";

/// A registry process serving from `storage`; killed when dropped.
struct Registry {
    child: Child,
    port: u16,
    storage: PathBuf,
}

impl Registry {
    /// Starts a registry in `dir` from deploy/registry/config.yml, with its own storage and
    /// port; `extra` is appended to the configuration.
    fn start(program: &Path, dir: &Path, extra: &str) -> Registry {
        let port = free_port();
        let storage = dir.join("storage");
        // The committed file has no blob descriptor cache: every read goes to the files,
        // which the test edits.
        let committed = std::fs::read_to_string(repo().join("deploy/registry/config.yml"))
            .expect("deploy/registry/config.yml");
        let [root, addr] = [
            "rootdirectory: /var/lib/docker-registry",
            "addr: 127.0.0.1:5000",
        ];
        assert!(
            committed.contains(root) && committed.contains(addr),
            "{committed}"
        );
        let config = committed
            .replace(root, &format!("rootdirectory: {}", storage.display()))
            .replace(addr, &format!("addr: 127.0.0.1:{port}"))
            + extra;
        let config_path = dir.join("config.yml");
        std::fs::write(&config_path, config).unwrap();
        let child = Command::new(program)
            .arg("serve")
            .arg(&config_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry starts");
        let mut registry = Registry {
            child,
            port,
            storage,
        };
        wait_until(
            "the registry to answer /v2/",
            Duration::from_secs(30),
            || {
                assert!(
                    registry.child.try_wait().unwrap().is_none(),
                    "docker-registry exited"
                );
                registry.answers()
            },
        );
        registry
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Whether `GET /v2/` answers (200, or 401 asking for credentials): the distribution
    /// API's version check.
    fn answers(&self) -> bool {
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let request = format!("GET /v2/ HTTP/1.0\r\nHost: {}\r\n\r\n", self.host());
        let mut answer = String::new();
        s.write_all(request.as_bytes()).is_ok()
            && s.read_to_string(&mut answer).is_ok()
            && matches!(answer.split_whitespace().nth(1), Some("200" | "401"))
    }

    /// The file Distribution keeps a blob in.
    fn blob(&self, digest_hex: &str) -> PathBuf {
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&digest_hex[..2])
            .join(digest_hex)
            .join("data")
    }

    /// The file naming the manifest a tag points to.
    fn tag_link(&self, tag: &str) -> PathBuf {
        self.storage
            .join("docker/registry/v2/repositories")
            .join(REPOSITORY)
            .join("_manifests/tags")
            .join(tag)
            .join("current/link")
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The registry program, or None after saying why (a failure when
/// RUNNER_REQUIRE_REGISTRY=1).
fn registry_or_skip() -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join("docker-registry"))
        .find(|p| p.is_file());
    if found.is_none() {
        let why = "docker-registry is not installed (apt-get install docker-registry)";
        assert!(
            std::env::var("RUNNER_REQUIRE_REGISTRY").as_deref() != Ok("1"),
            "RUNNER_REQUIRE_REGISTRY=1 but {why}"
        );
        eprintln!("SKIPPED: {why}");
    }
    found
}

/// Runs the runner in `cwd` with its own cache and no credentials from this machine.
fn runner_in(cwd: &Path, cache: &Path, args: &[&str]) -> Output {
    runner_with(cwd, cache, args, &[])
}

/// [`runner_in`] with `env` set (the Docker configuration is read from `cwd` unless
/// `env` names another).
fn runner_with(cwd: &Path, cache: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_runner"));
    command
        .args(args)
        .current_dir(cwd)
        .env("RUNNER_CACHE_DIR", cache)
        .env("DOCKER_CONFIG", cwd)
        .env_remove("RUNNER_REGISTRY_USERNAME")
        .env_remove("RUNNER_REGISTRY_PASSWORD")
        .env_remove("OPENAI_API_KEY")
        .env("RUST_BACKTRACE", "0");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("the runner binary starts")
}

/// A package directory of the bundled long_context scenario, `version` in its manifest.
fn package_dir(root: &Path, version: &str) -> PathBuf {
    let dir = root.join(format!("src-{version}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        repo().join("scenarios/long_context.rhai"),
        dir.join("long_context.rhai"),
    )
    .unwrap();
    let manifest = format!(
        "name = \"{REPOSITORY}\"\nversion = \"{version}\"\nentry = \"long_context.rhai\"\ninterface = \"bench:scenario@0.3.0\"\n\n[params.requests]\ndefault = 4\n"
    );
    std::fs::write(dir.join("scenario.toml"), manifest).unwrap();
    dir
}

/// Packs `dir` into `out`: the archive and the package digest `pack` printed.
fn pack(dir: &Path, out: &Path) -> (PathBuf, String) {
    let o = runner_in(out, out, &["pack", &dir.display().to_string()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let digest = text
        .lines()
        .find_map(|l| l.strip_prefix("sha256 "))
        .unwrap_or_else(|| panic!("no digest in {text}"));
    let archive = text.lines().find_map(|l| l.split(" into ").nth(1)).unwrap();
    (out.join(archive.trim()), digest.to_string())
}

/// What `runner push` printed: the package digest and the manifest digest.
struct Pushed {
    package: String,
    manifest: String,
}

fn push(work: &Path, archive: &Path, reference: &str) -> Pushed {
    let o = runner_in(
        work,
        work,
        &["push", &archive.display().to_string(), reference],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let digest_after = |label: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(label))
            .and_then(|rest| rest.trim_start().strip_prefix("sha256:"))
            .map(|rest| rest[..64].to_string())
            .unwrap_or_else(|| panic!("no {label} in {text}"))
    };
    Pushed {
        package: digest_after("package digest"),
        manifest: digest_after("manifest digest"),
    }
}

/// Runs a reference on the built-in simulator; returns the saved result.
fn run_ok(cwd: &Path, cache: &Path, reference: &str) -> serde_json::Value {
    let result = cwd.join("result.json");
    let _ = std::fs::remove_file(&result);
    let o = runner_in(
        cwd,
        cache,
        &[
            reference,
            "-p",
            "rate=500",
            "-q",
            "--save-result",
            "result.json",
        ],
    );
    assert!(o.status.success(), "{reference}: {}", stderr(&o));
    serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap()
}

/// A refused command: exit code 1, one line on stderr containing every `needle`, and no
/// run (no result written).
fn refused(cwd: &Path, cache: &Path, reference: &str, needles: &[&str]) -> String {
    let result = cwd.join("result.json");
    let _ = std::fs::remove_file(&result);
    let o = runner_in(
        cwd,
        cache,
        &[reference, "-q", "--save-result", "result.json"],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{reference}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    for needle in needles {
        assert!(err.contains(needle), "{needle:?} not in {err}");
    }
    assert!(!result.exists(), "{reference} ran");
    err
}

#[test]
fn a_pushed_package_runs_by_tag_and_digest_is_checked_and_runs_offline_once_pulled() {
    let Some(program) = registry_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let publisher = tmp.path().join("publisher");
    let elsewhere = tmp.path().join("elsewhere");
    for d in [&publisher, &elsewhere] {
        std::fs::create_dir_all(d).unwrap();
    }
    let mut registry = Registry::start(&program, tmp.path(), "");
    let base = format!("oci://{}/{REPOSITORY}", registry.host());

    let (archive, packed) = pack(&package_dir(&publisher, "1.0.0"), &publisher);
    let pushed = push(&publisher, &archive, &format!("{base}:1.0"));
    assert_eq!(pushed.package, packed, "push names the digest pack printed");
    assert_ne!(pushed.manifest, pushed.package);
    // The directory itself, packed on the way: the archive is reproducible, so the
    // registry gets the same manifest.
    let from_dir = push(
        &publisher,
        &publisher.join("src-1.0.0"),
        &format!("{base}:1.0-dir"),
    );
    assert_eq!(from_dir.package, pushed.package);
    assert_eq!(from_dir.manifest, pushed.manifest);

    // From another directory, with a cache of its own: by tag, by package digest, by
    // manifest digest. Each records the package digest it ran.
    let cache = tmp.path().join("cache");
    let by_package = format!("{base}@sha256:{}", pushed.package);
    let by_manifest = format!("{base}@sha256:{}", pushed.manifest);
    for reference in [
        format!("{base}:1.0"),
        by_package.clone(),
        by_manifest.clone(),
    ] {
        let result = run_ok(&elsewhere, &cache, &reference);
        assert_eq!(
            result["runner"]["scenario_digest"],
            packed.as_str(),
            "{reference}"
        );
        assert_eq!(result["completed"], 4, "{reference}");
    }
    let info = runner_in(&elsewhere, &cache, &["info", &by_package]);
    assert!(info.status.success(), "{}", stderr(&info));
    assert!(
        stdout(&info).contains(&format!("sha256 {packed}")),
        "{}",
        stdout(&info)
    );

    wrong_pins_are_refused(&registry, &elsewhere, &publisher, &base, &pushed);
    a_tampered_blob_is_refused(&registry, &elsewhere, &archive, &by_package);

    // Registry stopped: both pins run from the cache; a tag cannot be resolved.
    registry.stop();
    for reference in [&by_package, &by_manifest] {
        let result = run_ok(&elsewhere, &cache, reference);
        assert_eq!(result["runner"]["scenario_digest"], packed.as_str());
    }
    refused(
        &elsewhere,
        &cache,
        &format!("{base}:1.0"),
        &["cannot pull", ":1.0"],
    );
}

/// A pin the registry does not hold, and a digest tag moved to another package, are
/// refused in one line before anything runs (each with a fresh cache).
fn wrong_pins_are_refused(
    registry: &Registry,
    cwd: &Path,
    publisher: &Path,
    base: &str,
    pushed: &Pushed,
) {
    let unknown: String = pushed
        .package
        .chars()
        .map(|c| if c == '0' { '1' } else { '0' })
        .collect();
    let fresh = cwd.join("cache-unknown");
    refused(
        cwd,
        &fresh,
        &format!("{base}@sha256:{unknown}"),
        &["cannot pull", &unknown, "manifest unknown"],
    );

    // Someone moves the digest tag of 1.0.0 to another package: the pin still holds.
    let other_dir = package_dir(publisher, "1.1.0");
    let mut entry = std::fs::OpenOptions::new()
        .append(true)
        .open(other_dir.join("long_context.rhai"))
        .unwrap();
    writeln!(entry, "// 1.1.0").unwrap();
    let (other_archive, _) = pack(&other_dir, publisher);
    let other = push(publisher, &other_archive, &format!("{base}:1.1"));
    let link = registry.tag_link(&format!("sha256-{}", pushed.package));
    let original = std::fs::read(&link).unwrap();
    std::fs::write(&link, format!("sha256:{}", other.manifest)).unwrap();
    let fresh = cwd.join("cache-moved");
    refused(
        cwd,
        &fresh,
        &format!("{base}@sha256:{}", pushed.package),
        &[
            &format!("holds package sha256:{}", other.package),
            &format!("not the pinned sha256:{}", pushed.package),
        ],
    );
    std::fs::write(&link, original).unwrap();
}

/// A layer changed in the registry's storage is refused on pull (fresh cache); the blob is
/// put back afterwards.
fn a_tampered_blob_is_refused(registry: &Registry, cwd: &Path, archive: &Path, pinned: &str) {
    use sha2::Digest;
    let bytes = std::fs::read(archive).unwrap();
    let layer = hex::encode(sha2::Sha256::digest(&bytes));
    let blob = registry.blob(&layer);
    assert_eq!(
        std::fs::read(&blob).unwrap(),
        bytes,
        "the layer is the archive"
    );
    let mut tampered = bytes.clone();
    let middle = tampered.len() / 2;
    tampered[middle] ^= 0x55;
    std::fs::write(&blob, &tampered).unwrap();
    let fresh = cwd.join("cache-tampered");
    refused(
        cwd,
        &fresh,
        pinned,
        &[&format!("refusing blob sha256:{layer}")],
    );
    std::fs::write(&blob, &bytes).unwrap();
}

#[test]
fn verify_expect_refuses_a_repacked_modified_package() {
    let tmp = tempfile::tempdir().unwrap();
    let (archive, digest) = pack(&package_dir(tmp.path(), "1.0.0"), tmp.path());
    let expect = format!("sha256:{digest}");
    let a = archive.display().to_string();
    let ok = runner_in(tmp.path(), tmp.path(), &["verify", &a, "--expect", &expect]);
    assert!(ok.status.success(), "{}", stderr(&ok));

    // The same name and version, one line changed, packed again: a valid archive under
    // its own new digest, which is not the one the team was told.
    let dir = tmp.path().join("src-1.0.0");
    let mut entry = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("long_context.rhai"))
        .unwrap();
    writeln!(entry, "// one more line").unwrap();
    let out = tmp.path().join("repacked");
    std::fs::create_dir_all(&out).unwrap();
    let (repacked, new_digest) = pack(&dir, &out);
    assert_ne!(new_digest, digest);
    let plain = runner_in(
        tmp.path(),
        tmp.path(),
        &["verify", &repacked.display().to_string()],
    );
    assert!(plain.status.success(), "it verifies under its own digest");
    let o = runner_in(
        tmp.path(),
        tmp.path(),
        &[
            "verify",
            &repacked.display().to_string(),
            "--expect",
            &expect,
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("expected sha256:{digest}"))
            && err.contains(&format!("actual sha256:{new_digest}")),
        "{err}"
    );
    // Refused before any of its code is loaded: a package whose entry would not even
    // compile is named as the wrong package, not as a broken script.
    writeln!(entry, "fn describe( {{").unwrap();
    let broken_out = tmp.path().join("broken");
    std::fs::create_dir_all(&broken_out).unwrap();
    let (broken, _) = pack(&dir, &broken_out);
    let o = runner_in(
        tmp.path(),
        tmp.path(),
        &["verify", &broken.display().to_string(), "--expect", &expect],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("is not the expected package"), "{err}");
}

/// The registry's one user, and the bcrypt hash of its password as Distribution's htpasswd
/// file holds it (cost 4, so the registry checks it quickly on every request).
const USER: &str = "ci-user";
const PASSWORD: &str = "pw-Zq8-registry";
const PASSWORD_BCRYPT: &str = "$2b$04$it3qaAKruKkSAdU.jmHsK..87IiyhT5hwMuqVZolNUrwpVBADtSru";

#[test]
fn credentials_come_from_the_environment_or_the_docker_config_and_are_never_shown() {
    let Some(program) = registry_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let htpasswd = tmp.path().join("htpasswd");
    std::fs::write(&htpasswd, format!("{USER}:{PASSWORD_BCRYPT}\n")).unwrap();
    let auth = format!(
        "auth:\n  htpasswd:\n    realm: test\n    path: {}\n",
        htpasswd.display()
    );
    let registry = Registry::start(&program, tmp.path(), &auth);
    let reference = format!("oci://{}/{REPOSITORY}:1.0", registry.host());
    let (archive, digest) = pack(&package_dir(&work, "1.0.0"), &work);
    let a = archive.display().to_string();
    let cache = tmp.path().join("cache");

    let anonymous = runner_in(&work, &cache, &["push", &a, &reference]);
    assert_eq!(anonymous.status.code(), Some(1));
    let said = stderr(&anonymous);
    assert!(
        said.contains("401") || said.contains("Not authorized"),
        "{said}"
    );
    let wrong = [
        ("RUNNER_REGISTRY_USERNAME", USER),
        ("RUNNER_REGISTRY_PASSWORD", "not-it"),
    ];
    let refused = runner_with(&work, &cache, &["push", &a, &reference], &wrong);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));

    let env = [
        ("RUNNER_REGISTRY_USERNAME", USER),
        ("RUNNER_REGISTRY_PASSWORD", PASSWORD),
    ];
    let pushed = runner_with(&work, &cache, &["push", &a, &reference], &env);
    assert!(pushed.status.success(), "{}", stderr(&pushed));
    assert!(stdout(&pushed).contains(&digest));

    // `docker login`'s form: base64 of user:password under the registry's host:port.
    use base64::Engine as _;
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    let docker = tmp.path().join("docker");
    std::fs::create_dir_all(&docker).unwrap();
    let config = serde_json::json!({"auths": {registry.host(): {"auth": token}}});
    std::fs::write(docker.join("config.json"), config.to_string()).unwrap();
    let docker_env = [("DOCKER_CONFIG", docker.to_str().unwrap())];
    let info = runner_with(&work, &cache, &["info", &reference], &docker_env);
    assert!(info.status.success(), "{}", stderr(&info));
    assert!(stdout(&info).contains(&format!("sha256 {digest}")));
    let unauthorised = runner_in(&work, &tmp.path().join("cache-anon"), &["info", &reference]);
    assert_eq!(unauthorised.status.code(), Some(1));

    let shown: String = [&anonymous, &refused, &pushed, &info, &unauthorised]
        .iter()
        .map(|o| stdout(o) + stderr(o).as_str())
        .collect();
    for secret in [PASSWORD, "not-it", token.as_str()] {
        assert!(!shown.contains(secret), "{secret} shown: {shown}");
    }
}

/// Pushes to `reference` expecting a refusal: exit 1 and one line on stderr.
fn push_refused(work: &Path, archive: &Path, reference: &str) -> String {
    let o = runner_in(
        work,
        work,
        &["push", &archive.display().to_string(), reference],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    err
}

/// `runner pull` into the current directory, into a named directory and into a named
/// file: each the pushed archive byte for byte, its package digest printed; with the
/// registry gone, a pinned pull is answered from the cache.
fn pull_writes_the_checked_archive(
    work: &Path,
    cache: &Path,
    base: &str,
    archive: &Path,
    digest: &str,
) -> String {
    let pushed_bytes = std::fs::read(archive).unwrap();
    let name = archive.file_name().unwrap().to_str().unwrap().to_string();
    let o = runner_in(work, cache, &["pull", &format!("{base}:1.0")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!("package digest  sha256:{digest}")),
        "{}",
        stdout(&o)
    );
    assert_eq!(std::fs::read(work.join(&name)).unwrap(), pushed_bytes);
    let into = work.join("into");
    std::fs::create_dir_all(&into).unwrap();
    let pinned = format!("{base}@sha256:{digest}");
    let o = runner_in(work, cache, &["pull", &pinned, "--output", "into"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(into.join(&name)).unwrap(), pushed_bytes);
    let o = runner_in(
        work,
        cache,
        &["pull", &pinned, "-o", "into/mine.scenario.tar.gz"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(into.join("mine.scenario.tar.gz")).unwrap(),
        pushed_bytes
    );
    pinned
}

#[test]
fn pull_writes_the_archive_a_tag_moves_only_with_force_and_cache_repairs_are_said() {
    let Some(program) = registry_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (publisher, work) = (tmp.path().join("publisher"), tmp.path().join("work"));
    for d in [&publisher, &work] {
        std::fs::create_dir_all(d).unwrap();
    }
    let mut registry = Registry::start(&program, tmp.path(), "");
    let base = format!("oci://{}/{REPOSITORY}", registry.host());
    let (archive, digest) = pack(&package_dir(&publisher, "1.0.0"), &publisher);
    push(&publisher, &archive, &format!("{base}:1.0"));
    let cache = tmp.path().join("cache");
    let pinned = pull_writes_the_checked_archive(&work, &cache, &base, &archive, &digest);
    a_damaged_cached_archive_is_pulled_again_and_said(&work, &cache, &pinned, &archive, &digest);
    a_version_tag_moves_only_with_force(tmp.path(), &base, &archive, &digest);

    // Registry gone: a pinned pull is answered from the cache.
    registry.stop();
    let o = runner_in(
        &work,
        &cache,
        &["pull", &pinned, "-o", "offline.scenario.tar.gz"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(work.join("offline.scenario.tar.gz")).unwrap(),
        std::fs::read(&archive).unwrap()
    );
}

/// A flipped byte in the cached archive: the run pulls it again and says so in one line.
fn a_damaged_cached_archive_is_pulled_again_and_said(
    work: &Path,
    cache: &Path,
    pinned: &str,
    archive: &Path,
    digest: &str,
) {
    let kept = cache.join(format!("packages/sha256-{digest}.scenario.tar.gz"));
    let mut bytes = std::fs::read(&kept).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&kept, &bytes).unwrap();
    let o = runner_in(work, cache, &[pinned, "-p", "rate=500", "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said: Vec<String> = stderr(&o)
        .lines()
        .filter(|l| l.contains("damaged"))
        .map(String::from)
        .collect();
    assert_eq!(said.len(), 1, "{}", stderr(&o));
    assert!(
        said[0].contains(&format!("cached package sha256:{digest} was damaged"))
            && said[0].contains("pulled it again"),
        "{}",
        said[0]
    );
    assert_eq!(
        std::fs::read(&kept).unwrap(),
        std::fs::read(archive).unwrap()
    );
}

/// The same content again is fine; other content under the version tag is refused, naming
/// the tag and both digests, and the tag still holds the first package; `--force` moves it.
fn a_version_tag_moves_only_with_force(root: &Path, base: &str, archive: &Path, digest: &str) {
    let publisher = root.join("publisher");
    let tag = format!("{base}:1.0");
    push(&publisher, archive, &tag);
    let other_dir = package_dir(&publisher, "1.0.1");
    let entry = other_dir.join("long_context.rhai");
    let changed = std::fs::read_to_string(&entry).unwrap() + "// changed\n";
    std::fs::write(&entry, changed).unwrap();
    let (other, other_digest) = pack(&other_dir, &publisher);
    let err = push_refused(&publisher, &other, &tag);
    for needle in [&tag, digest, &other_digest, "--force"] {
        assert!(err.contains(needle), "{needle} not in {err}");
    }
    let held = |cache: &str| {
        let o = runner_in(
            root,
            &root.join(cache),
            &["pull", &tag, "-o", "check.scenario.tar.gz"],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    assert!(held("cache-before").contains(digest));
    let other = other.display().to_string();
    let o = runner_in(&publisher, &publisher, &["push", &other, &tag, "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(held("cache-after").contains(&other_digest));
}

#[test]
fn a_registry_that_cannot_be_reached_or_stays_silent_is_named_with_the_cause() {
    let tmp = tempfile::tempdir().unwrap();
    let (archive, _) = pack(&package_dir(tmp.path(), "1.0.0"), tmp.path());
    let closed = format!("oci://127.0.0.1:{}/{REPOSITORY}", free_port());
    let a = archive.display().to_string();
    for args in [
        vec!["pull".to_string(), format!("{closed}:1.0")],
        vec!["push".to_string(), a.clone(), format!("{closed}:1.0")],
        vec![format!("{closed}@sha256:{}", "ab".repeat(32))],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = runner_in(tmp.path(), tmp.path(), &args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(
            err.to_lowercase().contains("connection refused"),
            "{args:?}: {err}"
        );
    }
    // A registry that takes the connection and never answers: the read timeout, said.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let silent = format!("oci://{addr}/{REPOSITORY}:1.0");
    let held = std::thread::spawn(move || {
        let kept: Vec<_> = listener.incoming().take(1).collect();
        std::thread::sleep(Duration::from_secs(5));
        drop(kept);
    });
    let start = std::time::Instant::now();
    let o = runner_with(
        tmp.path(),
        tmp.path(),
        &["pull", &silent],
        &[("RUNNER_REGISTRY_TIMEOUT", "1")],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("timed out"), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    // Should the runner not have connected, this ends the holder's wait.
    let _ = std::net::TcpStream::connect(addr);
    held.join().unwrap();
}
