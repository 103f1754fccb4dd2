"""The one entry point: ``nox -s bench`` or ``python -m benchmarks.run [--quick]``.

Runs every section, prints markdown tables with ratios and each target's
status, and saves the figures as JSON under ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence

from . import bench_journal, codec, economy, hooks, latency, memory, perpoll, polling, startup
from .common import Report, Settings

SECTIONS: dict[str, Callable[[Report, Settings], None]] = {
    "codec": codec.run,
    "polling": polling.run,
    "scale": memory.scale,
    "startup": startup.run,
    "economy": economy.run,
    "issue5": memory.issue5,
    "hooks": hooks.run,
    "latency": latency.run,
    "overhead": latency.overhead,
    "journal": bench_journal.run,
    "perpoll": perpoll.run,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--repeats", type=int, default=5, help="repeats per figure (median)")
    parser.add_argument("--no-save", action="store_true", help="do not write the JSON file")
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = set(chosen) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    settings = Settings(quick=args.quick, repeats=args.repeats)
    report = Report(settings)
    started = time.perf_counter()
    for name in chosen:
        began = time.perf_counter()
        SECTIONS[name](report, settings)
        print(f"\n({name}: {time.perf_counter() - began:.0f} s)", file=sys.stderr, flush=True)
    report.figures["total_seconds"] = time.perf_counter() - started
    print(
        "\n## Summary\n" + report.markdown().split("### Targets", 1)[-1].join(["### Targets", ""])
    )
    if not args.no_save:
        print(f"\nSaved {report.save()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
