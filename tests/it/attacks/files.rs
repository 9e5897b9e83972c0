//! Issue 41, items 8 and 15: the folders `apigate dev` reads and writes for the agent.
//! `--upload-dir`: a subfolder swapped for a symbolic link to an outside folder while the agent
//! uploads through it, a hard link to an outside file, and a multipart file name holding a
//! bidirectional override. `--download-dir`: many binary downloads past its byte cap, and files
//! older than `--response-ttl`. Each runs against the real `apigate dev` binary and a real
//! upstream that records what it received.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::support::{KEY, Upstream, call, mcp_client, poll, spawn_dev, spec_path};

/// What the outside file holds: it must never reach the upstream.
const OUTSIDE: &[u8] = b"OUTSIDE-SECRET-never-upload-me";
/// What the file inside the upload folder holds.
const INSIDE: &[u8] = b"inside-the-upload-folder";

/// Swaps `a` and `b` atomically (`renameat2(RENAME_EXCHANGE)`): one of the two names always
/// exists, so the race has no gap where the name is missing.
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let a = CString::new(a.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    let b = CString::new(b.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: two NUL-terminated paths, valid for the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The bodies the upstream received that carry the outside file's bytes.
fn leaked(upstream: &Upstream) -> usize {
    upstream
        .requests()
        .iter()
        .filter(|r| r.body.windows(OUTSIDE.len()).any(|w| w == OUTSIDE))
        .count()
}

/// A subfolder of the upload folder is swapped, in a tight loop, with a symbolic link to an
/// outside folder holding a file of the same name, while the agent uploads `sub/file` 500
/// times: the upstream never receives the outside file. (Before the fix the name was checked,
/// then opened by path, and `O_NOFOLLOW` guarded only the last component: the outside file
/// went out.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_folder_swapped_for_a_link_never_uploads_an_outside_file() {
    let upstream = Upstream::start().await;
    let root = tempfile::tempdir().unwrap();
    let (dir, outside) = (root.path().join("uploads"), root.path().join("outside"));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(dir.join("sub/file"), INSIDE).unwrap();
    std::fs::write(outside.join("file"), OUTSIDE).unwrap();
    // `swap` is the symbolic link the loop exchanges with `sub`.
    std::os::unix::fs::symlink(&outside, dir.join("swap")).unwrap();
    let (spec, up, dir_text) = (
        spec_path("uploads-3.0.json"),
        upstream.url(),
        dir.display().to_string(),
    );
    let (_dev, url) = spawn_dev(&spec, Some(&up), &["--upload-dir", &dir_text], &[]).await;
    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicUsize::new(0));
    let swapper = {
        let (stop, swaps, dir) = (stop.clone(), swaps.clone(), dir.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                exchange(&dir.join("sub"), &dir.join("swap")).expect("renameat2 exchange");
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    let tries = 500;
    for _ in 0..tries {
        let args = json!({"operationId": "uploadBlob", "body": {"file": "sub/file"}});
        let (err, r) = call(&client, "api_execute", args).await;
        let outcome = if err {
            r["violations"][0]["message"]
                .as_str()
                .unwrap_or("refused")
                .chars()
                .take(60)
                .collect()
        } else {
            "sent".to_string()
        };
        *outcomes.entry(outcome).or_default() += 1;
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    let leaks = leaked(&upstream);
    assert_eq!(
        leaks,
        0,
        "{leaks} of {tries} uploads sent the outside file ({} swaps; outcomes {outcomes:?})",
        swaps.load(Ordering::Relaxed)
    );
    // The race really ran: some uploads went out (the folder was in place) and the swapper
    // swapped many times during them.
    assert!(outcomes.get("sent").is_some_and(|n| *n > 0), "{outcomes:?}");
    assert!(swaps.load(Ordering::Relaxed) > tries, "{outcomes:?}");
}

/// A hard link inside the upload folder to an outside file is refused (the name stays
/// inside; the file does not), and a multipart file name holding U+202E (which makes
/// `gpj.exe` print as `exe.jpg`) is refused as control characters are. Nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hard_link_out_and_a_bidi_file_name_are_refused() {
    let upstream = Upstream::start().await;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("uploads");
    std::fs::create_dir_all(&dir).unwrap();
    let outside = root.path().join("secret.txt");
    std::fs::write(&outside, OUTSIDE).unwrap();
    std::fs::hard_link(&outside, dir.join("innocent.txt")).unwrap();
    std::fs::write(dir.join("ok.txt"), INSIDE).unwrap();
    let (spec, up, dir_text) = (
        spec_path("uploads-3.0.json"),
        upstream.url(),
        dir.display().to_string(),
    );
    let (_dev, url) = spawn_dev(&spec, Some(&up), &["--upload-dir", &dir_text], &[]).await;
    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;

    let refused = |args: Value, pointer: &'static str, needle: &'static str| {
        let client = &client;
        async move {
            let (err, r) = call(client, "api_execute", args.clone()).await;
            assert!(err, "{args} was accepted: {r}");
            assert_eq!(r["code"], "INVALID_ARGUMENTS", "{r}");
            assert_eq!(r["violations"][0]["pointer"], pointer, "{r}");
            let message = r["violations"][0]["message"].as_str().unwrap_or_default();
            assert!(message.contains(needle), "{needle:?} not in {r}");
        }
    };
    refused(
        json!({"operationId": "uploadBlob", "body": {"file": "innocent.txt"}}),
        "/body/file",
        "hard link",
    )
    .await;
    for name in ["invoice\u{202e}fdp.exe", "a\u{2066}b.pdf", "x\u{200f}.png"] {
        refused(
            json!({"operationId": "uploadDocument", "body": {"title": "t",
                "file": {"base64": "aGk=", "filename": name}}}),
            "/body/file/filename",
            "bidirectional",
        )
        .await;
    }
    // The same names as files in the upload folder are refused too.
    std::fs::write(dir.join("evil\u{202e}txt.exe"), INSIDE).unwrap();
    refused(
        json!({"operationId": "uploadBlob", "body": {"file": "evil\u{202e}txt.exe"}}),
        "/body/file",
        "refused",
    )
    .await;
    assert!(upstream.requests().is_empty(), "nothing may be sent");
    assert_eq!(leaked(&upstream), 0);
    // An ordinary file still goes out.
    let (err, r) = call(
        &client,
        "api_execute",
        json!({"operationId": "uploadBlob", "body": {"file": "ok.txt"}}),
    )
    .await;
    assert!(!err, "{r}");
    assert_eq!(upstream.requests().len(), 1);
}

/// The files apigate wrote to the download folder (`apigate-*`): (name, bytes), oldest name
/// first is not implied.
fn downloads(dir: &Path) -> Vec<(String, u64)> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("apigate-"))
        .map(|e| {
            let len = e.metadata().map(|m| m.len()).unwrap_or(0);
            (e.file_name().to_string_lossy().into_owned(), len)
        })
        .collect()
}

