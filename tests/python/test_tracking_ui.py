"""The web UI in a real headless Chromium (Debian chromium + chromedriver, driven by selenium):
the runs table lists a finished and a failed run; a run page shows both nodes' logs, the
failure summary and a loss chart drawn from the run's metrics; a log line holding <script> is
shown as text. AIR_UI_SCREENSHOT=path saves the run page (docs/tracking-ui.png)."""
import os
import re
import shutil
import sys

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from runtime_jobs.helpers import submit, wait_terminal, write_spec
from tracking_helpers import run_mlflow

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
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1600"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_bin), options=options)
    yield driver
    driver.quit()


def wait_ready(driver):
    WebDriverWait(driver, 30).until(lambda d: d.find_element(By.TAG_NAME, "body")
                                    .get_attribute("data-ready") in ("1", "error"))
    assert driver.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "1", \
        driver.find_element(By.ID, "main").text


def test_ui_shows_runs_logs_failure_and_loss_chart(air, air_home, tmp_path, monkeypatch, browser):
    venv_bin = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")
    monkeypatch.setenv("PATH", venv_bin + os.pathsep + os.environ["PATH"])
    ok_cmd = (f'if [ "$NODE_RANK" = 0 ]; then {LOG_METRICS}; fi\n'
              'echo "<script>alert(1)</script> from node $NODE_RANK"\n')
    ok = submit(air, write_spec(tmp_path, ok_cmd, name="ui-exp", nodes=2, filename="ok.yaml",
                                env_variables={"GIT_PYTHON_REFRESH": "quiet"}))
    bad_cmd = 'echo "node $NODE_RANK starting"\nif [ "$NODE_RANK" = 1 ]; then exit 3; fi\n'
    bad = submit(air, write_spec(tmp_path, bad_cmd, name="ui-exp", nodes=2, filename="bad.yaml"))
    ok_run = wait_terminal(air, ok, timeout=120)
    bad_run = wait_terminal(air, bad, timeout=120)
    assert ok_run["state"] == "SUCCEEDED", air("logs", ok, "--node", 0).stdout
    assert bad_run["state"] == "FAILED"
    url = air("ui", check=True).stdout.strip()

    browser.get(url)
    wait_ready(browser)
    rows = browser.find_elements(By.CSS_SELECTOR, "#runs tr")[1:]
    states = {r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")[2].text
              for r in rows}
    assert states == {str(ok): "SUCCEEDED", str(bad): "FAILED"}

    browser.get(f"{url}runs/{bad}")
    wait_ready(browser)
    assert "node 1" in browser.find_element(By.ID, "failure").text
    assert "exit" in browser.find_element(By.ID, "failure").text

    browser.get(f"{url}runs/{ok}")
    wait_ready(browser)
    WebDriverWait(browser, 20).until(
        lambda d: "from node 1" in d.find_element(By.ID, "logs").text)
    logs = browser.find_element(By.ID, "logs").text
    assert "<script>alert(1)</script> from node 0" in logs
    assert "<script>alert(1)</script> from node 1" in logs
    # Only the page's own two scripts exist: the log line was not parsed as markup.
    assert len(browser.find_elements(By.TAG_NAME, "script")) == 2
    points = browser.execute_script(
        "const c = Chart.getChart('chart-loss'); return c.data.datasets[0].data;")
    assert [p["x"] for p in points] == list(range(20))
    assert points[0]["y"] == pytest.approx(2.0) and points[-1]["y"] == pytest.approx(0.1)
    assert "lr" in browser.find_element(By.ID, "params").text
    if os.environ.get("AIR_UI_SCREENSHOT"):
        browser.save_screenshot(os.environ["AIR_UI_SCREENSHOT"])


def printed_link(text: str) -> str:
    """The run link the mlflow client prints when a run ends (`View run NAME at: URL`)."""
    found = re.findall(r"View run \S+ at: (\S+)", text)
    assert found, text
    return found[-1]


def test_the_mlflow_clients_run_links_open_the_run(air, air_home, tmp_path, monkeypatch,
                                                  browser):
    """The link the real mlflow client prints (<server>/#/experiments/E/runs/R) opens that run's
    page: the air run's, for a node's tracking run; a run page of its own (params, the loss
    chart) for a run the client logged straight to the server."""
    venv_bin = os.path.join(os.environ.get("AIR_VENV", sys.prefix), "bin")
    monkeypatch.setenv("PATH", venv_bin + os.pathsep + os.environ["PATH"])
    run_id = submit(air, write_spec(tmp_path, LOG_METRICS, name="ui-links", nodes=1,
                                    env_variables={"GIT_PYTHON_REFRESH": "quiet"}))
    run = wait_terminal(air, run_id, timeout=120)
    node_log = air("logs", run_id, "--node", 0).stdout
    assert run["state"] == "SUCCEEDED", node_log
    link = printed_link(node_log)
    assert "/#/experiments/" in link and link.endswith("/runs/" + run["mlflow_run_id"]), link
    browser.get(link)
    wait_ready(browser)
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith(f"Run {run_id}")
    assert browser.current_url.endswith(f"/runs/{run_id}"), browser.current_url

    url = air("ui", check=True).stdout.strip()
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
    wait_ready(browser)
    assert "MLflow run client-run" in browser.find_element(By.TAG_NAME, "h1").text
    assert "batch" in browser.find_element(By.ID, "params").text
    points = browser.execute_script(
        "const c = Chart.getChart('chart-loss'); return c.data.datasets[0].data;")
    assert [p["x"] for p in points] == list(range(5))
