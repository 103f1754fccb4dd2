"""Section 5: a fresh process up to the first answer, verif_client vs zeep."""

from __future__ import annotations

import compileall
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import verif_client
from verif_client import ENDPOINT_PATH

from . import latency_server, workload
from .common import ROOT, Report, Settings


def _once(contender: str, wsdl: Path, base_url: str) -> float:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.child", "startup", contender, str(wsdl), base_url],
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    return float(__import__("json").loads(done.stdout)["seconds"])


def run(report: Report, settings: Settings) -> None:
    # Installed from a wheel, both libraries come with bytecode (pip compiles
    # it). An editable install under PYTHONDONTWRITEBYTECODE=1 would instead
    # compile every module of ours from source in each fresh process, while
    # zeep's come compiled: about 20 ms against us that no user pays.
    compileall.compile_dir(Path(verif_client.__file__).parent, quiet=1)
    repeats = settings.scaled(7, 1)
    samples: dict[str, list[float]] = {"verif_client": [], "zeep": []}
    with latency_server.running(0) as info, tempfile.TemporaryDirectory() as tmp:
        base_url = info["base_url"]
        wsdl = workload.write_wsdl(Path(tmp), location=base_url + ENDPOINT_PATH)
        for _ in range(repeats):
            for contender, runs in samples.items():
                runs.append(_once(contender, wsdl, base_url))
    ours, zeep = (statistics.median(runs) for runs in samples.values())
    report.figures["startup_seconds"] = samples
    report.table(
        "5. Start-up: fresh process, import + first HasBeenVerified answer, median",
        ["client", "ms", "vs zeep"],
        [
            ["verif_client (import + first call)", f"{ours * 1000:.0f}", f"{ours / zeep:.2f}x"],
            ["zeep (import + WSDL load + first call)", f"{zeep * 1000:.0f}", "1.00x"],
        ],
        f"{repeats} fresh processes each; timed from the first line of the child to the "
        "answer, each library on its default connection layer, to a server on loopback that "
        "answers at once (interpreter start-up itself excluded), both libraries with their "
        "bytecode compiled, as pip installs them.",
    )
    report.target("start-up < half of zeep's", ours < zeep / 2, f"{ours / zeep:.2f}x of zeep")
