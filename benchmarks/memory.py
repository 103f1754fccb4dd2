"""Section 4 (10,000 waiting ids) and the issue-5 benchmark (10,000 ids
verified on their 5th poll against the in-process simulator), each contender
in a fresh process so peak RSS is its own."""

from __future__ import annotations

import statistics
import tempfile

from .common import Report, Settings, run_child

RSS_LIMIT_MIB = 60


def scale(report: Report, settings: Settings) -> None:
    count = settings.scaled(10_000, 1_000)
    runs = [
        run_child("benchmarks.child", "scale", str(count)) for _ in range(settings.scaled(3, 1))
    ]
    traced = run_child("benchmarks.child", "scale", str(count), "traced")
    peak = statistics.median(r["peak_rss_mib"] for r in runs)
    base = statistics.median(r["rss_after_imports_mib"] for r in runs)
    per_id = traced["bytes_per_waiting_id"]
    report.figures["scale"] = {"runs": runs, "traced": traced}
    report.table(
        f"4. Scale: {count:,} ids waiting at once (verif_client), median",
        ["peak RSS, whole process", "RSS after imports", "memory per waiting id"],
        [[f"{peak:.1f} MiB", f"{base:.1f} MiB", f"{per_id:,.0f} bytes (tracemalloc)"]],
        "Never-verified ids, one poll each before a 1 s deadline, over an httpx.MockTransport; "
        "peak RSS = `VmHWM` of a fresh process (its `ru_maxrss` would include the forking "
        "parent's peak on Linux).",
    )
    if count == 10_000:
        report.target(
            f"10,000 waiting ids: peak RSS < {RSS_LIMIT_MIB} MiB",
            peak < RSS_LIMIT_MIB,
            f"{peak:.1f} MiB",
        )


def issue5(report: Report, settings: Settings) -> None:
    count = settings.scaled(10_000, 300)
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        for contender in ("verif_client", "zeep"):
            figures[contender] = run_child(
                "benchmarks.child", "issue5", contender, str(count), tmp, timeout=400
            )
    report.figures["issue5"] = figures
    zeep = figures["zeep"]
    report.table(
        f"Issue 5: {count:,} ids, verified on the 5th poll, in-process simulator (ASGITransport)",
        ["client", "polls/s (wall)", "polls/CPU-s", "peak RSS", "vs zeep"],
        [
            [
                name,
                f"{f['wall_polls_per_s']:,.0f}",
                f"{f['cpu_polls_per_s']:,.0f}",
                f"{f['peak_rss_mib']:.1f} MiB",
                f"{f['wall_polls_per_s'] / zeep['wall_polls_per_s']:.2f}x",
            ]
            for name, f in figures.items()
        ],
        "One run each in a fresh process, 200 in flight, zero delays; the simulator's own cost "
        "(ASGI, state, wire writer) is inside every figure.",
    )
