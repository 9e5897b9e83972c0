//! A throwaway Postgres cluster for a test run without `DATABASE_URL`: `initdb` and `pg_ctl`
//! (from the PATH, else the newest `/usr/lib/postgresql/*/bin`) make one in a temporary folder
//! and start it on a free port of 127.0.0.1, once per test process. A watchdog, started beside
//! it in its own process group, stops it and removes the folder once the test process is gone
//! (however it ended). Postgres refuses to run as root: as root, the cluster runs as the
//! `postgres` user (else `nobody`), which owns the folder.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::support::free_port;

/// The cluster's server URL (user `postgres`, trust authentication), started on first call.
pub fn url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(start)
}

const INSTALL: &str = "install the Postgres server package (Debian/Ubuntu: `apt-get install postgresql`), \
     or set DATABASE_URL to a server where this user may CREATE DATABASE";

fn start() -> String {
    let bin = bin_dir().unwrap_or_else(|| {
        panic!(
            "\n\nThese tests need Postgres: DATABASE_URL is not set, so they start a throwaway \
             cluster, but no `initdb` is on the PATH or in /usr/lib/postgresql/*/bin: {INSTALL}.\n"
        )
    });
    let owner = owner();
    let root = std::env::temp_dir().join(format!(
        "apigate-test-pg-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir(&root).unwrap_or_else(|e| panic!("creating {}: {e}", root.display()));
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(&root, Some(uid), Some(gid))
            .unwrap_or_else(|e| panic!("giving {} to uid {uid}: {e}", root.display()));
    }
    let data = root.join("data");
    let log = root.join("postgres.log");
    // Stopped and removed when this process is gone, even if it is killed.
    watchdog(&bin, &root, &data, owner);

    let initdb = run(
        Command::new(bin.join("initdb")).arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        ]),
        owner,
    );
    assert!(
        initdb.status.success(),
        "initdb failed in {}: {}",
        root.display(),
        String::from_utf8_lossy(&initdb.stderr)
    );
    let port = free_port();
    let options = format!(
        "-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={} \
         -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300",
        root.display()
    );
    // Output to files, not pipes: the server outlives pg_ctl and would hold a pipe open.
    let started = run(
        Command::new(bin.join("pg_ctl"))
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(&log)
            .args(["-w", "-t", "60", "-o", &options, "start"]),
        owner,
    );
    assert!(
        started.status.success(),
        "pg_ctl start failed ({}): {}\n{}",
        started.status,
        String::from_utf8_lossy(&started.stderr),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    eprintln!(
        "DATABASE_URL is not set: the tests use a throwaway Postgres cluster at {url} ({}), \
         removed when they end",
        root.display()
    );
    url
}

/// `command` run to completion as `owner` (when given), in its own process group so a
/// Ctrl-C aimed at the tests does not reach the server before the watchdog does.
fn run(command: &mut Command, owner: Option<(u32, u32)>) -> std::process::Output {
    if let Some((uid, gid)) = owner {
        command.uid(uid).gid(gid);
    }
    command
        .current_dir("/")
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", command.get_program()))
}

/// A shell that waits for this process to be gone, then stops the cluster and removes `root`.
/// Never waited for: it must outlive this process.
#[allow(clippy::zombie_processes)]
fn watchdog(bin: &Path, root: &Path, data: &Path, owner: Option<(u32, u32)>) {
    let script = r#"while [ -d "/proc/$1" ]; do sleep 1; done
"$2/pg_ctl" -D "$3" -m immediate stop >/dev/null 2>&1
rm -rf "$4""#;
    let mut command = Command::new("sh");
    command
        .args(["-c", script, "apigate-test-pg-watchdog"])
        .arg(std::process::id().to_string())
        .arg(bin)
        .arg(data)
        .arg(root)
        .current_dir("/")
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some((uid, gid)) = owner {
        command.uid(uid).gid(gid);
    }
    command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the cluster's watchdog: {e}"));
}

/// Where `initdb` and `pg_ctl` are: the PATH, else the newest /usr/lib/postgresql/N/bin.
fn bin_dir() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
    });
    if on_path.is_some() {
        return on_path;
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// Who runs the cluster: `None` for this process's user, or (uid, gid) of `postgres`, else
/// `nobody`, when this process runs as root (which initdb refuses).
fn owner() -> Option<(u32, u32)> {
    let euid = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX);
    if euid != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let find = |name: &str| {
        passwd.lines().find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.len() > 3 && fields[0] == name)
                .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
                .flatten()
        })
    };
    let owner = find("postgres").or_else(|| find("nobody"));
    assert!(
        owner.is_some(),
        "running as root, and initdb refuses root: create a `postgres` user (the Postgres \
         package does), or set DATABASE_URL"
    );
    owner
}
