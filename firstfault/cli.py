"""`firstfault` command line. Exit 0 on success whatever the verdict, 2 on bad input, 1 otherwise, 130/143 when
interrupted by SIGINT/SIGTERM."""
from __future__ import annotations

import argparse
import difflib
import json
import logging
import os
import signal
import sys
import threading
import time

from firstfault import progress
from firstfault.errors import BadInput, refused_by_file_system

# numpy (which pyarrow loads) starts one OpenBLAS thread per core on import; firstfault does no linear algebra, and
# those threads cost a short command about 40 ms of CPU. Set before anything loads numpy; child processes inherit it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


class Terminated(BaseException):
    """SIGTERM raised like KeyboardInterrupt for SIGINT: not an Exception, so no `except Exception` swallows it,
    and every `finally` and open transaction unwinds before the command exits."""


def _terminate(signum, frame):
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    _set_verbosity(args.verbosity)
    in_main_thread = threading.current_thread() is threading.main_thread()  # signal handlers live there only
    previous = signal.signal(signal.SIGTERM, _terminate) if in_main_thread else None
    try:
        return args.handler(args)
    except BadInput as e:
        print(f"firstfault: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("firstfault: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("firstfault: terminated", file=sys.stderr)
        return 143
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return 0
    except Exception as e:  # an internal error: one line, the traceback only on request
        refused = refused_by_file_system(e) if isinstance(e, OSError) else None
        if refused is not None:  # a read-only lake, spool or outbox
            print(f"firstfault: {refused}", file=sys.stderr)
            return 2
        if os.environ.get("FIRSTFAULT_DEBUG"):
            raise
        print(f"firstfault: internal error: {type(e).__name__}: {e} (set FIRSTFAULT_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)


class _Stderr(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a record comes (a test's capture, a redirected stream)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


_LOG_LEVELS = {-1: "ERROR", 0: "WARNING", 1: "INFO"}


def _set_verbosity(level: int) -> None:
    """-q: errors only; default: warnings and progress; -v: also firstfault's and Prefect's info lines. Prefect's
    console handler is set through its environment setting (read when Prefect is first imported, in a handler);
    a value the user exported wins."""
    progress.enable(level >= 0)
    name = _LOG_LEVELS[level]
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", name)
    logger = logging.getLogger("firstfault")
    logger.setLevel(name)
    if not any(isinstance(h, _Stderr) for h in logger.handlers):
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("firstfault: %(levelname)s: %(message)s"))
        logger.addHandler(handler)


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line naming the argument (exit 2); a mistyped choice or option names the closest valid one.
    Subcommands are built with this class too (argparse uses the parent's class for them)."""

    def parse_known_args(self, args=None, namespace=None):
        self._given = list(sys.argv[1:] if args is None else args)  # a subcommand's parser gets its own part
        namespace, extras = super().parse_known_args(args, namespace)
        if self._unknown_option(extras):
            self.error("")
        return namespace, extras

    def error(self, message: str):
        # a mistyped option is the cause of whatever else went wrong (`--statik` leaves the required --static unset)
        unknown = self._unknown_option(getattr(self, "_given", []))
        if unknown:
            names = [o for o in self._option_string_actions if o.startswith("--")] + self._subcommand_names()
            close = difflib.get_close_matches(unknown, names, n=1)
            message = f"unrecognized argument {unknown!r}" + (f": did you mean {close[0]!r}?" if close else "")
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")

    def _unknown_option(self, tokens: list[str]) -> str | None:
        """The first of `tokens` that looks like an option this parser does not know (abbreviations of its long
        options are known). With subcommands, only the tokens before the first positional one are this parser's."""
        has_subcommands = bool(self._subcommand_names())
        for token in tokens:
            if token == "--":
                return None
            if not token.startswith("-") or token == "-" or self._negative_number_matcher.match(token):
                if has_subcommands:
                    return None
                continue
            name = token.split("=", 1)[0] if token.startswith("--") else token[:2]
            if name not in self._option_string_actions and not (
                    name.startswith("--") and any(o.startswith(name) for o in self._option_string_actions)):
                return name
        return None

    def _subcommand_names(self) -> list[str]:
        return [name for a in self._actions if isinstance(a, argparse._SubParsersAction) for name in a.choices]

    def _check_value(self, action, value):
        if action.choices is not None and value not in action.choices:
            choices = [str(c) for c in action.choices]
            close = difflib.get_close_matches(str(value), choices, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise argparse.ArgumentError(action, f"invalid choice {value!r}: {hint}choose from {', '.join(choices)}")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="firstfault", description="Why did this training attempt fail?",
                                     formatter_class=_HelpFormatter, epilog=EXAMPLES[""])
    parser.add_argument("--version", action=_Version)
    _add_verbosity_flags(parser, default=0)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = _command(sub, "demo", help="build the embedded sample lake and attribute every attempt in it")
    demo.add_argument("--dir", default="firstfault-demo", help="where the sample, lake and warehouse go")
    demo.add_argument("--json", action="store_true", help="print the verdicts as JSON lines")
    demo.add_argument("--fleet", type=int, default=20, metavar="N",
                      help="also simulate and attribute N fleet attempts under DIR/fleet and score them (0: none)")
    _add_output_flag(demo)
    demo.set_defaults(handler=_demo)

    attribute = _command(sub, "attribute", help="attribute one workload attempt")
    which = attribute.add_mutually_exclusive_group(required=True)
    which.add_argument("--static", metavar="ATTEMPT.yaml", help="static execution context")
    which.add_argument("--slurm", metavar="JOBID[:ATTEMPT]", help="a Slurm job (every attempt of a requeued job unless :ATTEMPT)")
    which.add_argument("--kueue", metavar="NAMESPACE/WORKLOAD", help="a Kueue workload (every admission is an attempt)")
    which.add_argument("--scheduler", metavar="NAME:REF", help="a plug-in scheduler connector and its id")
    attribute.add_argument("--json", action="store_true", help="print the verdict object")
    attribute.add_argument("--warehouse", help="DuckDB file (default from the config: ./firstfault.duckdb)")
    attribute.add_argument("--lake", help="lake root URL (default from the config: ./lake)")
    attribute.add_argument("--config", help="firstfault.toml (its [rules] and [patterns] dirs add site rules and patterns)")
    attribute.add_argument("--prefect", choices=("auto", "always", "never"), default="auto",
                           help="run as a Prefect flow: auto = when PREFECT_API_URL is set")
    _add_output_flag(attribute)
    attribute.set_defaults(handler=_attribute)

    sql = _command(sub, "sql", help="read-only SQL over the warehouse")
    sql.add_argument("query", help="one SQL statement (the warehouse is opened read-only)")
    sql.add_argument("--warehouse", help="DuckDB file (default from the config)")
    sql.add_argument("--config", help="firstfault.toml")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table",
                     help="table: aligned columns, long values cut with …; csv; json: one object per line")
    sql.add_argument("--lake", help="lake root whose tables the query sees as lake.logs, lake.events, ... (default from the config)")
    sql.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="stop the query after this long (at most 300)")
    sql.add_argument("--limit", type=int, default=10_000, metavar="ROWS", help="show at most this many rows (at most 1000000)")
    sql.set_defaults(handler=_sql)

    nightly = _command(sub, "nightly", help="attribute every attempt of a catalog that ended on a UTC day (default yesterday)")
    when = nightly.add_mutually_exclusive_group()
    when.add_argument("--date", help="the UTC day the attempts ended (default: yesterday)")
    when.add_argument("--since", metavar="YYYY-MM-DD", help="backfill: every night from this UTC day to --until, one warehouse load per night")
    nightly.add_argument("--until", metavar="YYYY-MM-DD", help="last night of a --since backfill, inclusive (default: yesterday)")
    nightly.add_argument("--config", help="firstfault.toml ([catalog] paths, [lake], [warehouse], [schedule] shards)")
    nightly.add_argument("--catalog", metavar="DIR_OR_URL", help="folder, bucket prefix or glob of static contexts (overrides [catalog] paths)")
    nightly.add_argument("--lake", help="lake root URL (default from the config)")
    nightly.add_argument("--warehouse", help="DuckDB file (default from the config)")
    nightly.add_argument("--force", action="store_true", help="redo attempts whose inputs and rules are unchanged")
    nightly.add_argument("--runner", choices=("local", "dask"), default="local", help="where shard tasks run (dask implies Prefect)")
    nightly.add_argument("--address", metavar="tcp://HOST:8786", help="Dask scheduler of a running cluster (default: a local cluster)")
    nightly.add_argument("--shards", type=int, default=0, metavar="N", help="shard tasks (default: [schedule] shards, 0 = automatic)")
    nightly.add_argument("--prefect", choices=("auto", "always", "never"), default="auto",
                         help="run as a Prefect flow: auto = when PREFECT_API_URL is set or --runner dask")
    nightly.add_argument("--json", action="store_true", help="print the summary as JSON")
    _add_output_flag(nightly)
    nightly.set_defaults(handler=_nightly)

    api = _command(sub, "api", help="serve attribution over HTTP (POST /v1/attribute, GET /v1/attempts[/ID], GET /healthz)")
    api.add_argument("--host", default="127.0.0.1", help="address to listen on")
    api.add_argument("--port", type=int, default=8080, help="port to listen on (0: any free port)")
    api.add_argument("--config", help="firstfault.toml (schedulers, plug-ins, rules, patterns)")
    api.add_argument("--warehouse", help="DuckDB file (default from the config)")
    api.add_argument("--lake", help="lake root URL (default from the config)")
    api.add_argument("--no-auth", action="store_true", help="serve without a bearer token (only on a loopback --host)")
    api.set_defaults(handler=_api)

    serve = _command(sub, "serve", help="serve the nightly run as a scheduled Prefect deployment (needs a Prefect server)")
    serve.add_argument("--config", help="firstfault.toml ([schedule] cron, [catalog] paths, ...)")
    serve.add_argument("--name", default="nightly", help="deployment name")
    serve.add_argument("--cron", help="cron schedule in UTC (default: [schedule] cron, 0 2 * * *)")
    serve.add_argument("--catalog", metavar="DIR_OR_URL", help="overrides [catalog] paths")
    serve.set_defaults(handler=_serve)

    report = _command(sub, "report", help="write the offline HTML view of a warehouse")
    report.add_argument("--warehouse", help="DuckDB file (default from the config)")
    report.add_argument("--config", help="firstfault.toml")
    report.add_argument("--out", default="firstfault-report", help="output folder (index.html, attempts/*.html)")
    report.set_defaults(handler=_report)

    simulate = _command(sub, "simulate", help="write a simulated fleet (logs in real formats + truth.jsonl)")
    simulate.add_argument("--nodes", type=int, default=256, help="nodes in the fleet")
    simulate.add_argument("--attempts", type=int, default=500, help="jobs to write (each a first attempt; requeues add more)")
    simulate.add_argument("--days", type=int, default=7, help="start times spread over this many days")
    simulate.add_argument("--out", required=True, metavar="DIR", help="where topology.yaml, catalog/ and truth.jsonl go")
    simulate.add_argument("--seed", type=int, default=0, help="random seed: the same seed writes the same fleet")
    simulate.add_argument("--metrics", action="store_true", help="also write each attempt's metrics CSV (DCGM and IB counters the injected faults move)")
    simulate.add_argument("--requeue-share", type=float, default=0.0, metavar="SHARE",
                          help="share of failed jobs run again as attempts 1, 2, ... (Slurm requeue, restarts)")
    simulate.add_argument("--attribute", action="store_true", help="also land and attribute every attempt (warehouse DIR/firstfault.duckdb)")
    simulate.set_defaults(handler=_simulate)

    evaluate = _command(sub, "evaluate", help="score verdicts: a warehouse against a simulated fleet's truth.jsonl, or a real-line corpus")
    scored = evaluate.add_mutually_exclusive_group(required=True)
    scored.add_argument("--truth", metavar="DIR", help="the --out folder of `firstfault simulate`")
    scored.add_argument("--corpus", metavar="DIR", help="a folder of attempts in the fixture format (e.g. tests/corpus), attributed and scored")
    evaluate.add_argument("--warehouse", help="with --truth: DuckDB file (default DIR/firstfault.duckdb)")
    evaluate.add_argument("--json", action="store_true", help="machine-readable result")
    evaluate.set_defaults(handler=_evaluate)

    rules = _command(sub, "rules", help="test and lint rules (built-in and site rules from the config)")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True)
    dirs_help = ("fixture folders (*.yaml cases; rule files beside them are loaded too); default: the config's "
                 "[rules] dirs plus the built-in rules with the fixtures shipped beside them")
    test = _command(rules_sub, "rules test", help="run every fixture case like `promtool test rules`; exit 1 when one fails")
    test.add_argument("dirs", nargs="*", metavar="DIR", help=dirs_help)
    lint = _command(rules_sub, "rules lint", help="check rule headers, ids, output columns, fixture coverage and pattern files")
    lint.add_argument("dirs", nargs="*", metavar="DIR", help=dirs_help)
    coverage = _command(rules_sub, "rules coverage",
                        help="per emitter, every message of the catalogue and whether the patterns and rules handle it")
    for p in (test, lint, coverage):
        p.add_argument("--config", help="firstfault.toml ([rules] dirs, [patterns] dirs)")
        p.add_argument("--patterns", action="append", default=[], metavar="DIR", help="extra pattern folder (repeatable)")
    for p in (test, lint):
        p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    coverage.add_argument("--catalogue", metavar="DIR", help="a folder of catalogue files (default: the built-in catalogue)")
    coverage.add_argument("--format", choices=("table", "csv", "json"), default="table",
                          help="table: aligned columns; csv; json: one object per line")
    test.set_defaults(handler=_rules_test)
    lint.set_defaults(handler=_rules_lint)
    coverage.set_defaults(handler=_rules_coverage)

    fleet = _command(sub, "fleet", help="fleet aggregates over the warehouse (node_offenders, port_hotspots, ...)")
    fleet_sub = fleet.add_subparsers(dest="fleet_command", required=True)
    fleet_rebuild = _command(fleet_sub, "fleet rebuild", help="rebuild the fleet tables in one transaction")
    fleet_rebuild.add_argument("--warehouse", help="DuckDB file (default from the config)")
    fleet_rebuild.add_argument("--topology", metavar="FILE", help="YAML/CSV node -> switch, switch port (default: [fleet] topology)")
    fleet_rebuild.add_argument("--date", dest="day", help="UTC day the rolling windows end on (default: the latest attempt day)")
    fleet_rebuild.add_argument("--day", dest="day", help=argparse.SUPPRESS)  # the spelling before --date
    fleet_rebuild.add_argument("--config", help="firstfault.toml ([fleet] thresholds)")
    fleet_rebuild.set_defaults(handler=_fleet_rebuild)

    epilog = _command(sub, "epilog", help="Slurm EpilogSlurmctld: queue the finished job for `firstfault worker` when it failed")
    epilog.add_argument("--config", help="firstfault.toml ([automation] spool_dir, queue_all)")
    epilog.add_argument("--spool-dir", help="overrides [automation] spool_dir")
    epilog.set_defaults(handler=_epilog)

    worker = _command(sub, "worker", help="attribute the jobs the epilog queued, notify, and act within [actions] (a service)")
    worker.add_argument("--config", help="firstfault.toml ([automation], [slurm], [webhook], [actions], ...)")
    worker.add_argument("--once", action="store_true", help="one pass over the spool and the outbox, then exit: 0 when both are empty, 75 while something is still queued")
    worker.set_defaults(handler=_worker)

    actions = _command(sub, "actions", help="list the drain/cordon decisions of [actions]; `actions resume ID` returns a node to service")
    actions.add_argument("--config", help="firstfault.toml ([warehouse], [slurm], [kubernetes])")
    actions.add_argument("--warehouse", help="DuckDB file (default from the config)")
    actions.add_argument("--format", choices=("table", "csv", "json"), default="table", help="as `firstfault sql` prints rows")
    actions_sub = actions.add_subparsers(dest="actions_command", metavar="resume")
    resume = _command(actions_sub, "actions resume", help="undo a done drain (scontrol State=RESUME) or cordon")
    resume.add_argument("action_id", type=int, metavar="ID", help="action_id of the row (firstfault actions)")
    resume.add_argument("--config", help="firstfault.toml")
    resume.add_argument("--warehouse", help="DuckDB file (default from the config)")
    resume.set_defaults(handler=_actions_resume)
    actions.set_defaults(handler=_actions)

    init = _command(sub, "init", help="write the commented example firstfault.toml (every key at its default)")
    init.add_argument("path", nargs="?", default="firstfault.toml", metavar="PATH", help="file to write")
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.set_defaults(handler=_init)

    completion = _command(sub, "completion", help="print a shell completion script")
    completion.add_argument("shell", choices=("bash", "zsh"), help="the shell to complete in")
    completion.set_defaults(handler=lambda args: _completion(parser, args))
    _name_placeholders(parser)
    return parser


# one placeholder per kind of value, as docs/cli.md writes them (argparse would print --warehouse WAREHOUSE, --lake LAKE)
PLACEHOLDERS = {"warehouse": "PATH", "lake": "URL", "config": "FILE", "out": "DIR", "day": "YYYY-MM-DD", "date": "YYYY-MM-DD",
                "nodes": "N", "attempts": "N", "days": "N", "seed": "N", "spool_dir": "DIR"}


def _name_placeholders(parser: argparse.ArgumentParser) -> None:
    """Options without a placeholder of their own get the one of their kind, in every subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _name_placeholders(sub)
        elif action.option_strings and action.metavar is None and action.dest in PLACEHOLDERS:
            action.metavar = PLACEHOLDERS[action.dest]


class _Version(argparse.Action):
    """--version, reading the package metadata only when asked: importlib.metadata costs every start ~25 ms."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib.metadata import version

        print(f"firstfault {version('firstfault')}")
        parser.exit()


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Options that take a value show their default when there is one worth reading (flags never); examples (the epilog) keep their lines."""

    def _format_args(self, action, default_metavar):
        text = super()._format_args(action, default_metavar)
        # an optional subcommand (`actions [resume ...]`) in brackets, as every optional part of a usage line
        return f"[{text}]" if isinstance(action, argparse._SubParsersAction) and not action.required else text

    def _get_help_string(self, action):
        unset = action.default is None or action.default is False or action.default == [] or action.default == argparse.SUPPRESS
        if unset or action.nargs == 0 or action.help is None or "default" in action.help:  # no default, or the help already says it
            return action.help
        return super()._get_help_string(action)


EXAMPLES = {
    "": "examples:\n  firstfault demo --dir firstfault-demo\n  firstfault attribute --static attempt.yaml --json\n"
        "  firstfault COMMAND --help",
    "demo": "firstfault demo --dir firstfault-demo --fleet 0",
    "attribute": "firstfault attribute --static firstfault-demo/attempts/headline/attempt.yaml --json",
    "sql": 'firstfault sql "SELECT attempt_id, verdict, domain FROM attributions" --format csv',
    "nightly": "firstfault nightly --config firstfault.toml --date 2026-11-29",
    "api": "firstfault api --no-auth --config firstfault-demo/firstfault.toml  # loopback only; after `firstfault demo`\n"
           "  firstfault api --host 0.0.0.0 --config /etc/firstfault/firstfault.toml  # its [api] token_env or token_file",
    "serve": "prefect server start & export PREFECT_API_URL=http://127.0.0.1:4200/api\n"
             "  firstfault serve --config firstfault.toml",
    "report": "firstfault report --warehouse firstfault.duckdb --out firstfault-report",
    "simulate": "firstfault simulate --nodes 64 --attempts 100 --out fleet --attribute",
    "evaluate": "firstfault evaluate --truth fleet\n  firstfault evaluate --corpus tests/corpus --json",
    "rules": "firstfault rules test my-rules/",
    "rules test": "firstfault rules test my-rules/ --config firstfault.toml",
    "rules lint": "firstfault rules lint --json",
    "rules coverage": "firstfault rules coverage --format csv",
    "fleet": "firstfault fleet rebuild --topology topology.yaml",
    "fleet rebuild": "firstfault fleet rebuild --warehouse firstfault.duckdb --topology topology.yaml --date 2026-11-29",
    "epilog": "EpilogSlurmctld=/etc/slurm/firstfault-epilog.sh  # in slurm.conf; the script:\n"
              "  exec /opt/firstfault/.venv/bin/firstfault epilog --config /etc/firstfault/firstfault.toml",
    "worker": "firstfault worker --config /etc/firstfault/firstfault.toml",
    "actions": "firstfault actions --config /etc/firstfault/firstfault.toml\n"
               "  firstfault actions resume 7 --config /etc/firstfault/firstfault.toml",
    "actions resume": "firstfault actions resume 7 --config /etc/firstfault/firstfault.toml",
    "init": "firstfault init && $EDITOR firstfault.toml",
    "completion": "mkdir -p ~/.local/share/bash-completion/completions  # Debian's bash-completion reads it\n"
                  "  firstfault completion bash > ~/.local/share/bash-completion/completions/firstfault\n"
                  "  # without the bash-completion package: source <(firstfault completion bash) in ~/.bashrc\n"
                  '  firstfault completion zsh > "${fpath[1]}/_firstfault"',
}


def _command(parent, name: str, help: str) -> argparse.ArgumentParser:
    """A subcommand with its description, the global -q/-v, defaults in its help and an example."""
    example = EXAMPLES[name]
    command = parent.add_parser(name.split()[-1], help=help, description=help, formatter_class=_HelpFormatter,
                                epilog=example if example.startswith("examples:") else f"example:\n  {example}")
    _add_verbosity_flags(command, default=argparse.SUPPRESS)  # the top level's value unless given here
    return command


def _add_verbosity_flags(parser: argparse.ArgumentParser, *, default) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=-1, default=default,
                       help="print errors and results only: no progress, no warnings")
    group.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=1, default=default,
                       help="also print info lines (firstfault's and Prefect's run logs)")


def _add_output_flag(command: argparse.ArgumentParser) -> None:
    command.add_argument("--output", action="append", default=[], metavar="KIND:PATH",
                         help="also write the verdicts to sqlite:PATH (upserted) or jsonl:PATH (appended); repeatable")


def _api(args) -> int:
    from firstfault.api import serve
    from firstfault.config import find_config, resolve_config

    if not 0 <= args.port <= 65535:
        raise BadInput("--port", "port", "must be between 0 and 65535")
    source = find_config(args.config)
    serve(resolve_config(source, lake_root=args.lake, warehouse_path=args.warehouse), host=args.host, port=args.port,
          no_auth=args.no_auth, config_file=source)
    return 0


def _existing_warehouse(args, lake_root: str | None = None):
    """The config of a command that reads a warehouse which must exist: --config, FIRSTFAULT_CONFIG, ./firstfault.toml,
    else the one config `firstfault demo` wrote in a folder of this one. A missing warehouse is bad input naming the
    config it came from, or saying that none was read."""
    from pathlib import Path

    from firstfault.config import NO_CONFIG, demo_configs, find_config, resolve_config

    source, demos = find_config(args.config), []
    if source is None:
        demos = demo_configs()
        if len(demos) == 1:
            source = str(demos[0])
            if args.verbosity >= 0:
                print(f"firstfault: config {source} (written by `firstfault demo`; --config or FIRSTFAULT_CONFIG to read "
                      f"another)", file=sys.stderr)
    config = resolve_config(source, lake_root=lake_root, warehouse_path=args.warehouse)
    if not Path(config.warehouse.path).exists():
        if args.warehouse or source:
            why = f"{'' if args.warehouse else f' ([warehouse] path of {source})'}: run `firstfault demo` or `attribute` first"
        elif demos:
            why = f", and {NO_CONFIG}: `firstfault demo` wrote {' and '.join(map(str, demos))}: pass one with --config"
        else:
            why = f", and {NO_CONFIG}: after `firstfault demo --dir DIR`, pass --config DIR/firstfault.toml"
        raise BadInput(config.warehouse.path, "warehouse", f"no such DuckDB file{why}")
    return config


def _fleet_rebuild(args) -> int:
    from firstfault.warehouse.fleet import rebuild

    config = _existing_warehouse(args)
    counts = rebuild(config.warehouse.path, config, day=args.day, topology=args.topology)
    print(", ".join(f"{table}: {n} row{'s' if n != 1 else ''}" for table, n in counts.items()))
    return 0


def _rules_test(args) -> int:
    from firstfault.config import resolve_config
    from firstfault.rules_sql.kit import resolve_dirs, run_tests

    dirs = resolve_dirs(resolve_config(args.config), args.dirs, args.patterns)
    results, _ = run_tests(dirs)
    failed = sum(1 for _, problems in results if problems)
    if args.json:
        print(json.dumps({"passed": len(results) - failed, "failed": failed,
                          "cases": [{"case": c, "passed": not p, "problems": list(p)} for c, p in results]}))
        return 1 if failed else 0
    for case_id, problems in results:
        if problems:
            print(f"FAIL {case_id}")
            for problem in problems:
                print(f"    {problem}")
        else:
            print(f"PASS {case_id}")
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


def _rules_lint(args) -> int:
    from firstfault.config import resolve_config
    from firstfault.rules_sql.kit import lint, resolve_dirs

    problems, summary = lint(resolve_dirs(resolve_config(args.config), args.dirs, args.patterns))
    if args.json:
        print(json.dumps({"ok": not problems, "problems": [str(p) for p in problems], "summary": summary}))
        return 1 if problems else 0
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} ({summary})")
        return 1
    print(f"ok: {summary}")
    return 0


def _rules_coverage(args) -> int:
    from firstfault.config import resolve_config
    from firstfault.rules_sql.catalogue import COVERAGE_COLUMNS, check_catalogue, coverage_rows
    from firstfault.rules_sql.kit import resolve_dirs
    from pathlib import Path

    from firstfault.transforms.messages import load_catalogue
    from firstfault.warehouse.outputs import format_rows

    dirs = resolve_dirs(resolve_config(args.config), [], args.patterns)
    if args.catalogue and not Path(args.catalogue).is_dir():
        raise BadInput(args.catalogue, "--catalogue", "no such directory")
    rows = coverage_rows(check_catalogue(load_catalogue(args.catalogue), dirs.rules, dirs.patterns))
    print(format_rows(COVERAGE_COLUMNS, rows, args.format))
    return 0


def _epilog(args) -> int:
    """Never fails the epilog: whatever goes wrong is one line on stderr (slurmctld's log) and exit 0."""
    from firstfault.connectors.slurm_epilog import QUEUE, queue_job

    spool_dir = args.spool_dir
    try:
        from firstfault.config import load_config

        settings = load_config(args.config).automation
        spool_dir = spool_dir or settings.spool_dir
        queue_job(spool_dir, os.environ, queue_all=settings.queue_all)
    except Exception as e:
        refused = refused_by_file_system(e, os.path.join(spool_dir, QUEUE), _EPILOG_WHERE_TO) if isinstance(e, OSError) and spool_dir else None
        print(f"firstfault epilog: job {os.environ.get('SLURM_JOB_ID', '?')} not queued: {refused or f'{type(e).__name__}: {e}'}",
              file=sys.stderr)
    return 0


_EPILOG_WHERE_TO = "make it writable by SlurmUser or set [automation] spool_dir (or --spool-dir) to a folder it can write"


def _worker(args) -> int:
    from firstfault.config import resolve_config
    from firstfault.worker import STILL_QUEUED, Worker

    worker = Worker(resolve_config(args.config))
    if args.once:
        return STILL_QUEUED if worker.run_once() else 0
    worker.run(threading.Event())
    return 0


def _actions(args) -> int:
    from firstfault.warehouse.actions import ACTION_COLUMNS, list_actions
    from firstfault.warehouse.outputs import format_rows

    rows = list_actions(_existing_warehouse(args).warehouse.path)
    print(format_rows(list(ACTION_COLUMNS), [tuple(r[c] for c in ACTION_COLUMNS) for r in rows], args.format))
    return 0


def _actions_resume(args) -> int:
    from firstfault.warehouse.actions import resume

    row = resume(_existing_warehouse(args), args.action_id)
    print(f"action {row['action_id']}: node {row['node']} returned to service")
    return 0


def _init(args) -> int:
    from importlib import resources
    from pathlib import Path

    target = Path(args.path)
    if target.exists() and not args.force:
        raise BadInput(str(target), None, "already exists (--force replaces it)")
    example = resources.files("firstfault") / "firstfault.example.toml"
    try:
        target.write_text(example.read_text(encoding="utf-8"), encoding="utf-8")
    except OSError as e:
        raise BadInput(str(target), None, f"cannot write: {e.strerror}") from None
    print(f"wrote {target}: every key at its default, commented (docs/configuration.md)")
    return 0


def _completion(parser: argparse.ArgumentParser, args) -> int:
    from firstfault.completion import completion_script

    print(completion_script(parser, args.shell))
    return 0


def _attribute(args) -> int:
    from firstfault.config import resolve_config
    from firstfault.warehouse.outputs import parse_outputs

    outputs = parse_outputs(args.output)
    config = resolve_config(args.config, lake_root=args.lake, warehouse_path=args.warehouse)
    specs = [args.static] if args.static else _resolve_scheduler_specs(args, config)
    use_prefect = args.prefect == "always" or (args.prefect == "auto" and os.environ.get("PREFECT_API_URL"))
    if use_prefect:
        from firstfault.flows.attempt import attribute_attempt
        from firstfault.flows.temporary_api import prefect_api

        with prefect_api():
            attempt_ids = attribute_attempt(specs, args.config, config.lake.root, config.warehouse.path)
    else:
        from firstfault.connectors.static_context import load_static_context
        from firstfault.run import run_attempts

        contexts = [load_static_context(p, config.api) for p in specs]
        run_attempts(contexts, config, flow="attribute-attempt")
        attempt_ids = [c.attempt_id for c in contexts]
    verdicts = _written_verdicts(config.warehouse.path, attempt_ids, outputs)
    if not args.static:  # [actions] act on attempts a scheduler connector found, never on a hand-written context
        from firstfault.warehouse.actions import apply_actions

        apply_actions(config, verdicts, "scheduler" if args.scheduler else "slurm" if args.slurm else "kueue")
    _print_verdicts(verdicts, as_json=args.json, single=len(attempt_ids) == 1)  # last: a closed stdout skips nothing
    return 0


def _resolve_scheduler_specs(args, config) -> list[str]:
    from firstfault.connectors.registry import resolve_scheduler_specs

    kind = "scheduler" if args.scheduler else "slurm" if args.slurm else "kueue"
    return resolve_scheduler_specs(config, kind, getattr(args, kind), f"--{kind}")


def _simulate(args) -> int:
    from firstfault.synthetic.simulate import attribute_fleet, simulate

    if args.nodes < 1 or args.attempts < 1 or args.days < 1:
        raise BadInput("<command line>", "--nodes/--attempts/--days", "must be at least 1")
    if not 0 <= args.requeue_share <= 1:
        raise BadInput("<command line>", "--requeue-share", "must be between 0 and 1")
    truth = simulate(args.out, nodes=args.nodes, attempts=args.attempts, days=args.days, seed=args.seed,
                     metrics=args.metrics, requeue_share=args.requeue_share)
    written = len(truth.read_text(encoding="utf-8").splitlines())
    print(f"wrote {written} attempts of {args.attempts} jobs on {args.nodes} nodes; truth: {truth}")
    if args.attribute:
        print(f"warehouse: {attribute_fleet(args.out)}")
    return 0


def _evaluate(args) -> int:
    from firstfault.synthetic.scorecard import render

    if args.corpus:
        from firstfault.rules_sql.corpus import evaluate_corpus

        if args.warehouse:
            raise BadInput("<command line>", "--warehouse", "only with --truth: a corpus is attributed afresh")
        result, title = evaluate_corpus(args.corpus), f"real-line corpus {args.corpus}"
    else:
        result, title = _evaluate_fleet(args.truth, args.warehouse), f"simulated fleet {args.truth}"
    print(json.dumps(result, default=str) if args.json else render(result, title))
    return 0


def _evaluate_fleet(folder: str, warehouse: str | None) -> dict:
    from pathlib import Path

    from firstfault.synthetic.simulate import evaluate

    truth = Path(folder) / "truth.jsonl"
    if not truth.is_file():
        raise BadInput(str(truth), "truth", "no truth.jsonl (run `firstfault simulate --out DIR` first)")
    warehouse = warehouse or str(Path(folder) / "firstfault.duckdb")
    if not Path(warehouse).is_file():
        raise BadInput(warehouse, "warehouse", "no such DuckDB file (run `firstfault simulate --attribute` first)")
    return evaluate(folder, warehouse)


def _demo(args) -> int:
    from firstfault.synthetic.demo import run_demo
    from firstfault.warehouse.outputs import parse_outputs

    outputs = parse_outputs(args.output)
    warehouse, attempt_ids = run_demo(args.dir, fleet=max(0, args.fleet))
    _print_verdicts(_written_verdicts(warehouse, attempt_ids, outputs), as_json=args.json, single=False)
    if args.fleet > 0 and not args.json:
        from pathlib import Path

        from firstfault.synthetic.scorecard import render
        from firstfault.synthetic.simulate import evaluate

        card = render(evaluate(Path(args.dir) / "fleet", warehouse), f"simulated fleet {Path(args.dir) / 'fleet'}")
        print("\n" + card.split("\n\n")[0])  # the measures, without the matrix and the lists
    if not args.json:
        from pathlib import Path

        config = Path(args.dir) / "firstfault.toml"
        print(f"\nwarehouse: {warehouse}\nconfig: {config} (its lake, warehouse and catalog: pass --config {config} to sql, "
              f"report, nightly, api)\ntry: firstfault sql --config {config} \"SELECT attempt_id, verdict, domain, subdomain FROM attributions\"")
    return 0


def _written_verdicts(warehouse: str, attempt_ids: list[str], outputs) -> list[dict]:
    """The stored verdicts of `attempt_ids`, written to every `--output` target."""
    from firstfault.warehouse.outputs import write_outputs
    from firstfault.warehouse.read import stored_verdicts

    verdicts = stored_verdicts(warehouse, attempt_ids)
    write_outputs(outputs, verdicts)
    return verdicts


def _print_verdicts(verdicts: list[dict], *, as_json: bool, single: bool) -> None:
    from firstfault.warehouse.outputs import render_text, verdict_json

    if as_json:
        if single:
            print(json.dumps(verdicts[0], indent=2, default=str))
        else:
            for v in verdicts:
                print(verdict_json(v))
    else:
        print(render_text(verdicts))


def _nightly(args) -> int:
    from firstfault.config import resolve_config
    from firstfault.nightly import night_range, parse_run_date, render_summary
    from firstfault.warehouse.outputs import parse_outputs, write_outputs
    from firstfault.warehouse.read import stored_verdicts

    outputs = parse_outputs(args.output)
    config = resolve_config(args.config, lake_root=args.lake, warehouse_path=args.warehouse)
    if args.until and not args.since:
        raise BadInput("--until", "until", "needs --since")
    days = night_range(args.since, args.until) if args.since else [parse_run_date(args.date)]
    if args.shards < 0:
        raise BadInput("--shards", "shards", "must be >= 0")
    if args.address and args.runner != "dask":
        raise BadInput("--address", "address", "needs --runner dask")
    use_prefect = args.runner == "dask" or args.prefect == "always" or (args.prefect == "auto" and os.environ.get("PREFECT_API_URL"))
    if use_prefect:
        from firstfault.flows.nightly import run

        summaries = run(args.runner, args.address, run_date=days[0].isoformat(), until=days[-1].isoformat(),
                        config_path=args.config, catalog=args.catalog, lake_root=config.lake.root,
                        warehouse_path=config.warehouse.path, force=args.force, shards=args.shards)
    else:
        from firstfault.nightly import run_nights

        summaries = run_nights(config, days, args.catalog, args.force, args.shards)
    for summary in summaries:  # every night's outputs before the first line printed: a closed stdout skips none
        if outputs:
            write_outputs(outputs, stored_verdicts(config.warehouse.path, summary["attempt_ids"]))
    for summary in summaries:
        print(json.dumps(summary, default=str) if args.json else render_summary(summary))
    return 0


def _serve(args) -> int:
    from firstfault.flows.nightly import serve

    serve(args.config, name=args.name, cron=args.cron, catalog=args.catalog)
    return 0


def _report(args) -> int:
    from firstfault.warehouse.report import write_report

    index = write_report(_existing_warehouse(args).warehouse.path, args.out)
    print(f"report: {index}")
    return 0


def _sql(args) -> int:
    from firstfault.warehouse.adhoc import MAX_LIMIT, MAX_TIMEOUT_S, QueryLeftBehind, run_adhoc
    from firstfault.warehouse.outputs import format_rows

    if not 0 < args.timeout <= MAX_TIMEOUT_S:
        raise BadInput("--timeout", "timeout", f"must be > 0 and at most {MAX_TIMEOUT_S:g} seconds")
    if not 0 < args.limit <= MAX_LIMIT:
        raise BadInput("--limit", "limit", f"must be > 0 and at most {MAX_LIMIT} rows")
    config = _existing_warehouse(args, lake_root=args.lake)
    started = time.monotonic()
    try:
        answer = run_adhoc(config.warehouse.path, args.query, config.lake.root, args.timeout, args.limit)
    except QueryLeftBehind as e:  # the interpreter's teardown would close DuckDB, which waits for the blocked read
        print(f"firstfault: {e}", file=sys.stderr, flush=True)
        os._exit(2)
    print(format_rows(answer.names, answer.rows, args.format))
    rows = len(answer.rows)
    if args.format == "table":
        print(f"({rows} row{'s' if rows != 1 else ''}, {time.monotonic() - started:.3f} s)", file=sys.stderr)
    if answer.more:
        print(f"firstfault: sql: more than {rows} rows: the first {rows} are shown (--limit)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
