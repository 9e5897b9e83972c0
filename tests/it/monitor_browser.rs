//! The monitor's dashboard in a real browser: headless Chromium (Debian's `chromium`) opens
//! the page through the link `apigate monitor` prints (its secret becomes an HttpOnly
//! cookie), an MCP `api_execute` DELETE sent to apigate (gate on, pointing at the monitor)
//! appears live as a pending approval (no reload), a mouse click on Approve releases the
//! waiting tool call, which then reaches the recording upstream; a typed reason and Deny
//! block the next one. Screenshots go to `<target dir>/test-artifacts/`.
//!
//! Chromium is driven over the DevTools protocol with a minimal WebSocket client below (no
//! extra crates). Without Chromium the test fails and says how to install it.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use apigate::monitor::{self, ServerConfig};
use rmcp::service::{Peer, RoleClient};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};

use crate::support::{Server, Upstream, call, engine_args, spec_path};

fn find_chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "the dashboard browser test needs Chromium, which was not found in PATH. Install it \
         with `apt-get update && apt-get install -y chromium` (Debian; `chromium-browser` on \
         Ubuntu), or point CHROMIUM=/path/to/chrome at a Chrome/Chromium binary."
    );
}

fn artifacts_dir() -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let dir = tmp
        .parent()
        .map(|p| p.join("test-artifacts"))
        .unwrap_or_else(|| tmp.join("test-artifacts"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts headless Chromium on `url`; returns the process and its DevTools port.
async fn launch(url: &str, profile: &std::path::Path) -> (Child, u16) {
    let mut child = Command::new(find_chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--window-size=1280,1100",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("cannot start chromium");
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let mut seen = Vec::new();
    let port = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.split("DevTools listening on ws://").nth(1) {
                let authority = rest.split('/').next().unwrap();
                return authority
                    .rsplit(':')
                    .next()
                    .unwrap()
                    .parse::<u16>()
                    .unwrap();
            }
            seen.push(line);
        }
        panic!(
            "chromium exited before DevTools was ready:\n{}",
            seen.join("\n")
        );
    })
    .await
    .expect("chromium did not start its DevTools server within 60 s");
    // Keep draining stderr so Chromium never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, port)
}

/// A minimal WebSocket client (RFC 6455): text frames, masking, ping/pong, fragments.
struct WebSocket {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl WebSocket {
    async fn connect(url: &str) -> Self {
        let rest = url.strip_prefix("ws://").expect("a ws:// URL");
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let mut stream = TcpStream::connect(authority).await.unwrap();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: YXBpZ2F0ZS1tb25pdG9yIQ==\r\n\
             Sec-WebSocket-Version: 13\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut buf = Vec::with_capacity(4096);
        let end = loop {
            let n = stream.read_buf(&mut buf).await.unwrap();
            assert!(n > 0, "DevTools closed the connection during the handshake");
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        assert!(
            head.starts_with("HTTP/1.1 101"),
            "handshake refused: {head}"
        );
        buf.drain(..end);
        Self { stream, buf }
    }

    async fn fill(&mut self, n: usize) {
        while self.buf.len() < n {
            self.buf.reserve(64 * 1024);
            let read = self.stream.read_buf(&mut self.buf).await.unwrap();
            assert!(read > 0, "DevTools closed the connection");
        }
    }

    async fn send_frame(&mut self, opcode: u8, payload: &[u8]) {
        let mut frame = vec![0x80 | opcode];
        let len = payload.len();
        if len < 126 {
            frame.push(0x80 | len as u8);
        } else if len <= u16::MAX as usize {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(len as u16).to_be_bytes());
        } else {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(len as u64).to_be_bytes());
        }
        let mask = [0x37, 0xfa, 0x21, 0x3d];
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.stream.write_all(&frame).await.unwrap();
    }

    async fn send_text(&mut self, text: &str) {
        self.send_frame(0x1, text.as_bytes()).await;
    }

