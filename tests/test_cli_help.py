"""What `--help` and usage errors tell a new user: every command described, `call` showing the
operations' parameters and an example, an unknown flag pointed at its own command's help, and the
demo's ending saying where its files went and what to try next."""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from verif_client import OPERATIONS
from verif_client._cli import build_parser, main


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from commands(sub, (*path, name))


LEAVES = [path for path, sub in commands(build_parser()) if path != ("bulk",)]


@pytest.mark.parametrize("path", LEAVES, ids=" ".join)
def test_every_command_has_a_description_in_its_help(path: tuple[str, ...]) -> None:
    parser = dict(commands(build_parser()))[path]
    assert parser.description
    assert parser.description.split()[0] in parser.format_help()


def test_call_help_lists_every_operation_with_its_parameters_and_an_example() -> None:
    text = dict(commands(build_parser()))[("call",)].format_help()
    for op in OPERATIONS:
        line = next(
            line
            for line in text.splitlines()
            if line.strip().startswith(op.name + " ") or line.strip() == op.name
        )
        assert [part.split("=")[0] for part in line.split()[1:]] == list(op.param_names)
    example = text[text.index("example:") :].replace("\\\n", " ").split("\n", 1)[1]
    argv = shlex.split(example)
    assert argv[:2] == ["verif-client", "call"]
    assert build_parser().parse_args(argv[1:]).operation == OPERATIONS[0].name


@pytest.mark.parametrize(
    "argv",
    [
        ["call", "GetMobileConsentText", "--nope"],
        ["bulk", "run", "--journal", "j", "--output", "o", "--nope"],
        ["bulk", "status", "--journal", "j", "--nope"],
        ["bulk", "export", "--journal", "j", "--output", "o", "--nope"],
        ["demo", "--nope"],
        ["simulate", "--nope"],
    ],
    ids=lambda argv: " ".join(word for word in argv if not word.startswith("-") and len(word) > 1),
)
def test_an_unknown_flag_points_at_its_own_commands_help(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    command = "verif-client " + " ".join(argv[:2] if argv[0] == "bulk" else argv[:1])
    assert capsys.readouterr().err == (
        f"{command}: unrecognized arguments: --nope (see {command} --help)\n"
    )


def test_the_demo_says_where_its_files_went_and_what_to_try_next(tmp_path: Path) -> None:
    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        code = "import sys; from verif_client._cli import main; sys.exit(main())"
        return subprocess.run(
            [sys.executable, "-c", code, *argv],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    done = cli("demo", "--rows", "30", "--keep", "kept")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for name in ("demo-journal.sqlite", "demo-results.jsonl", "demo-numbers.csv"):
        assert f"kept/{name}" in out
        assert (tmp_path / "kept" / name).stat().st_size > 0
    tries = [line.split()[1:] for line in out.splitlines() if line.startswith("  verif-client")]
    assert [argv[:2] for argv in tries] == [
        ["bulk", "status"],
        ["bulk", "export"],
        ["simulate", "--port"],
        ["bulk", "run"],
    ]
    status = cli(*tries[0])
    assert status.returncode == 0
    assert status.stdout.splitlines()[-1].split() == ["total", "30"]
    assert cli(*tries[1]).returncode == 0
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 30

    unkept = cli("demo", "--rows", "5")
    assert "now removed; to keep them:" in unkept.stdout
    assert "verif-client demo --keep demo" in unkept.stdout


@pytest.mark.parametrize(
    ("argv", "imports_simulator"),
    [
        (["bulk", "status", "--journal", "missing.sqlite"], False),
        (["-v", "bulk", "export", "--journal", "missing.sqlite", "--output", "-"], False),
        (["worker", "--help"], False),
        (["simulate", "--help"], True),
        (["-v", "simulate", "--help"], True),
    ],
)
def test_only_simulate_imports_the_simulator(argv: list[str], imports_simulator: bool) -> None:
    # A fresh interpreter: what the command itself imported, nothing a test did.
    probe = (
        "import sys\nfrom verif_client._cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print('verif_client.simulator' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.splitlines()[-1] == str(imports_simulator), done.stderr
