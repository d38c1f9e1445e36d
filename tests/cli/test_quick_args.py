"""`memlint check` command lines of paths and on/off flags are parsed without argparse
(memlint/cli.py quick_check, for start-up speed): the arguments must be exactly argparse's, and
every other command line must go to argparse."""
import pytest

from memlint import cli

QUICK = [
    ["check"],
    ["check", "ds_config.json"],
    ["check", "a.yaml", "b/c.sh", "d e.toml", "@f.json", ""],
    ["check", "--skip-unknown", "a.json", "b.json"],
    ["check", "a.json", "b.json", "--skip-unknown", "--quiet"],
    ["check", "-q", "--no-color", "--debug", "--statistics", "--require-estimate", "--hub",
     "--allow-outside-root", "--fix", "--diff", "x"],
    ["check", "--quiet", "--quiet", "x"],
]

ARGPARSE = [
    ["check", "-"],                       # standard input
    ["check", "--", "-x.json"],
    ["check", "--format", "json", "x"],   # an option with a value
    ["check", "--format=json", "x"],
    ["check", "--skip", "x"],             # an abbreviation argparse may accept
    ["check", "-qq", "x"],
    ["check", "-h"],
    ["check", "a", "--quiet", "b"],       # paths on both sides of an option: argparse refuses
    ["estimate", "x"],
    ["--version"],
    [],
]


@pytest.mark.parametrize("words", QUICK, ids=" ".join)
def test_the_quick_arguments_are_argparse_s(words):
    quick = cli.quick_check(words)
    assert quick is not None
    expected = cli.build_parser(words).parse_args(words)
    assert vars(quick) == vars(expected)


@pytest.mark.parametrize("words", ARGPARSE, ids=" ".join)
def test_other_command_lines_go_to_argparse(words):
    assert cli.quick_check(words) is None


def test_every_check_option_is_modeled_or_sent_to_argparse():
    """Each option of check either has its absent value recorded (argparse's default, converted
    as argparse converts it) or makes the recorder give up, so a new kind of option cannot be
    mis-parsed silently."""
    recorder = cli._Recorder()
    cli._check_arguments(recorder)
    parser = cli.build_parser(["check"])
    full = vars(parser.parse_args(["check"]))
    assert recorder.simple
    assert dict(recorder.defaults, command="check", paths=[]) == full
