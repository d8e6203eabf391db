"""Browser sessions of the web UI that no other local user can take (docs/tracking.md, "Threat
model"), in real headless Chromium with a second local user created for the tests:
  - another user's listener on another port of 127.0.0.1, opened in the owner's logged-in
    browser, receives no credential: no cookie, nothing its page can read from storage, and
    replaying everything it got is 401;
  - the one-time login code is in no process's command line (read by the other user polling
    /proc/*/cmdline) while a browser opens it — `chromium "$(air ui --url-only)"` and `air ui`
    opening $BROWSER — and that browser is logged in;
  - a browser without a session on an MLflow run link (and a UI link, an API address) gets a
    page that says how to log in, never 401 JSON, and after `air ui` it is on the page it asked
    for."""
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import time
import urllib.parse

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from local_users import local_user, run_as, start_as
from test_tracking_ui import browser, run_with_printed_link, settled, wait_ready  # noqa: F401
from tracking_helpers import http

CHROMIUM_FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--no-proxy-server"]


@pytest.fixture(scope="module")
def other_user():
    with local_user() as entry:
        yield entry


def stop(proc):
    """Closes a process's stdin (the scripts below then print what they saw and exit)."""
    if not proc.stdin.closed:
        proc.stdin.close()
    out, err = proc.stdout.read(), proc.stderr.read()
    assert proc.wait(timeout=60) == 0, err
    return out


# Another user's web server: records every request's headers and body; its page reports what
# it can read in the browser (cookies, localStorage, sessionStorage) back to it.
LISTENER = r'''
import http.server, json, sys, threading
PAGE = b"""<!doctype html><html><body><script>
const found = {cookie: document.cookie, local: {}, session: {}};
for (const [name, store] of [["local", localStorage], ["session", sessionStorage]])
  for (let i = 0; i < store.length; i++) found[name][store.key(i)] = store.getItem(store.key(i));
fetch("/found", {method: "POST", body: JSON.stringify(found)})
  .then(() => { document.title = "reported"; });
</script></body></html>"""
seen = []
class Handler(http.server.BaseHTTPRequestHandler):
    def record(self, body=""):
        seen.append({"path": self.path, "headers": self.headers.items(), "body": body})
    def do_GET(self):
        self.record()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)
    def do_POST(self):
        self.record(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())
        self.send_response(204)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
print(server.server_address[1], flush=True)
sys.stdin.read()
print(json.dumps(seen), flush=True)
'''

REPLAY = """
import json, urllib.request, urllib.error
url, values = {url!r}, {values!r}
out = []
for value in values:
    for headers in ({{"Cookie": value}}, {{"Cookie": "air_session=" + value}},
                    {{"X-Air-Session": value}}, {{"Authorization": "Bearer " + value}}):
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as r:
                out.append([r.status, headers])
        except (urllib.error.HTTPError, ValueError) as e:
            out.append([getattr(e, "code", 400), headers])
print(json.dumps(out))
"""


def test_another_users_port_gets_no_credential_from_a_logged_in_browser(
        air, air_home, browser, other_user):
    browser.get(air("ui", "--url-only", check=True).stdout.strip())  # logs the browser in
    wait_ready(browser)
    base = browser.current_url

    listener = start_as(other_user, LISTENER)
    port = int(listener.stdout.readline())
    try:
        browser.get(f"http://127.0.0.1:{port}/")
        settled(browser, lambda d: d.title == "reported")
    finally:
        listener.stdin.close()
    seen = json.loads(stop(listener))
    found = json.loads(next(r["body"] for r in seen if r["path"] == "/found"))
    headers = [(name, value) for r in seen for name, value in r["headers"]]
    # Nothing of the owner's reached the other port: no cookie, nothing in its storage.
    assert not [v for n, v in headers if n.lower() == "cookie"], headers
    assert found == {"cookie": "", "local": {}, "session": {}}, found
    # Replaying everything it received, every way a credential could be sent, is 401.
    values = sorted({v for _, v in headers} | {found["cookie"]} |
                    set(found["local"].values()) | set(found["session"].values()))
    replay = run_as(other_user, REPLAY.format(url=base + "api/air/runs", values=values))
    assert replay.returncode == 0, replay.stderr
    results = json.loads(replay.stdout)
    assert len(results) == 4 * len(values)
    assert all(status == 401 for status, _ in results), results
    # The browser is still logged in at the server's own origin, and what it holds there
    # works (so a leak of it would have shown above).
    browser.get(base)
    wait_ready(browser)
    owner_session = browser.execute_script("return localStorage.getItem('air_session')")
    status, _, _ = http("GET", base + "api/air/runs", headers={"X-Air-Session": owner_session})
    assert status == 200


