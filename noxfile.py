"""Developer tasks: `nox -s tests`, `nox -s lint`, `nox -s soak`, `nox -s bench`."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session
def soak(session: nox.Session) -> None:
    """The long fault soak: 2,000 numbers, 5,000 ids (times VERIF_SOAK_SCALE); prints figures."""
    session.install("-e", ".[test]")
    session.run(
        "pytest", "-m", "soak", "-s", "-q", "tests/test_reliability_soak.py", *session.posargs
    )


@nox.session
def lint(session: nox.Session) -> None:
    session.install("-e", ".[lint]")
    session.run("ruff", "check", "verif_client", "tests", "benchmarks", "noxfile.py")
    session.run("ruff", "format", "--check", "verif_client", "tests", "benchmarks", "noxfile.py")
    session.run("mypy", "--strict", "verif_client")