/// Forty 30 KB downloads into a folder capped at 100 KB (`--max-download-bytes`): the folder
/// never holds more than the cap (the oldest files go first), a download larger than the cap
/// is refused with a message naming the flag, a file the operator put there is never
/// touched, and every file apigate wrote is removed once `--response-ttl` has passed. (Before
/// the fix the folder grew by every download and nothing was ever removed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_download_folder_is_bounded_and_cleaned() {
    use axum::response::IntoResponse;
    const LEN: usize = 30_000;
    async fn archive(uri: axum::http::Uri) -> axum::response::Response {
        let len = if uri.path().ends_with("/huge") {
            150_000
        } else {
            LEN
        };
        let zip = [(axum::http::header::CONTENT_TYPE, "application/zip")];
        // Not text: every byte value, NUL included.
        let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        (zip, bytes).into_response()
    }
    let upstream = crate::support::serve_app(axum::Router::new().fallback(archive)).await;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("downloads");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("operator-notes.txt"), b"mine").unwrap();
    let (spec, up, dir_text) = (
        spec_path("downloads.json"),
        format!("http://{upstream}/v1"),
        dir.display().to_string(),
    );
    let extra = [
        "--download-dir",
        &dir_text,
        "--max-download-bytes",
        "100000",
        "--response-ttl",
        "4s",
    ];
    let (_dev, url) = spawn_dev(&spec, Some(&up), &extra, &[]).await;
    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;
    let download = |name: &'static str| {
        let client = &client;
        async move {
            let args = json!({"operationId": "downloadArchive", "pathParams": {"name": name}});
            let (err, r) = call(client, "api_execute", args).await;
            assert!(!err, "{r}");
            r["body"].clone()
        }
    };
    let mut last = String::new();
    for _ in 0..40 {
        let body = download("release").await;
        last = body["file"].as_str().unwrap_or_default().to_string();
        assert!(!last.is_empty(), "{body}");
        let total: u64 = downloads(&dir).iter().map(|(_, n)| n).sum();
        assert!(total <= 100_000, "{total} bytes in the folder: {body}");
    }
    assert!(Path::new(&last).exists(), "the newest download was removed");
    assert_eq!(downloads(&dir).len(), 3, "{:?}", downloads(&dir));
    let huge = download("huge").await;
    assert!(huge.get("file").is_none(), "{huge}");
    let error = huge["fileError"].as_str().unwrap_or_default();
    assert!(error.contains("--max-download-bytes"), "{huge}");
    assert_eq!(downloads(&dir).len(), 3, "{:?}", downloads(&dir));
    // Past the time to live, every file apigate wrote goes; the operator's stays.
    poll(
        "downloads older than --response-ttl are removed",
        std::time::Duration::from_secs(30),
        std::time::Duration::from_millis(200),
        || async { downloads(&dir).is_empty().then_some(()) },
    )
    .await;
    assert_eq!(
        std::fs::read(dir.join("operator-notes.txt")).unwrap(),
        b"mine"
    );
}
