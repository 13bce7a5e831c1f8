//! What the viewer's browser tests share: a real headless Chromium driven over WebDriver
//! (Debian's `chromium` + `chromium-driver`, installed by `scripts/bootstrap-tests`), the viewer started
//! as `green-agent view`, and where screenshots go.

#![allow(dead_code)]

pub mod crawl;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sandbox::child::{ChildSpec, SupervisedChild};
use serde_json::{Value, json};

/// The W3C WebDriver element key.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

fn on_path(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join(name))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!("`{name}` is not installed: run scripts/bootstrap-tests (it installs Debian's chromium and chromium-driver)")
        })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Where a test's screenshots go: `target/viewer-screenshots/<test>/` (kept after the test).
pub fn screenshot_dir(test: &str) -> PathBuf {
    let dir = e2e_tests::bin_dir()
        .parent()
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf)
        .join("viewer-screenshots")
        .join(test);
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

/// A headless Chromium session over WebDriver.
pub struct Browser {
    http: reqwest::Client,
    base: String,
    driver: SupervisedChild,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free port and opens a headless Chromium session.
    pub async fn start() -> Self {
        let driver_bin = on_path("chromedriver");
        let chromium = on_path("chromium");
        let port = free_port();
        let driver = SupervisedChild::spawn(ChildSpec {
            program: driver_bin.display().to_string(),
            args: vec![format!("--port={port}")],
            cwd: std::env::temp_dir(),
            ..Default::default()
        })
        .expect("chromedriver starts");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .expect("client");
        let root = format!("http://127.0.0.1:{port}");
        let ready = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                if let Ok(r) = http.get(format!("{root}/status")).send().await
                    && let Ok(v) = r.json::<Value>().await
                    && v["value"]["ready"] == true
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        assert!(
            ready.is_ok(),
            "chromedriver did not come up: {}",
            driver.stderr_tail()
        );
        let profile = tempfile::tempdir().expect("profile dir");
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium.display().to_string(),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--hide-scrollbars", "--window-size=1280,1000",
                         format!("--user-data-dir={}", profile.path().display())]
            }
        }}});
        let resp: Value = http
            .post(format!("{root}/session"))
            .json(&caps)
            .send()
            .await
            .expect("new session")
            .json()
            .await
            .expect("session json");
        let session = resp["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {resp}"))
            .to_owned();
        Self {
            http,
            base: format!("{root}/session/{session}"),
            driver,
            _profile: profile,
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let v: Value = req
            .send()
            .await
            .expect("webdriver request")
            .json()
            .await
            .expect("webdriver json");
        if v["value"].get("error").is_some() {
            panic!("WebDriver {path}: {}", v["value"]);
        }
        v["value"].clone()
    }

    /// Navigates and waits for the page to load.
    pub async fn goto(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    pub async fn url(&self) -> String {
        self.call(reqwest::Method::GET, "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Runs `script` (a function body) in the page and returns its value.
    pub async fn eval(&self, script: &str) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// The rendered DOM.
    pub async fn html(&self) -> String {
        self.eval("return document.documentElement.outerHTML;")
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The visible text of the first element matching `css` (panics when there is none).
    pub async fn text(&self, css: &str) -> String {
        let id = self.find(css).await;
        self.call(reqwest::Method::GET, &format!("/element/{id}/text"), None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    async fn find(&self, css: &str) -> String {
        let v = self
            .call(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_owned()
    }

    /// Clicks the first element matching `css` (as a user would) and waits for the next page.
    pub async fn click(&self, css: &str) {
        let before = self.url().await;
        let id = self.find(css).await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{id}/click"),
            Some(json!({})),
        )
        .await;
        self.wait_until(
            &format!(
                "return document.readyState === 'complete' && location.href !== {};",
                json!(before)
            ),
            Duration::from_secs(30),
        )
        .await;
    }

    /// Waits until `script` returns true (panics after `timeout` with the page's text).
    pub async fn wait_until(&self, script: &str, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.eval(script).await == Value::Bool(true) {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                let text = self
                    .eval("return document.body ? document.body.innerText : '';")
                    .await;
                panic!("timed out waiting for `{script}`; page:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Saves a screenshot of the whole page (the window grown to the page's height).
    pub async fn screenshot(&self, path: &Path) {
        use base64::Engine;
        let height = self
            .eval("return Math.min(document.documentElement.scrollHeight, 6000);")
            .await
            .as_i64()
            .unwrap_or(1000);
        self.call(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({"width": 1280, "height": height.max(600)})),
        )
        .await;
        let b64 = self.call(reqwest::Method::GET, "/screenshot", None).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap_or_default())
            .expect("png base64");
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::write(path, png).expect("write screenshot");
        self.call(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({"width": 1280, "height": 1000})),
        )
        .await;
    }

    /// Ends the session and stops chromedriver.
    pub async fn quit(self) {
        let _ = self.http.delete(&self.base).send().await;
        self.driver.kill_tree();
    }
}

/// `green-agent view` on `results`, on a free loopback port; returns the child and its URL.
pub async fn start_viewer(results: &Path) -> (SupervisedChild, String) {
    start_viewer_with(results, &BTreeMap::new()).await
}

/// [`start_viewer`] with more environment (e.g. `RB_DATABASE_URL`).
pub async fn start_viewer_with(
    results: &Path,
    env: &BTreeMap<String, String>,
) -> (SupervisedChild, String) {
    let mut env = env.clone();
    env.insert("CI".to_owned(), "true".to_owned());
    let mut child = e2e_tests::spawn_green(
        &[
            "view",
            "--results-dir",
            &results.display().to_string(),
            "--bind",
            "127.0.0.1:0",
        ],
        &env,
    );
    let line = tokio::time::timeout(Duration::from_secs(30), child.next_stdout_line())
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| {
            panic!(
                "the viewer printed no URL; stderr:\n{}",
                child.stderr_tail()
            )
        });
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .trim_end_matches('/')
        .to_owned();
    (child, url)
}
