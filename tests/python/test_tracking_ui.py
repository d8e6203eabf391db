"""The web UI in a real headless Chromium (Debian chromium + chromedriver, driven by selenium):
the browser logs in through the private file `air ui --url-only` names (a one-time code; the
session stays in the origin's localStorage and goes out as a header, never as a cookie); the
runs table lists a finished and a failed run; a run
page shows both nodes' logs, the failure summary led by its alert (torch's CUDA OOM line), the
alerts table, a loss chart drawn from the run's metrics, and its progress (step, rate, time to
first step, GPU-hours; GPU-hours in the runs table too), and a running run's progress and
state follow the run without a reload, polling stopping when it ends;
a log line holding <script> is shown as text. A page on another origin, in the same logged-in
browser, can neither read from nor write to the server (a form, an <img>, no-cors and CORS
fetches), and a name pointed at 127.0.0.1 (DNS rebinding) is refused. AIR_UI_SCREENSHOT=path
saves the run page (docs/tracking-ui.png)."""
import functools
import http.server as httpserver
import json
import os
import re
import shutil
import sys
import threading
import time

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from runtime_jobs.helpers import submit, wait_for, wait_terminal, write_spec
from tracking_helpers import http, run_mlflow, server_token

LOG_METRICS = ("python -c \"import mlflow, os; mlflow.start_run(run_id=os.environ['MLFLOW_RUN_ID']); "
               "mlflow.log_param('lr', 0.01); "
               "[mlflow.log_metric('loss', 2.0 / (s + 1), step=s) for s in range(20)]\"")


@pytest.fixture
def browser():
    chromium = shutil.which("chromium")
    driver_bin = shutil.which("chromedriver")
    assert chromium and driver_bin, "Debian chromium and chromium-driver are required"
    options = Options()
    options.binary_location = chromium
    # evil.example resolves to this machine, as a DNS-rebinding page would make it.
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1600", "--no-proxy-server",
                "--host-resolver-rules=MAP evil.example 127.0.0.1"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_bin), options=options)
    yield driver
    driver.quit()


def settled(driver, predicate, timeout=30):
    """Waits until predicate(driver) holds; an element the UI re-rendered meanwhile (a hash
    change re-draws the page) is looked up again, not an error."""
    return WebDriverWait(driver, timeout, ignored_exceptions=(StaleElementReferenceException,)) \
        .until(predicate)


def wait_ready(driver, want="1"):
    """Waits until the page has rendered: "1" (its data), "login" (the login page) or "error";
    asserts `want`."""
    settled(driver, lambda d: d.find_element(By.TAG_NAME, "body")
            .get_attribute("data-ready") in ("1", "error", "login"))
    assert driver.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == want, \
        driver.find_element(By.ID, "main").text


def log_in(air, driver):
    """Logs the browser in as a user does: opens the private file `air ui --url-only` names
    (it redirects to /login#code=...). Returns the runs page's URL (http://127.0.0.1:PORT/)."""
    login = air("ui", "--url-only", check=True).stdout.strip()
    assert login.startswith("file://") and login.count("\n") == 0, login
    driver.get(login)
    wait_ready(driver)
    assert driver.execute_script("return localStorage.getItem('air_session')")
    return driver.current_url


