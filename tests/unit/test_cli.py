"""The mrcnet dispatcher: help, absent subcommands and absent benchmarks fail clearly."""

from __future__ import annotations

import pytest

from mrcnet import cli
from mrcnet.modules import load_optional


def test_no_command_prints_help_and_returns_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


def test_absent_modules_load_as_none() -> None:
    assert load_optional("mrcnet.no_such_module") is None
    assert load_optional("no_such_package.sub") is None
    assert load_optional("mrcnet.cli") is cli


def test_unknown_subcommand_is_an_argparse_error() -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["no-such-command"])
    assert exc.value.code == 2


def test_every_registered_subcommand_has_help() -> None:
    parser = cli.build_parser()
    for name in cli.SUBCOMMANDS:
        with pytest.raises(SystemExit) as exc:
            parser.parse_args([name, "--help"])
        assert exc.value.code == 0
