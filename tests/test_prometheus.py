"""``--metrics-port``: a real Prometheus server (Debian's package) scrapes a running
``bulk run`` and answers for the job's request counter with the simulator's count."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from realparts import import_real_part, missing_real_part

from verif_client.simulator import Script, Simulator, SimulatorConfig, serve_in_thread

import_real_part("prometheus_client", "--metrics-port needs the prometheus extra")

USER, PASSWORD = "acme-api", "Pa55-never-show-me"
VERIFIED = "SecureLink_SecurityCode_HasBeenVerified"
CLI = (sys.executable, "-m", "verif_client._cli")
ROWS = 10
# Calls let through before the service stops answering: the 10 SMS and 5 polls.
LET_THROUGH = ROWS + 5


@pytest.fixture(scope="module")
def prometheus_binary() -> str:
    found = shutil.which("prometheus") or (
        "/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None
    )
    if found is None:
        missing_real_part("no prometheus binary (apt-get install prometheus)")
    return found


class Gate:
    """The simulator behind a front that answers the first ``limit`` calls and
    holds every later one unanswered: the job is then frozen mid-run, and its
    counters can be compared with the simulator's log."""

    def __init__(self, app: Simulator, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.arrived = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.arrived += 1
            if self.arrived > self.limit:
                await anyio.sleep_forever()
        await self.app(scope, receive, send)


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.1)  # the polling interval, not a wait for something to happen


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def stopped_at_end() -> Iterator[list[subprocess.Popen[bytes]]]:
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_prometheus_scrapes_bulk_run_and_counts_what_the_simulator_logged(
    prometheus_binary: str, tmp_path: Path, stopped_at_end: list[subprocess.Popen[bytes]]
) -> None:
    simulator = Simulator(
        credentials=(USER, PASSWORD), config=SimulatorConfig(script=Script(pending_polls=0))
    )
    gate = Gate(simulator, LET_THROUGH)
    rows = "".join(f"55500000{index:02d},row-{index}\n" for index in range(ROWS))
    (tmp_path / "in.csv").write_text("phone_number,id\n" + rows)
    stderr = tmp_path / "bulk.err"
    with serve_in_thread(gate) as server:
        environment = {
            **os.environ,
            "VERIF_BASE_URL": server.base_url,
            "VERIF_API_USERNAME": USER,
            "VERIF_API_PASSWORD": PASSWORD,
        }
        with stderr.open("wb") as errors:
            bulk = subprocess.Popen(
                [
                    *CLI,
                    *("bulk", "run", "--input", str(tmp_path / "in.csv"), "--timeout", "600"),
                    *("--question", "Did you order the blue lamp?", "--metrics-port", "0"),
                    *("--journal", str(tmp_path / "job.sqlite")),
                    *("--output", str(tmp_path / "out.jsonl")),
                ],
                env=environment,
                stdout=subprocess.DEVNULL,
                stderr=errors,
            )
        stopped_at_end.append(bulk)

        def metrics_url() -> str | None:
            found = re.search(r"metrics: (http://\S+)/metrics", stderr.read_text())
            return found.group(1) if found else None

        wait_for(lambda: metrics_url() is not None or bulk.poll() is not None, "metrics line")
        target = metrics_url()
        assert target is not None, stderr.read_text()
        assert target.startswith("http://127.0.0.1:")  # loopback unless --metrics-host says

        api_port = free_port()
        storage = tmp_path / "tsdb"
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: verif_bulk\n    static_configs:\n"
            f"      - targets: ['{target.removeprefix('http://')}']\n"
        )
        prometheus = subprocess.Popen(
            [
                prometheus_binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={storage}",
                f"--web.listen-address=127.0.0.1:{api_port}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        stopped_at_end.append(prometheus)
        api = httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=10)

        def query(expression: str) -> float | None:
            try:
                answer = api.get("/api/v1/query", params={"query": expression}).json()
            except (httpx.HTTPError, ValueError):
                return None  # not listening yet
            results = answer.get("data", {}).get("result", [])
            return float(results[0]["value"][1]) if results else None

        def frozen_and_counted() -> bool:
            assert bulk.poll() is None, stderr.read_text()
            logged = len(simulator.requests)
            return (
                gate.arrived > LET_THROUGH
                and logged == LET_THROUGH
                and query('up{job="verif_bulk"}') == 1
                and query('sum(verif_client_requests_total{job="verif_bulk"})') == logged
            )

        wait_for(frozen_and_counted, "Prometheus to hold the simulator's count")

        polls = len(simulator.calls(VERIFIED))
        assert polls == LET_THROUGH - ROWS
        per_operation = 'verif_client_requests_total{job="verif_bulk",operation="%s",outcome="%s"}'
        assert query(per_operation % (VERIFIED, "success")) == polls
        # Every answered poll verified its row (no pending answers): the job's rows say so.
        wait_for(
            lambda: query('verif_client_job_rows{job="verif_bulk",state="verified"}') == polls,
            "the job's rows",
        )
        assert query('sum(verif_client_job_rows{job="verif_bulk"})') == ROWS
        assert query('sum(verif_client_poll_waiting{job="verif_bulk"})') == ROWS - polls
        assert query('sum(verif_client_poll_outcomes_total{job="verif_bulk"})') == polls
        # Not one retry: the counter has no series at all.
        assert query('sum(verif_client_retries_total{job="verif_bulk"})') is None

        exposed = httpx.get(f"{target}/metrics").text
        for secret in (PASSWORD, "Did you order", "5550000"):
            assert secret not in exposed
        # Stopped while the service still listens: an interrupted run, not a dead service.
        bulk.send_signal(signal.SIGINT)
        assert bulk.wait(timeout=30) == 130


def test_metrics_port_without_a_free_port_is_one_clear_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*CLI, "simulate", "--port", "0", "--metrics-port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr == f"verif-client: --metrics-port {port}: Address already in use\n"


def test_simulate_serves_its_request_counts(
    tmp_path: Path, stopped_at_end: list[subprocess.Popen[bytes]]
) -> None:
    output = tmp_path / "simulate.err"
    with output.open("wb") as errors:
        simulate = subprocess.Popen(
            [*CLI, "simulate", "--port", "0", "--metrics-port", "0"],
            stdout=errors,
            stderr=errors,
        )
    stopped_at_end.append(simulate)

    def addresses() -> tuple[str, str] | None:
        text = output.read_text()
        metrics = re.search(r"metrics: (http://\S+)/metrics", text)
        service = re.search(r"Simulator listening: (\S+)", text)
        return (metrics.group(1), service.group(1)) if metrics and service else None

    wait_for(lambda: addresses() is not None or simulate.poll() is not None, "the addresses")
    found = addresses()
    assert found is not None, output.read_text()
    metrics, endpoint = found
    for _ in range(3):
        answer = httpx.get(f"{endpoint}/GetMobileConsentText")
        assert answer.status_code == 200
    exposed = httpx.get(f"{metrics}/metrics").text
    assert (
        'verif_simulator_requests_total{binding="http-get",'
        'operation="GetMobileConsentText",status="200"} 3.0'
    ) in exposed
    # A simulator has no client: no empty client metrics to mislead a dashboard.
    assert "verif_client_requests_total" not in exposed


def test_metrics_port_without_the_extra_is_a_usage_error() -> None:
    # As if prometheus-client were not installed: the import system finds nothing.
    hide = "import sys; sys.modules['prometheus_client'] = None; "
    run = "from verif_client._cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", hide + run, "simulate", "--metrics-port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "--metrics-port: needs the prometheus extra" in done.stderr


class LoggedWhileRead(list[Any]):
    """A request log to which the server's thread adds an entry while a scrape
    reads it (the interleaving a thread switch can make at any bytecode)."""

    def __getitem__(self, index: Any) -> Any:
        taken = super().__getitem__(index)
        if isinstance(index, slice):
            self.append(super().__getitem__(-1))
        return taken


def test_a_request_logged_during_a_scrape_is_counted_by_the_next() -> None:
    from verif_client._prometheus import _SimulatorLog

    app = Simulator()
    with serve_in_thread(app) as server:
        for _ in range(3):
            assert httpx.get(f"{server.endpoint_url}/GetMobileConsentText").status_code == 200
    app.requests = LoggedWhileRead(app.requests)
    log = _SimulatorLog(app)

    def counted() -> float:
        (family,) = log.collect()
        return sum(sample.value for sample in family.samples)

    counted()
    # Each scrape's reading added one: the next scrape counts it, and no
    # entry is ever skipped however the two threads interleave.
    assert counted() == len(app.requests) - 1
    assert counted() == len(app.requests) - 1
