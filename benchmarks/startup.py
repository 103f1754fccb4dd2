"""Section 5: a fresh process up to the first answer, verif_client vs zeep."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from verif_client import Binding
from verif_client._results import VerificationResult

from . import workload
from .common import ROOT, Report, Settings


def _once(contender: str, wsdl: Path, body: bytes) -> float:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.child", "startup", contender, str(wsdl)],
        cwd=ROOT,
        input=body,
        capture_output=True,
        check=True,
    )
    return float(__import__("json").loads(done.stdout)["seconds"])


def run(report: Report, settings: Settings) -> None:
    repeats = settings.scaled(7, 1)
    body = workload.response_body(workload.VERIFIED_OP, Binding.SOAP11, VerificationResult(True))
    samples: dict[str, list[float]] = {"verif_client": [], "zeep": []}
    with tempfile.TemporaryDirectory() as tmp:
        wsdl = workload.write_wsdl(Path(tmp))
        for _ in range(repeats):
            for contender, runs in samples.items():
                runs.append(_once(contender, wsdl, body))
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
        "answer, over an httpx.MockTransport (interpreter start-up itself excluded).",
    )
    report.target("start-up < half of zeep's", ours < zeep / 2, f"{ours / zeep:.2f}x of zeep")
