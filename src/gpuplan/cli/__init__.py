"""The `gpuplan` command: parse arguments, call the API, render, exit with a code.

Exit codes: 0 ok; 1 infeasible project; 2 bad input; 3 a bug in gpuplan (the `internal` error). Each error is one
line on stderr, no traceback unless --debug: the app's command group (cli.common.Commands) is the boundary below
which no exception escapes.

One module per command (or group of subcommands), each with `register(app)`; what they share is in
gpuplan.cli.common. The modules import the API, the catalogs and the reports inside the command bodies, so that
`gpuplan --help` starts without them. The modules do not postpone annotations (`from __future__ import
annotations`): typer reads every command's signature at each start, and would compile each annotation from its
string (7 % of `gpuplan --help`); a helper's annotation that names a type imported for type checking is quoted."""

import sys
from typing import Annotated

import typer

from gpuplan.cli import catalog, check, cost, estimate, export, fit, plan, prices, serve, trace
from gpuplan.cli.common import Commands, broken_pipe, fail_internal, state
from gpuplan.collector import command_of, for_command

app = typer.Typer(cls=Commands, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="gpuplan: which GPU server to get for an AI project, and why.")


@app.callback()
def _main(debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False) -> None:
    state.debug = debug


# the order of `gpuplan --help`
for _command in (estimate, plan, cost, prices, trace, fit, catalog, export, check, serve):
    _command.register(app)
del _command


def main() -> None:
    for_command(command_of(sys.argv[1:]))  # gpuplan.collector; gpuplan.__main__ sets it before the imports too
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
    except typer.Exit as exc:  # raised by fail() outside a command (the group's own parsing)
        sys.exit(exc.exit_code)
    except BrokenPipeError:  # the group's own output (its help) to a closed pipe
        try:
            broken_pipe()
        except typer.Exit as done:
            sys.exit(done.exit_code)
    except Exception as exc:  # noqa: BLE001 - the last boundary: a bug, one line and exit code 3
        try:
            fail_internal(exc)
        except typer.Exit as done:
            sys.exit(done.exit_code)


__all__ = ["app", "main"]