def test_ui_shows_runs_logs_failure_and_loss_chart(air, air_home, tmp_path, monkeypatch, browser):
    venv_bin = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")
    monkeypatch.setenv("PATH", venv_bin + os.pathsep + os.environ["PATH"])
    ok_cmd = (f'if [ "$NODE_RANK" = 0 ]; then {LOG_METRICS}; fi\n'
              'echo "<script>alert(1)</script> from node $NODE_RANK"\n')
    ok = submit(air, write_spec(tmp_path, ok_cmd, name="ui-exp", nodes=2, filename="ok.yaml",
                                env_variables={"GIT_PYTHON_REFRESH": "quiet"}))
    # Node 1 fails with torch's CUDA out-of-memory line: an alert the run page lists.
    bad_cmd = ('echo "node $NODE_RANK starting"\nif [ "$NODE_RANK" = 1 ]; then echo "[rank1]: '
               'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has '
               'a total capacity of 79.10 GiB of which 1.06 GiB is free." >&2; exit 3; fi\n')
    bad = submit(air, write_spec(tmp_path, bad_cmd, name="ui-exp", nodes=2, filename="bad.yaml"))
    ok_run = wait_terminal(air, ok, timeout=120)
    bad_run = wait_terminal(air, bad, timeout=120)
    assert ok_run["state"] == "SUCCEEDED", air("logs", ok, "--node", 0).stdout
    assert bad_run["state"] == "FAILED"
    url = log_in(air, browser)  # the file redirected to /login, which went on to the runs page
    assert url == json.loads((air_home / "tracking" / "server.json").read_text())["url"] + "/"
    # No cookie at all: the session is in the origin's storage, sent as X-Air-Session.
    assert browser.get_cookies() == [] and browser.execute_script("return document.cookie") == ""
    rows = browser.find_elements(By.CSS_SELECTOR, "#runs tr")[1:]
    states = {r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")[2].text
              for r in rows}
    assert states == {str(ok): "SUCCEEDED", str(bad): "FAILED"}

    browser.get(f"{url}runs/{bad}")
    wait_ready(browser)
    assert "node 1" in browser.find_element(By.ID, "failure").text
    assert "exit" in browser.find_element(By.ID, "failure").text
    assert "first alert: CUDA out of memory on node 1, rank 1" in \
        browser.find_element(By.ID, "failure").text
    alerts = browser.find_elements(By.CSS_SELECTOR, "#alerts tr")[1:]
    assert [[td.text for td in r.find_elements(By.TAG_NAME, "td")][1:5] for r in alerts] == \
        [["0", "1", "1", "CUDA out of memory on node 1, rank 1 (tried 2.00 GiB, gpu 0, "
          "total 79.10 GiB, free 1.06 GiB)"]]
    assert "Tried to allocate 2.00 GiB" in alerts[0].find_elements(By.TAG_NAME, "td")[5].text

    browser.get(f"{url}runs/{ok}")
    wait_ready(browser)
    WebDriverWait(browser, 20).until(
        lambda d: "from node 1" in d.find_element(By.ID, "logs").text)
    logs = browser.find_element(By.ID, "logs").text
    assert "<script>alert(1)</script> from node 0" in logs
    assert "<script>alert(1)</script> from node 1" in logs
    # Only the page's own three scripts exist: the log line was not parsed as markup.
    assert len(browser.find_elements(By.TAG_NAME, "script")) == 3
    points = browser.execute_script(
        "const c = Chart.getChart('chart-loss'); return c.data.datasets[0].data;")
    assert [p["x"] for p in points] == list(range(20))
    assert points[0]["y"] == pytest.approx(2.0) and points[-1]["y"] == pytest.approx(0.1)
    assert "lr" in browser.find_element(By.ID, "params").text
    if os.environ.get("AIR_UI_SCREENSHOT"):
        browser.save_screenshot(os.environ["AIR_UI_SCREENSHOT"])


def test_ui_shows_progress_and_gpu_hours(air, air_home, tmp_path, monkeypatch, browser):
    """A run on a simulated 2-GPU host (CUDA_VISIBLE_DEVICES) logging 20 of its 40 steps: the
    runs table has its GPU-hours, the run page its step, rate and time to first step, as
    `air get -o json` computes them."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    venv_bin = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")
    monkeypatch.setenv("PATH", venv_bin + os.pathsep + os.environ["PATH"])
    log_steps = ("python -c \"import mlflow, os, time; "
                 "mlflow.start_run(run_id=os.environ['MLFLOW_RUN_ID']); "
                 "mlflow.log_param('max_steps', 40); "
                 "[(time.sleep(0.02), mlflow.log_metric('loss', 1.0 / s, step=s)) "
                 "for s in range(1, 21)]\"")
    spec = write_spec(tmp_path, f'if [ "$NODE_RANK" = 0 ]; then {log_steps}; fi', name="ui-gpu",
                      nodes=2, env_variables={"GIT_PYTHON_REFRESH": "quiet"})
    spec.write_text(spec.read_text().replace("CPU_1", "GPU_1xA10"))
    run_id = submit(air, spec)
    run = wait_terminal(air, run_id, timeout=120)
    assert run["state"] == "SUCCEEDED", air("logs", run_id, "--node", 0).stdout
    progress = run["progress"]
    assert progress["step"] == 20 and progress["accelerators"] == 2 and progress["gpu_hours"] > 0
    url = log_in(air, browser)
    row = browser.find_elements(By.CSS_SELECTOR, "#runs tr")[1].find_elements(By.TAG_NAME, "td")
    assert row[0].text == str(run_id)
    assert row[7].text == f"{progress['gpu_hours']:.3f}"
    browser.get(f"{url}runs/{run_id}")
    wait_ready(browser)
    cells = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#progress td")]
    assert cells[0] == "20/40 (50%)", cells
    assert float(cells[1]) == pytest.approx(progress["steps_per_s"], rel=5e-3), cells
    assert cells[2] == ""  # ended: no ETA
    assert cells[3].endswith(" s"), cells  # time to the first step
    assert cells[6] == f"{progress['gpu_hours']:.3f}", cells


GATED_STEPS = """
import os, pathlib, time, mlflow
gate = pathlib.Path(os.environ["GATE_DIR"])
def wait(name):
    while not (gate / name).exists():
        time.sleep(0.1)
