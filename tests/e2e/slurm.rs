//! Sharded runs under a real Slurm: a one-node cluster (munged, slurmctld and slurmd on
//! loopback, all state in the test's temporary directory) runs deploy/slurm's array and
//! merge jobs against `runner sim`, and the merge equals a single process's run.
//!
//! Skipped with a reason when Slurm is not installed, unless RUNNER_REQUIRE_SLURM=1
//! (Debian: `apt-get install slurm-wlm munge`). The daemons run as the current user, which
//! must be root: slurmd starts every job as its submitting user.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::shards::{assert_merged_percentiles, json, write_scenario, OPEN_LOOP};
use crate::support::{free_port, records_in, repo, runner, stderr, stdout, SimProcess};

/// Shards of the array, numbered from 1 as many sites do (`--array=1-3`).
const SHARDS: u64 = 3;
/// The longest a submitted job may take to end: scheduling, a debug build loading its
/// tokenizer, the run itself (about a second) and the merge.
const JOB_LIMIT: Duration = Duration::from_secs(180);

/// The programs a one-node cluster needs, looked up on PATH and in the sbin directories
/// Debian installs the daemons in (not on a non-login PATH).
fn slurm_programs() -> Option<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/sbin", "/sbin"].map(PathBuf::from));
    [
        "munged",
        "slurmctld",
        "slurmd",
        "sbatch",
        "sinfo",
        "scontrol",
        "squeue",
        "scancel",
    ]
    .iter()
    .map(|name| dirs.iter().map(|d| d.join(name)).find(|p| p.is_file()))
    .collect()
}

/// One Slurm cluster on loopback; dropping it cancels its jobs and stops its daemons.
struct Cluster {
    root: PathBuf,
    conf: PathBuf,
    programs: Vec<PathBuf>,
    daemons: Vec<Child>,
    jobs: Vec<String>,
}

impl Cluster {
    fn program(&self, name: &str) -> &Path {
        self.programs
            .iter()
            .find(|p| p.file_name().is_some_and(|f| f == name))
            .unwrap_or_else(|| panic!("{name} was looked up"))
    }

    /// A Slurm client command against this cluster, run in its work directory (where jobs
    /// start and write their output files).
    fn command(&self, name: &str) -> Command {
        let mut cmd = Command::new(self.program(name));
        cmd.env("SLURM_CONF", &self.conf)
            .current_dir(self.root.join("work"));
        cmd
    }

    fn log(&self, name: &str) -> std::fs::File {
        std::fs::File::create(self.root.join("log").join(name)).expect("log file")
    }

    /// Starts munged, slurmctld and slurmd under `root` and waits until the node is idle.
    fn start(root: &Path, programs: Vec<PathBuf>) -> Cluster {
        for sub in ["munge", "state", "spool", "log", "work"] {
            std::fs::create_dir_all(root.join(sub)).expect("cluster directory");
        }
        let mut cluster = Cluster {
            root: root.to_path_buf(),
            conf: root.join("slurm.conf"),
            programs,
            daemons: Vec::new(),
            jobs: Vec::new(),
        };
        cluster.start_munge();
        std::fs::write(&cluster.conf, slurm_conf(root)).expect("slurm.conf");
        let host = hostname();
        let daemons = [
            ("slurmctld", vec!["-D", "-i"]),
            ("slurmd", vec!["-D", "-N", host.as_str()]),
        ];
        for (name, args) in daemons {
            let child = Command::new(cluster.program(name))
                .args(args)
                .env("SLURM_CONF", &cluster.conf)
                .stdout(cluster.log(&format!("{name}.out")))
                .stderr(cluster.log(&format!("{name}.log")))
                .spawn()
                .unwrap_or_else(|e| panic!("{name} starts: {e}"));
            cluster.daemons.push(child);
        }
        cluster.wait_idle();
        cluster
    }