    async fn recv_text(&mut self) -> String {
        let mut message = Vec::new();
        loop {
            self.fill(2).await;
            let (b0, b1) = (self.buf[0], self.buf[1]);
            let (fin, opcode, masked) = (b0 & 0x80 != 0, b0 & 0x0f, b1 & 0x80 != 0);
            let (mut len, mut offset) = (u64::from(b1 & 0x7f), 2usize);
            if len == 126 {
                self.fill(4).await;
                len = u64::from(u16::from_be_bytes([self.buf[2], self.buf[3]]));
                offset = 4;
            } else if len == 127 {
                self.fill(10).await;
                len = u64::from_be_bytes(self.buf[2..10].try_into().unwrap());
                offset = 10;
            }
            let mask_len = if masked { 4 } else { 0 };
            let total = offset + mask_len + len as usize;
            self.fill(total).await;
            let mut payload = self.buf[offset + mask_len..total].to_vec();
            if masked {
                let mask = self.buf[offset..offset + 4].to_vec();
                for (i, b) in payload.iter_mut().enumerate() {
                    *b ^= mask[i % 4];
                }
            }
            self.buf.drain(..total);
            match opcode {
                0x0..=0x2 => {
                    message.extend_from_slice(&payload);
                    if fin {
                        return String::from_utf8(message).unwrap();
                    }
                }
                0x8 => panic!("DevTools closed the WebSocket"),
                0x9 => self.send_frame(0xA, &payload).await,
                _ => {}
            }
        }
    }
}

/// A DevTools session on one page.
struct Page {
    ws: WebSocket,
    next_id: u64,
}

