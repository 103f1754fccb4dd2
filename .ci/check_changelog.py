"""A change to verif_client/ comes with a changelog fragment, or says it is not user-visible.

Compares HEAD with its merge base on main (or on $CHANGELOG_BASE). Passes when the branch adds a
fragment to changelog.d/, or when every commit of the branch that touches verif_client/ carries
the trailer `Changelog: none`. With nothing to compare against (HEAD is main itself, as in CI's
fresh clone, or no main exists) it says so and passes: the check belongs to branches.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

FRAGMENTS = "changelog.d/"
PACKAGE = "verif_client/"
TRAILER = "Changelog: none"


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def fragment_types() -> list[str]:
    """The fragment types towncrier gathers (pyproject.toml's [[tool.towncrier.type]])."""
    pyproject = tomllib.loads(Path("pyproject.toml").read_text())
    return [kind["directory"] for kind in pyproject["tool"]["towncrier"]["type"]]


def base_commit() -> str:
    for candidate in filter(None, (os.environ.get("CHANGELOG_BASE"), "origin/main", "main")):
        base = git("merge-base", "HEAD", candidate)
        if base:
            return base
    return ""


def main() -> int:
    base = base_commit()
    head = git("rev-parse", "HEAD")
    if not base or base == head:
        print("changelog: nothing to compare against (HEAD is the base, or no main): skipped")
        return 0
    added = git("diff", "--name-only", "--diff-filter=A", f"{base}..HEAD", "--", FRAGMENTS)
    fragments = [path for path in added.splitlines() if not path.endswith("README.md")]
    # `<issue>.<type>.md` or `+<name>.<type>.md` (towncrier's counter `.2` allowed).
    named = re.compile(rf"[^/.]+\.({'|'.join(fragment_types())})(\.\d+)?\.md")
    misnamed = [path for path in fragments if not named.fullmatch(Path(path).name)]
    if misnamed:
        print(
            f"changelog: towncrier would not gather {', '.join(misnamed)}: name a fragment "
            f"<issue>.<type>.md with a type of {', '.join(fragment_types())}",
            file=sys.stderr,
        )
        return 1
    if fragments:
        print(f"changelog: {len(fragments)} fragment(s) since {base[:10]}: {', '.join(fragments)}")
        return 0
    unmarked = []
    for commit in git("rev-list", f"{base}..HEAD", "--", PACKAGE).splitlines():
        trailers = git("log", "-1", "--format=%(trailers:only,unfold)", commit)
        if TRAILER.lower() not in trailers.lower():
            unmarked.append(git("log", "-1", "--format=%h %s", commit)[:100])
    if not unmarked:
        print(f"changelog: no change to {PACKAGE} needs a fragment since {base[:10]}")
        return 0
    print(
        f"changelog: these commits change {PACKAGE} but the branch adds no fragment to "
        f"{FRAGMENTS} (see its README.md); add one, or end each commit message with the "
        f"trailer '{TRAILER}' if nothing a user can notice changed:",
        file=sys.stderr,
    )
    for line in unmarked:
        print(f"  {line}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
