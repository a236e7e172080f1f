"""The `fsb` command line: a thin layer over the stages, one module per stage's commands.

app           the parser, dispatch, the one place expected failures become one line and exit 2
registry      the one way a module registers subcommands
argtypes      argparse types that check values
engine_args   the endpoint/run options shared by the commands that send requests
generate, annotate_llm, publish, report, analyse   the commands of each stage
"""

from fsb.cli.app import main

__all__ = ["main"]
