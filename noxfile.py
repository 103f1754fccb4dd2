"""Developer tasks: `nox -s tests`, `nox -s lint`, `nox -s bench`."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    session.install("-e", ".[test,postgres]")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("-e", ".[lint,postgres]")
    session.run("ruff", "check", "verif_client", "tests", "benchmarks", "noxfile.py")
    session.run("ruff", "format", "--check", "verif_client", "tests", "benchmarks", "noxfile.py")
    session.run("mypy", "--strict", "verif_client")