    /// munged with its own key and socket. It refuses a socket in a directory that not
    /// everyone may enter, and a key that others may read.
    fn start_munge(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        let munge = self.root.join("munge");
        let mut key = vec![0u8; 1024];
        let mut random = std::fs::File::open("/dev/urandom").expect("/dev/urandom");
        std::io::Read::read_exact(&mut random, &mut key).expect("random key");
        let key_file = munge.join("munge.key");
        std::fs::write(&key_file, key).expect("munge key");
        let mode = |path: &Path, mode| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod")
        };
        mode(&key_file, 0o400);
        mode(&self.root, 0o755);
        mode(&munge, 0o755);
        let arg = |flag: &str, file: &str| format!("--{flag}={}", munge.join(file).display());
        let child = Command::new(self.program("munged"))
            .arg("--foreground")
            .args([
                arg("socket", "munge.socket"),
                arg("key-file", "munge.key"),
                arg("pid-file", "munged.pid"),
                arg("log-file", "munged.log"),
                arg("seed-file", "munged.seed"),
            ])
            .stdout(self.log("munged.out"))
            .stderr(self.log("munged.log"))
            .spawn()
            .expect("munged starts");
        self.daemons.push(child);
        let socket = munge.join("munge.socket");
        self.wait("munged's socket", Duration::from_secs(20), |_| {
            socket.exists()
        });
    }

    /// Polls `cond` every 100 ms; on timeout, panics with the daemons' logs.
    fn wait(&self, what: &str, limit: Duration, mut cond: impl FnMut(&Cluster) -> bool) {
        let start = Instant::now();
        while !cond(self) {
            if start.elapsed() > limit {
                panic!("timed out waiting for {what}\n{}", self.logs());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn wait_idle(&self) {
        self.wait("the node to be idle", Duration::from_secs(60), |c| {
            let out = c.command("sinfo").args(["-h", "-o", "%t"]).output();
            out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle")
        });
    }

    /// The last lines of every daemon's log, for a failure message.
    fn logs(&self) -> String {
        let mut text = String::new();
        for name in ["munged.log", "slurmctld.log", "slurmd.log"] {
            let log = std::fs::read_to_string(self.root.join("log").join(name)).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(15)..].join("\n");
            text.push_str(&format!("--- {name}\n{tail}\n"));
        }
        text
    }

    /// `sbatch --parsable ARGS` with extra environment (sbatch passes the submitting
    /// environment to the job); returns the job id.
    fn sbatch(&mut self, args: &[&str], env: &[(&str, &str)]) -> String {
        let out = self
            .command("sbatch")
            .arg("--parsable")
            .args(args)
            .env_remove("OPENAI_API_KEY")
            .envs(env.iter().copied())
            .output()
            .expect("sbatch runs");
        assert!(
            out.status.success(),
            "sbatch {args:?}: {}\n{}",
            stderr(&out),
            self.logs()
        );
        let id = stdout(&out).trim().to_string();
        assert!(id.bytes().all(|b| b.is_ascii_digit()), "job id `{id}`");
        self.jobs.push(id.clone());
        id
    }

    /// Every task of a job (one for a plain job) as `scontrol show job -o` prints it:
    /// field name to value.
    fn job(&self, id: &str) -> Vec<std::collections::HashMap<String, String>> {
        let out = self
            .command("scontrol")
            .args(["-o", "show", "job", id])
            .output()
            .expect("scontrol runs");
        stdout(&out)
            .lines()
            .map(|line| {
                line.split_whitespace()
                    .filter_map(|field| field.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            })
            .collect()
    }

    /// Waits until every task of job `id` has ended; returns (task, JobState, ExitCode)
    /// sorted by array task id.
    fn wait_ended(&self, id: &str) -> Vec<(u64, String, String)> {
        const ENDED: [&str; 6] = [
            "COMPLETED",
            "FAILED",
            "CANCELLED",
            "TIMEOUT",
            "NODE_FAIL",
            "OUT_OF_MEMORY",
        ];
        let mut tasks = Vec::new();
        self.wait(&format!("job {id} to end"), JOB_LIMIT, |c| {
            tasks = c.job(id);
            !tasks.is_empty()
                && tasks
                    .iter()
                    .all(|t| ENDED.contains(&t["JobState"].as_str()))
        });
        let mut ended: Vec<(u64, String, String)> = tasks
            .iter()
            .map(|t| {
                let task = t
                    .get("ArrayTaskId")
                    .map_or(0, |v| v.parse().expect("task id"));
                (task, t["JobState"].clone(), t["ExitCode"].clone())
            })
            .collect();
        ended.sort();
        ended
    }

    /// A job's output file in the work directory (the scripts' `--output` patterns).
    fn output(&self, file: &str) -> String {
        let path = self.root.join("work").join(file);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Jobs first, so no runner outlives the test in a slurmstepd; then the daemons.
        if !self.jobs.is_empty() {
            let _ = self.command("scancel").args(&self.jobs).output();
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(10) {
                let out = self.command("squeue").args(["-h", "-o", "%i"]).output();
                if out.map_or(true, |o| o.stdout.is_empty()) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        for daemon in self.daemons.iter_mut().rev() {
            let _ = daemon.kill();
            let _ = daemon.wait();
        }
    }
}

/// This machine's short host name: slurmctld runs only on the host its SlurmctldHost
/// names, and compares the name without its domain.
fn hostname() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("host name");
    name.trim()
        .split('.')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// A one-node cluster on loopback ports that were free, with no cgroups and no systemd
/// (a container): processes tracked through /proc, no task binding, no accounting.
fn slurm_conf(root: &Path) -> String {
    let host = hostname();
    let at = |p: &str| root.join(p).display().to_string();
    let cpus = 8; // More than the shards plus the merge, whatever the machine has.
    let controller_port = free_port();
    let node_port = std::iter::repeat_with(free_port)
        .take(100)
        .find(|&p| p != controller_port)
        .expect("a second free port");
    [
        "ClusterName=runner-test".to_string(),
        format!("SlurmctldHost={host}(127.0.0.1)"),
        format!("SlurmctldPort={controller_port}"),
        format!("SlurmdPort={node_port}"),
        "SlurmUser=root".into(),
        "AuthType=auth/munge".into(),
        "CredType=cred/munge".into(),
        format!("AuthInfo=socket={}", at("munge/munge.socket")),
        format!("StateSaveLocation={}", at("state")),
        format!("SlurmdSpoolDir={}", at("spool")),
        format!("SlurmctldPidFile={}", at("slurmctld.pid")),
        format!("SlurmdPidFile={}", at("slurmd.pid")),
        "ProctrackType=proctrack/linuxproc".into(),
        "TaskPlugin=task/none".into(),
        "JobAcctGatherType=jobacct_gather/none".into(),
        "AccountingStorageType=accounting_storage/none".into(),
        "MpiDefault=none".into(),
        "MailProg=/bin/true".into(),
        "SelectType=select/cons_tres".into(),
        "SelectTypeParameters=CR_CPU".into(),
        // The node's CPUs as configured here, not as counted on the hardware.
        "SlurmdParameters=config_overrides".into(),
        "ReturnToService=2".into(),
        format!("NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN"),
        format!("PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP"),
    ]
    .join("\n")
        + "\n"
}

/// What the complete array passes on to every shard's `runner run`, after the script's
/// three arguments; the single run takes the same, so equal digests prove they arrived.
const SHARD_ARGS: [&str; 6] = ["-p", "requests=120", "-p", "rate=200", "--seed", "9"];

/// The array and its merge, submitted as deploy/slurm/README.md says, with `runner_args`
/// after the script's own; returns both ids.
fn submit_sharded_run(
    cluster: &mut Cluster,
    scenario: &str,
    target: &str,
    env: &[(&str, &str)],
    runner_args: &[&str],
) -> (String, String) {
    submit_array(cluster, SHARDS, scenario, target, env, runner_args)
}

/// [`submit_sharded_run`] with an array of `shards` tasks.
fn submit_array(
    cluster: &mut Cluster,
    shards: u64,
    scenario: &str,
    target: &str,
    env: &[(&str, &str)],
    runner_args: &[&str],
) -> (String, String) {
    let scripts = repo().join("deploy/slurm");
    let shards_script = scripts.join("runner-shards.sbatch").display().to_string();
    let merge_script = scripts.join("runner-merge.sbatch").display().to_string();
    // Far enough ahead for the scheduler to start every task and for a debug build to
    // load its tokenizer.
    let start_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        + 5;
    let array_flag = format!("--array=1-{shards}");
    let mut env = env.to_vec();
    env.push(("RUNNER", env!("CARGO_BIN_EXE_runner")));
    let start_at = start_at.to_string();
    let mut args = vec![
        array_flag.as_str(),
        &shards_script,
        scenario,
        target,
        &start_at,
    ];
    args.extend_from_slice(runner_args);
    let array = cluster.sbatch(&args, &env);
    let dependency = format!("--dependency=afterany:{array}");
    let results = format!("results/{array}");
    let merge = cluster.sbatch(&[&dependency, &merge_script, &results], &env);
    (array, merge)
}

/// The programs, when this machine can run a cluster: installed, and the test is root.
/// Otherwise None after saying why (or a failure when RUNNER_REQUIRE_SLURM=1).
fn slurm_or_skip() -> Option<Vec<PathBuf>> {
    use std::os::unix::fs::MetadataExt;
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let why = match slurm_programs() {
        Some(programs) if root => return Some(programs),
        Some(_) => "the test is not running as root (slurmd starts jobs as their user)",
        None => "Slurm is not installed (apt-get install slurm-wlm munge)",
    };
    assert!(
        std::env::var("RUNNER_REQUIRE_SLURM").as_deref() != Ok("1"),
        "RUNNER_REQUIRE_SLURM=1 but {why}"
    );
    eprintln!("SKIPPED: {why}");
    None
}

#[test]
fn slurm_array_shards_merge_and_a_failed_shard_is_named() {
    let Some(programs) = slurm_or_skip() else {
        return;
    };
    let _quiet = crate::support::exclusive();
    let started = Instant::now();
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut cluster = Cluster::start(tmp.path(), programs);
    let sim = SimProcess::start(&[]);
    let scenario = write_scenario(tmp.path(), "open.rhai", OPEN_LOOP);

    let single = tmp.path().join("single");
    let single_dir = single.display().to_string();
    let mut args = vec![
        scenario.as_str(),
        "--target",
        &sim.url,
        "-q",
        "--output",
        &single_dir,
    ];
    args.extend_from_slice(&SHARD_ARGS);
    let out = runner(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let single_result = json(&single.join("result.json"));

    check_complete_array(&mut cluster, &scenario, &sim.url, &single_result);
    check_failed_shard(&mut cluster, &scenario, &sim.url);
    eprintln!(
        "slurm: cluster, single run, full and failed arrays in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// All tasks succeed: task t of 1..=N wrote shard t-1, and the merge is the single run.
fn check_complete_array(
    cluster: &mut Cluster,
    scenario: &str,
    target: &str,
    single: &serde_json::Value,
) {
    let (array, merge) = submit_sharded_run(cluster, scenario, target, &[], &SHARD_ARGS);
    let merge_end = cluster.wait_ended(&merge);
    let tasks = cluster.wait_ended(&array);
    let outputs = |c: &Cluster| {
        (1..=SHARDS)
            .map(|t| c.output(&format!("slurm-{array}_{t}.out")))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let expected: Vec<(u64, String, String)> = (1..=SHARDS)
        .map(|t| (t, "COMPLETED".into(), "0:0".into()))
        .collect();
    assert_eq!(tasks, expected, "{}", outputs(cluster));
    assert_eq!(
        merge_end,
        [(0, "COMPLETED".to_string(), "0:0".to_string())],
        "{}",
        cluster.output(&format!("slurm-{merge}.out"))
    );
    for t in 1..=SHARDS {
        let text = cluster.output(&format!("slurm-{array}_{t}.out"));
        let shard = format!("shard {}/{SHARDS} (array task {t})", t - 1);
        assert!(text.contains(&shard), "{text}");
    }

    let results = cluster.root.join("work/results").join(&array);
    let dirs: Vec<PathBuf> = (0..SHARDS)
        .map(|i| results.join(format!("shard-{i}")))
        .collect();
    for (i, dir) in dirs.iter().enumerate() {
        let recs = records_in(dir);
        assert!(!recs.is_empty(), "shard {i}");
        assert!(recs
            .iter()
            .all(|r| r["index"].as_u64().expect("index") % SHARDS == i as u64));
    }
    let merged = json(&results.join("merged/result.json"));
    let digest = single["runner"]["request_digest"].as_str().expect("digest");
    assert_eq!(merged["runner"]["request_digest"].as_str(), Some(digest));
    let report = cluster.output(&format!("slurm-{merge}.out"));
    assert!(report.contains(&format!("Request stream digest (sha256): {digest}")));
    assert_eq!(
        merged["completed"], 120,
        "-p requests=120 reached every shard"
    );
    assert_eq!(merged["runner"]["seed"], 9, "--seed 9 reached every shard");
    for key in [
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
    ] {
        assert_eq!(merged[key], single[key], "{key}");
    }
    let compared = assert_merged_percentiles(&merged, &dirs);
    eprintln!("slurm: request digest, single run = merged array: {digest}");
    eprintln!(
        "slurm: {} requests; shards' start spread {} ms",
        merged["completed"], merged["shards"]["start_spread_ms"]
    );
    for (key, got, raw) in compared {
        eprintln!("slurm: {key}: merged {got:.4} vs all shards' records {raw:.4}");
    }
}

/// Task 2 (shard 1) is pointed at a port nothing listens on: it fails, and the merge runs
/// anyway, names the missing shard and fails.
fn check_failed_shard(cluster: &mut Cluster, scenario: &str, target: &str) {
    let refused = format!("http://127.0.0.1:{}", free_port());
    let env = [("RUNNER_TARGET_TASK_2", refused.as_str())];
    let (array, merge) = submit_sharded_run(cluster, scenario, target, &env, &[]);
    let merge_end = cluster.wait_ended(&merge);
    let tasks = cluster.wait_ended(&array);
    let states: Vec<(u64, &str)> = tasks.iter().map(|(t, s, _)| (*t, s.as_str())).collect();
    assert_eq!(
        states,
        [(1, "COMPLETED"), (2, "FAILED"), (3, "COMPLETED")],
        "{}",
        cluster.output(&format!("slurm-{array}_2.out"))
    );
    let failed = cluster.output(&format!("slurm-{array}_2.out"));
    assert!(failed.contains("cannot reach the target"), "{failed}");

    let text = cluster.output(&format!("slurm-{merge}.out"));
    assert_eq!(
        merge_end,
        [(0, "FAILED".to_string(), "1:0".to_string())],
        "{text}"
    );
    assert_eq!(text.trim().lines().count(), 1, "{text}");
    assert!(text.contains("shard 1/3 is missing"), "{text}");
    let results = cluster.root.join("work/results").join(&array);
    assert!(!results.join("merged").exists());
    eprintln!(
        "slurm: failed task 2: merge job {merge} FAILED 1:0: {}",
        text.trim()
    );
}

/// agentic_coding as four array tasks: each runs whole sessions, and the merge is the
/// single process's run (digest, counts and token totals).
#[test]
fn slurm_array_runs_whole_agent_sessions_and_merges_to_the_single_run() {
    let Some(programs) = slurm_or_skip() else {
        return;
    };
    let _quiet = crate::support::exclusive();
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut cluster = Cluster::start(tmp.path(), programs);
    let sim = SimProcess::start(&[]);
    let scenario = crate::support::scenario("agentic_coding.rhai");
    let args = [
        "--api",
        "chat",
        "-p",
        "sessions=8",
        "-p",
        "rate=5",
        "-p",
        "turns_min=3",
        "-p",
        "turns_max=5",
        "-p",
        "tool_latency_min=0.05",
        "-p",
        "tool_latency_max=0.3",
        "-p",
        "system_tokens=500",
        "-p",
        "repo_tokens=1000",
        "-p",
        "result_tokens_max=300",
        "-p",
        "output_tokens=32",
    ];
    let single = tmp.path().join("single");
    let single_dir = single.display().to_string();
    let mut all = vec![
        scenario.as_str(),
        "--target",
        &sim.url,
        "-q",
        "--output",
        &single_dir,
    ];
    all.extend_from_slice(&args);
    let out = runner(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    let single = json(&single.join("result.json"));

    let (array, merge) = submit_array(&mut cluster, 4, &scenario, &sim.url, &[], &args);
    let merge_end = cluster.wait_ended(&merge);
    let tasks = cluster.wait_ended(&array);
    assert!(
        tasks
            .iter()
            .all(|(_, state, code)| state == "COMPLETED" && code == "0:0"),
        "{tasks:?}"
    );
    assert_eq!(merge_end, [(0, "COMPLETED".to_string(), "0:0".to_string())]);
    let results = cluster.root.join("work/results").join(&array);
    let mut owner = std::collections::HashMap::new();
    for i in 0..4 {
        let dir = results.join(format!("shard-{i}"));
        let records = if dir.join("requests.jsonl").exists() {
            records_in(&dir)
        } else {
            vec![]
        };
        for r in records {
            let id = r["session"].as_str().expect("a session").to_string();
            assert_eq!(
                *owner.entry(id.clone()).or_insert(i),
                i,
                "session {id} split"
            );
        }
    }
    assert_eq!(owner.len(), 8, "every session ran in one shard");
    let merged = json(&results.join("merged/result.json"));
    let digest = single["runner"]["request_digest"].as_str().expect("digest");
    assert_eq!(merged["runner"]["request_digest"].as_str(), Some(digest));
    for key in [
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
    ] {
        assert_eq!(merged[key], single[key], "{key}");
    }
    eprintln!(
        "slurm: agentic_coding, 4 array tasks merged = single run: {} requests, digest {digest}",
        merged["completed"]
    );
}
