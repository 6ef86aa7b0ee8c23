"""`python -m gpuplan` and the `gpuplan` command (pyproject's entry point). The collector's policy for the command
is set before the command's modules are imported (gpuplan.collector: the imports of typer, pydantic and the schema
allocate objects they keep, which the collector would walk at every threshold; 0.6 % of `gpuplan plan`), then
gpuplan.cli runs it."""

import sys

from gpuplan.collector import command_of, for_command


def main() -> None:
    for_command(command_of(sys.argv[1:]))
    from gpuplan.cli import main as run

    run()


if __name__ == "__main__":
    main()