# Another user watching every process's command line for the login code (or anything like a
# token: 64 hex digits) while the owner opens the UI; it reports each match as it sees it.
WATCHER = r"""
import json, os, re, select, sys
wanted = re.compile(rb"login|[0-9a-f]{64}")
seen = set()
while not select.select([sys.stdin], [], [], 0.1)[0]:
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if wanted.search(cmdline.encode()) and cmdline not in seen:
            seen.add(cmdline)
            print(json.dumps(cmdline), flush=True)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def attach(port, timeout=60):
    """Selenium attached to the Chromium listening for DevTools on `port`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, f"no browser is listening on port {port}"
            time.sleep(0.1)
    options = Options()
    options.debugger_address = f"127.0.0.1:{port}"
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def close(driver):
    try:
        driver.execute_cdp_cmd("Browser.close", {})
    except Exception:  # the browser went away with the command, as asked
        pass
    driver.quit()


def code_of(url):
    """The login code a URL carries, itself or in the file it names."""
    text = url
    if url.startswith("file://"):
        text = pathlib.Path(urllib.parse.unquote(url[len("file://"):])).read_text()
    return re.search(r"code=([0-9a-f]{64})", text).group(1)


def watched_login(other_user, open_browser):
    """Opens the UI with `open_browser(devtools_port)` (it returns the URL it opened) while the
    other user watches command lines. Returns what the watcher saw, the URL's login code and
    whether the browser (attached through DevTools) ended on the runs page with a session."""
    watcher = start_as(other_user, WATCHER)
    port = free_port()
    try:
        url = open_browser(port)
        driver = attach(port)
        try:
            wait_ready(driver)
            logged_in = (driver.current_url.endswith("/") and
                         bool(driver.execute_script("return localStorage.getItem('air_session')")))
        finally:
            close(driver)
    finally:
        watcher.stdin.close()
    seen = [json.loads(line) for line in stop(watcher).splitlines()]
    return seen, code_of(url), logged_in


def test_the_login_code_is_in_no_command_line_while_a_browser_opens_it(
        air, air_home, tmp_path, other_user):
    chromium = shutil.which("chromium")
    assert chromium and shutil.which("chromedriver"), "Debian chromium and chromium-driver"
    browser_args = [chromium, *CHROMIUM_FLAGS]

    # As the owner in the issue did: chromium "$(air ui --url-only)".
    started = []

    def by_hand(port):
        url = air("ui", "--url-only", check=True).stdout.strip()
        started.append(subprocess.Popen(
            [*browser_args, f"--user-data-dir={tmp_path / 'profile-1'}",
             f"--remote-debugging-port={port}", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        return url

    seen, code, logged_in = watched_login(other_user, by_hand)
    started[0].wait(timeout=60)
    # The watcher could read the browser's command line...
    assert any(str(tmp_path / "profile-1") in cmdline for cmdline in seen), seen
    # ...and the code was in none; the browser got it from the file and is logged in.
    assert not [cmdline for cmdline in seen if code in cmdline], seen
    assert logged_in

    # `air ui` opening the browser itself ($BROWSER: a command line; the URL is its argument).
    profile = tmp_path / "profile-2"

    def by_air_ui(port):
        command = " ".join([*browser_args, f"--user-data-dir={profile}",
                            f"--remote-debugging-port={port}"])
        out = air("ui", env=dict(os.environ, BROWSER=command), check=True).stdout
        assert f"(opened with $BROWSER ({command}))" in out, out
        return re.search(r"Open the web UI: (\S+)", out).group(1)

    seen, code, logged_in = watched_login(other_user, by_air_ui)
    assert any("ui-login-" in cmdline and str(profile) in cmdline for cmdline in seen), seen
    assert not [cmdline for cmdline in seen if code in cmdline], seen
    assert logged_in


def test_a_browser_without_a_session_is_asked_to_log_in_and_comes_back(
        air, air_home, tmp_path, monkeypatch, browser):
    # MLflow's "View run ... at: http://127.0.0.1:PORT/#/experiments/E/runs/R".
    run_id, _, link = run_with_printed_link(air, tmp_path, monkeypatch, "ui-login-link")
    base = link.split("#")[0]

    def asked_to_log_in():
        text = browser.find_element(By.TAG_NAME, "body").text
        assert "run air ui" in text and "UNAUTHENTICATED" not in text, text

    browser.get(f"{base}api/air/runs")  # an API address: a page, not JSON
    settled(browser, lambda d: "Log in to this air server" in d.find_element(By.TAG_NAME, "h1")
            .text)
    assert "air ui" in browser.find_element(By.TAG_NAME, "body").text
    browser.get(f"{base}runs/{run_id}")  # a UI link
    wait_ready(browser, "login")
    asked_to_log_in()
    browser.get(link)  # the MLflow client's link, the page to come back to
    wait_ready(browser, "login")
    asked_to_log_in()
    assert link.split("/", 3)[3] in browser.find_element(By.ID, "login-needed").text

    log_in_file = air("ui", "--url-only", check=True).stdout.strip()
    browser.get(log_in_file)
    settled(browser, lambda d: d.find_element(By.TAG_NAME, "h1").text.startswith(f"Run {run_id}"))
    wait_ready(browser)
    assert browser.current_url == f"{base}runs/{run_id}", browser.current_url
