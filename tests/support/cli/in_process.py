"""The command line run in this process: its exit code, and the two lines of a usage
error (the command's usage, then the error)."""

from __future__ import annotations

import pytest

from mcpd.cli.exits import EXIT_USAGE
from mcpd.cli.main import main


def exit_of(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    code = caught.value.code
    assert isinstance(code, int)
    return code


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """(the usage line, the error line) of a command line argparse refuses."""
    assert exit_of(argv) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    error = lines[-1]
    assert error.startswith("mcpd") and ": error: " in error, err
    assert lines[0].startswith("usage: mcpd"), err
    return lines[0], error
