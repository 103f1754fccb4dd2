"""Timing, results and the report shared by every benchmark section."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import attrs

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benchmarks" / "results"
T = TypeVar("T")


@attrs.define
class Settings:
    quick: bool = False
    repeats: int = 5

    def scaled(self, full: int, quick: int) -> int:
        return quick if self.quick else full


def median_per_call(fn: Callable[[], object], number: int, repeats: int) -> float:
    """Seconds per call: the median over ``repeats`` runs of ``number`` calls."""
    fn()  # warm caches and lazy imports outside the timing
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - started) / number)
    return statistics.median(samples)


@attrs.define
class Target:
    name: str
    met: bool
    detail: str


@attrs.define
class Report:
    """Markdown tables and the same figures as JSON."""

    settings: Settings
    sections: list[tuple[str, list[str], list[list[str]], str]] = attrs.field(factory=list)
    figures: dict[str, Any] = attrs.field(factory=dict)
    targets: list[Target] = attrs.field(factory=list)

    def table(self, title: str, header: list[str], rows: list[list[str]], note: str = "") -> None:
        self.sections.append((title, header, rows, note))
        print(_markdown(title, header, rows, note), flush=True)

    def target(self, name: str, met: bool, detail: str) -> None:
        self.targets.append(Target(name, met, detail))

    def markdown(self) -> str:
        parts = [_markdown(*section) for section in self.sections]
        rows = [[t.name, t.detail, "met" if t.met else "**not met**"] for t in self.targets]
        parts.append(_markdown("Targets", ["target", "measured", "status"], rows, ""))
        return "\n".join(parts)

    def save(self, directory: Path = RESULTS_DIR) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = directory / f"bench-{stamp}{'-quick' if self.settings.quick else ''}.json"
        data = {
            "machine": machine(),
            "settings": attrs.asdict(self.settings),
            "figures": self.figures,
            "targets": [attrs.asdict(t) for t in self.targets],
        }
        path.write_text(json.dumps(data, indent=2, default=str))
        return path


def _markdown(title: str, header: list[str], rows: list[list[str]], note: str) -> str:
    lines = [f"\n### {title}\n", "| " + " | ".join(header) + " |"]
    lines.append("|" + "|".join("---" for _ in header) + "|")
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    if note:
        lines.append(f"\n{note}")
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for name in ("httpx", "lxml", "anyio", "zeep"):
        try:
            versions[name] = __import__(name).__version__
        except (ImportError, AttributeError):
            versions[name] = None
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model or platform.processor(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        **versions,
    }


def run_child(module: str, *args: str, timeout: float = 300) -> dict[str, Any]:
    """Run ``python -m module args`` in a fresh process; it prints one JSON object."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{module} {args} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f}"


def ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:.2f}x" if denominator else "n/a"


def mark(met: bool) -> str:
    return "met" if met else "**not met**"


@contextmanager
def server_process(module: str, *args: str) -> Iterator[dict[str, Any]]:
    """Start ``python -m module args``, a server that prints one JSON line once it
    listens and serves until its stdin closes; yield that line; stop it on exit."""
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"{module} exited before listening")
        yield json.loads(line)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_on(loop: str, main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``main()`` on a fresh event loop: asyncio's, or uvloop's when ``loop`` is "uvloop"."""
    import asyncio

    if loop == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(main())
    return asyncio.run(main())