mlflow.start_run(run_id=os.environ["MLFLOW_RUN_ID"])
mlflow.log_param("max_steps", 4)
mlflow.log_metric("loss", 1.0, step=1)
wait("go")
for step in (2, 3):
    mlflow.log_metric("loss", 1.0 / step, step=step)
wait("end")
mlflow.log_metric("loss", 0.25, step=4)
"""


def test_ui_progress_follows_a_running_run(air, air_home, tmp_path, monkeypatch, browser):
    """A running run's page follows it without a reload: the run logs step 1 of 4 and waits for
    the test's `go` file, then steps 2 and 3 and waits for `end`, then step 4. The page opened
    at step 1 shows 1/4, then 3/4 (the same document: a value set in the window survives), then
    SUCCEEDED with 4/4 and no ETA; after that it asks the server nothing more."""
    venv_bin = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")
    monkeypatch.setenv("PATH", venv_bin + os.pathsep + os.environ["PATH"])
    (tmp_path / "steps.py").write_text(GATED_STEPS)
    gate = tmp_path / "gate"
    gate.mkdir()
    spec = write_spec(tmp_path, f"python {tmp_path / 'steps.py'}", name="ui-live", nodes=1,
                      env_variables={"GIT_PYTHON_REFRESH": "quiet", "GATE_DIR": str(gate)})
    run_id = submit(air, spec)
    wait_for(air, run_id, lambda r: (r.get("progress") or {}).get("step") == 1, timeout=120)
    url = log_in(air, browser)
    browser.get(f"{url}runs/{run_id}")
    wait_ready(browser)
    cells = lambda d: [td.text for td in d.find_elements(By.CSS_SELECTOR, "#progress td")]
    assert browser.find_element(By.ID, "run-state").text == "RUNNING"
    assert cells(browser)[0] == "1/4 (25%)", cells(browser)
    browser.execute_script("window.samePage = 42; performance.setResourceTimingBufferSize(100000);")

    (gate / "go").touch()
    settled(browser, lambda d: cells(d)[0] == "3/4 (75%)", timeout=60)
    assert browser.execute_script("return window.samePage") == 42  # not reloaded
    assert browser.find_element(By.ID, "run-state").text == "RUNNING"
    assert cells(browser)[2] != "", cells(browser)  # a live run's ETA

    (gate / "end").touch()
    settled(browser, lambda d: d.find_element(By.ID, "run-state").text == "SUCCEEDED", timeout=60)
    assert browser.execute_script("return window.samePage") == 42
    final = cells(browser)
    assert final[0] == "4/4 (100%)" and final[2] == "", final  # ended: no ETA
    assert wait_terminal(air, run_id, timeout=30)["state"] == "SUCCEEDED"
    # Ended: the page stops polling (the run and its logs), once its last requests are done.
    asked = ("return performance.getEntriesByType('resource').filter((e) => "
             f"e.name.includes('/api/air/runs/{run_id}')).length")
    before = browser.execute_script(asked)
    time.sleep(3)  # three of the page's polling intervals: a poll would have asked by now
    assert browser.execute_script(asked) == before


def printed_link(text: str) -> str:
    """The run link the mlflow client prints when a run ends (`View run NAME at: URL`)."""
    found = re.findall(r"View run \S+ at: (\S+)", text)
    assert found, text
    return found[-1]


def run_with_printed_link(air, tmp_path, monkeypatch, experiment):
    """A one-node run whose node logs with the mlflow client: (run id, `air get`'s run, the
    run link the client printed)."""
    venv_bin = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")
    monkeypatch.setenv("PATH", venv_bin + os.pathsep + os.environ["PATH"])
    run_id = submit(air, write_spec(tmp_path, LOG_METRICS, name=experiment, nodes=1,
                                    env_variables={"GIT_PYTHON_REFRESH": "quiet"}))
    run = wait_terminal(air, run_id, timeout=120)
    node_log = air("logs", run_id, "--node", 0).stdout
    assert run["state"] == "SUCCEEDED", node_log
    return run_id, run, printed_link(node_log)


def test_the_mlflow_clients_run_links_open_the_run(air, air_home, tmp_path, monkeypatch,
                                                  browser):
    """The link the real mlflow client prints (<server>/#/experiments/E/runs/R) opens that run's
    page: the air run's, for a node's tracking run; a run page of its own (params, the loss
    chart) for a run the client logged straight to the server."""
    run_id, run, link = run_with_printed_link(air, tmp_path, monkeypatch, "ui-links")
    assert "/#/experiments/" in link and link.endswith("/runs/" + run["mlflow_run_id"]), link
    url = log_in(air, browser)  # the session in the origin's storage serves the links below
    browser.get(link)  # the UI shows the runs list at /: only the hash changes
    settled(browser, lambda d: d.find_element(By.TAG_NAME, "h1").text.startswith(f"Run {run_id}"))
    wait_ready(browser)
    assert browser.current_url.endswith(f"/runs/{run_id}"), browser.current_url

    client = run_mlflow("""
        import mlflow
        mlflow.set_experiment("straight-from-the-client")
        with mlflow.start_run(run_name="client-run"):
            mlflow.log_param("batch", 8)
            for s in range(5):
                mlflow.log_metric("loss", 1.0 / (s + 1), step=s)
        """, url.rstrip("/"), env={"GIT_PYTHON_REFRESH": "quiet"})
    link = printed_link(client.stdout + client.stderr)
    browser.get(link)
    settled(browser, lambda d: "MLflow run client-run" in d.find_element(By.TAG_NAME, "h1").text)
    wait_ready(browser)
    settled(browser, lambda d: "batch" in d.find_element(By.ID, "params").text)
    points = browser.execute_script(
        "const c = Chart.getChart('chart-loss'); return c.data.datasets[0].data;")
    assert [p["x"] for p in points] == list(range(5))


ATTACK_PAGE = """<!doctype html><html><body>
<iframe name="sink"></iframe>
<form id="form" method="POST" target="sink" enctype="text/plain"
      action="{air}/api/2.0/mlflow/experiments/create">
  <input name='{{"name": "evil-form", "x": "' value='"}}'>
</form>
<img src="{air}/api/2.0/mlflow/experiments/create?name=evil-img">
<script>
const results = {{}};
window.results = results;
const create = "{air}/api/2.0/mlflow/experiments/create";
fetch(create, {{method: "POST", mode: "no-cors", credentials: "include",
               headers: {{"Content-Type": "text/plain"}}, body: '{{"name": "evil-no-cors"}}'}})
  .then(() => results.no_cors = "sent", () => results.no_cors = "error");
fetch(create, {{method: "POST", credentials: "include",
               headers: {{"Content-Type": "application/json"}}, body: '{{"name": "evil-cors"}}'}})
  .then(r => results.cors = "read " + r.status, () => results.cors = "blocked");
fetch("{air}/api/air/runs", {{credentials: "include"}})
  .then(r => r.text()).then(t => results.read = t, () => results.read = "blocked");
document.getElementById("form").submit();
setTimeout(() => results.form = "submitted", 1000);
</script></body></html>"""


def test_other_origins_cannot_use_a_logged_in_session(air, air_home, tmp_path, browser):
    base = log_in(air, browser).rstrip("/")
    # Another site on this machine (another port: the same "site", to which a cookie would go;
    # the session is not one, and the server's Origin rules refuse the writes as well).
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "attack.html").write_text(ATTACK_PAGE.format(air=base))
    handler = functools.partial(httpserver.SimpleHTTPRequestHandler,
                                directory=str(tmp_path / "www"))
    attacker = httpserver.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    try:
        browser.get(f"http://127.0.0.1:{attacker.server_address[1]}/attack.html")
        WebDriverWait(browser, 30).until(
            lambda d: len(d.execute_script("return window.results") or {}) == 4)
        results = browser.execute_script("return window.results")
    finally:
        attacker.shutdown()
    # The simple requests went out (with no credential: 401); the others were stopped by the
    # browser for want of CORS headers.
    assert results["no_cors"] == "sent" and results["form"] == "submitted", results
    assert results["cors"] == "blocked" and results["read"] == "blocked", results
    status, body, _ = http("POST", base + "/api/2.0/mlflow/experiments/search",
                           {"max_results": 100}, token=server_token(air_home))
    assert status == 200
    assert [e["name"] for e in json.loads(body)["experiments"]] == ["Default"], body
    # DNS rebinding: the browser reaches this server under the page's own name.
    port = base.rsplit(":", 1)[1]
    browser.get(f"http://evil.example:{port}/api/air/runs")
    text = browser.find_element(By.TAG_NAME, "body").text
    assert "does not name this air server" in text and '"runs"' not in text, text