impl Page {
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({"id": id, "method": method, "params": params});
        self.ws.send_text(&msg.to_string()).await;
        loop {
            let reply: Value = serde_json::from_str(&self.ws.recv_text().await).unwrap();
            if reply["id"] == id {
                if let Some(err) = reply.get("error") {
                    panic!("{method} failed: {err}");
                }
                return reply["result"].clone();
            }
        }
    }

    async fn eval(&mut self, expression: &str) -> Value {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        if let Some(ex) = r.get("exceptionDetails") {
            panic!("page script failed: {expression}: {ex}");
        }
        r["result"]["value"].clone()
    }

    async fn wait_for(&mut self, what: &str, expression: &str) {
        for _ in 0..600 {
            if self.eval(expression).await == Value::Bool(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let body = self.eval("document.body.innerText").await;
        panic!(
            "the page never showed {what}; it shows:\n{}",
            body.as_str().unwrap_or("")
        );
    }

    async fn click(&mut self, selector: &str) {
        let rect = self
            .eval(&format!(
                "(() => {{ const el = document.querySelector({sel}); el.scrollIntoView({{block: 'center'}}); \
                 const r = el.getBoundingClientRect(); return {{x: r.x + r.width / 2, y: r.y + r.height / 2}}; }})()",
                sel = serde_json::to_string(selector).unwrap()
            ))
            .await;
        let (x, y) = (rect["x"].as_f64().unwrap(), rect["y"].as_f64().unwrap());
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
            )
            .await;
        }
    }

    async fn screenshot(&mut self, name: &str) -> PathBuf {
        let shot = self
            .call(
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": true}),
            )
            .await;
        let png = base64_decode(shot["data"].as_str().unwrap());
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
        let path = artifacts_dir().join(name);
        std::fs::write(&path, png).unwrap();
        path
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes().filter(|c| !c.is_ascii_whitespace() && *c != b'=') {
        let v = ALPHABET.iter().position(|a| *a == c).expect("base64") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// An MCP tool call through apigate, waiting in the background for the monitor's answer.
fn hold(client: &Peer<RoleClient>, args: Value) -> tokio::task::JoinHandle<(bool, Value)> {
    let client = client.clone();
    tokio::spawn(async move { call(&client, "api_execute", args).await })
}

#[tokio::test]
async fn dashboard_shows_a_pending_approval_live_and_approve_releases_the_call() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = monitor::spawn(listener, ServerConfig::default())
        .await
        .unwrap();
    let base = server.url();

    // The agent side: apigate with the gate pointing at this monitor, in front of the
    // recording petstore upstream.
    let upstream = Upstream::start().await;
    let mut args = engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url()));
    args.monitor.monitor = Some(base.clone());
    args.monitor.monitor_timeout = Duration::from_secs(300);
    let apigate = Server::start(args, false).await;
    let client = apigate.client().await;

    let profile = tempfile::tempdir().unwrap();
    // The link `apigate monitor` prints: its secret becomes the page's cookie.
    let (mut chromium, port) = launch(&server.page_link(), profile.path()).await;

    let targets: Value =
        crate::support::get_json(format!("http://127.0.0.1:{port}/json/list")).await;
    let ws_url = targets
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["type"] == "page" && t["url"].as_str().unwrap_or("").starts_with(&base))
        .and_then(|t| t["webSocketDebuggerUrl"].as_str())
        .unwrap_or_else(|| panic!("no page target for {base}: {targets}"))
        .to_owned();
    let mut page = Page {
        ws: WebSocket::connect(&ws_url).await,
        next_id: 0,
    };
    page.wait_for(
        "the live indicator",
        "document.getElementById('conn')?.dataset.state === 'live'",
    )
    .await;
    // The secret sits in an HttpOnly cookie: the page's scripts cannot read it, and the
    // address bar no longer shows it.
    let cookie = page.eval("document.cookie").await;
    assert!(
        !cookie
            .as_str()
            .unwrap_or_default()
            .contains(server.secret()),
        "{cookie}"
    );
    assert_eq!(page.eval("location.search").await, "");
    page.wait_for(
        "an empty approval list",
        "document.querySelectorAll('.approval').length === 0",
    )
    .await;

    // A DELETE through apigate, held by the default rules.
    let held = hold(
        &client,
        json!({"operationId": "deletePet", "pathParams": {"petId": 7}}),
    );
    page.wait_for(
        "the pending approval",
        "[...document.querySelectorAll('.approval')].some(el => el.innerText.includes('api_execute DELETE /pet/{petId}'))",
    )
    .await;
    // The card shows the request itself: which pet is deleted.
    page.wait_for(
        "the request preview on the card",
        "[...document.querySelectorAll('.approval pre.preview')].some(el => /^DELETE http:\\/\\/[^\\s]+\\/v2\\/pet\\/7$/m.test(el.innerText))",
    )
    .await;
    page.wait_for(
        "the session row",
        "!!document.querySelector('.session[data-id]')",
    )
    .await;
    assert!(!held.is_finished(), "the call must wait for a person");
    assert!(
        upstream.requests().is_empty(),
        "the DELETE reached the upstream before anyone approved it"
    );
    let pending_png = page.screenshot("monitor-pending-approval.png").await;

    page.click(".approval button.approve").await;
    let (err, result) = tokio::time::timeout(Duration::from_secs(60), held)
        .await
        .expect("the approved call is still waiting")
        .unwrap();
    assert!(!err, "the approved call failed: {result}");
    assert_eq!(result["status"], 200, "{result}");
    let got = upstream.requests();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].method, "DELETE");
    assert_eq!(got[0].uri, "/v2/pet/7");

    page.wait_for(
        "the decision",
        "!!document.querySelector('.decision[data-block=\"false\"]') && document.querySelectorAll('.approval').length === 0",
    )
    .await;
    let text = page
        .eval("document.getElementById('decisions').innerText")
        .await;
    assert!(
        text.as_str().unwrap().contains("approved by a person"),
        "{text}"
    );
    let approved_png = page.screenshot("monitor-approved.png").await;

    // A second call is denied from the page, with a reason typed into the card.
    let held = hold(
        &client,
        json!({"operationId": "addPet", "body": {"name": "Rex", "photoUrls": []}}),
    );
    page.wait_for(
        "the second approval",
        "[...document.querySelectorAll('.approval')].some(el => el.innerText.includes('api_execute POST /pet'))",
    )
    .await;
    page.click(".approval input").await;
    page.call("Input.insertText", json!({"text": "wrong pet"}))
        .await;
    page.click(".approval button.deny").await;
    let (err, result) = tokio::time::timeout(Duration::from_secs(60), held)
        .await
        .expect("the denied call is still waiting")
        .unwrap();
    assert!(err, "the denied call ran: {result}");
    assert_eq!(result["code"], "BLOCKED_BY_MONITOR", "{result}");
    assert_eq!(
        result["error"],
        "blocked by the agent monitor: denied by a person: wrong pet"
    );
    assert_eq!(
        upstream.requests().len(),
        1,
        "the denied POST reached the upstream"
    );
    page.wait_for(
        "the denial",
        "!!document.querySelector('.decision[data-block=\"true\"]')",
    )
    .await;
    let denied_png = page.screenshot("monitor-denied.png").await;
    eprintln!(
        "screenshots: {}, {} and {}",
        pending_png.display(),
        approved_png.display(),
        denied_png.display()
    );

    drop(page);
    chromium.kill().await.unwrap();
    client.cancel().await.unwrap();
    drop(apigate);
    server.shutdown().await.unwrap();
}
