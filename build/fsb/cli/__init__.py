"""The `fsb` command line: a thin layer over the stages, one module per stage's commands.

app           the parser (commands in workflow order, an exit-status table), dispatch, the one place expected
              failures become one line and exit 2
registry      the one way a module registers subcommands (annotate's actions included)
common        the options and helpers the command modules share (--force, --invalid, ORG/NAME@REV, JSON)
argtypes      argparse types that check values (each bound with its reason)
engine_args   the endpoint/run options shared by the commands that send requests
data, generate, bws, annotate, annotate_llm, analyse, evaluate, report, publish   the commands of each stage
"""

from fsb.cli.app import main

__all__ = ["main"]
