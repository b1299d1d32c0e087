"""`assess`: score run directories into the index, show status, write a report.

Thin: each command parses its options and calls one library function; domain errors
(AssessError) become a one-line message and exit code 1.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from assess.errors import AssessError, Refused, RunDirError
from assess.errors import disk_full
from assess.report.outdir import ForeignFolder
from assess.export.errors import TrackerUnavailable
from render.compose.metric_registry import quality_metric_names, scored_metric_names
from render.compose.mistakes import CompositionMistake
from render.rundir.redact import shown
from render.run.signals import Cancelled, cancel_on_signals

DB_HELP = "index database (default: $HYPERGRID_INDEX, else outputs/index.db)"


def db_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--db", "db", type=click.Path(dir_okay=False, path_type=Path), envvar="HYPERGRID_INDEX",
                        default=Path("outputs") / "index.db", show_default=True, help=DB_HELP)(fn)


def given(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An address or URI option that is empty (`--addr "$VAR"` with the variable unset) is refused as a malformed one
    is: "" would mean every network interface, or a local store, not what was meant."""
    if value is not None and not value.strip():
        raise click.BadParameter(f"{value!r} is empty (a variable that is not set?): give the address itself, or leave "
                                 "the option out for its default", ctx=ctx, param=param)
    return value


class Unavailable(click.ClickException):
    exit_code = 2  # a tracker or exporter that cannot be had: the same exit as a bad launch's preflight


@contextmanager
def user_errors(db: Path | None = None) -> Iterator[None]:
    import sqlite3

    from assess.index.database import damaged, default_index_path, is_damage

    try:
        yield
    except TrackerUnavailable as exc:
        raise Unavailable(str(exc)) from exc
    except (ForeignFolder, Refused) as exc:  # bad input, refused before anything was written
        raise Unavailable(str(exc)) from exc
    except (AssessError, RunDirError, CompositionMistake) as exc:  # CompositionMistake: an override naming nothing
        raise click.ClickException(str(exc)) from exc
    except OSError as exc:  # a folder or file of the machine (--out under a file, a full disk): one line, exit 1
        raise click.ClickException(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")) from exc
    except sqlite3.DatabaseError as exc:  # damage found past the open (a truncated file reads until it does not)
        path = db or default_index_path()
        if disk_full(exc, path):  # sqlite rolled the transaction back: the index holds what it held
            raise click.ClickException(f"{path}: {exc}: its disk is full; nothing of this command was kept in the "
                                       "index (it is as it was): free some space and run it again") from exc
        if is_damage(exc):
            raise click.ClickException(str(damaged(path, exc))) from exc
        if "readonly" in str(exc) or "unable to open" in str(exc):
            raise click.ClickException(f"{path} cannot be written by this user ({exc}): score into an index you can "
                                       "write (--db PATH or $HYPERGRID_INDEX); `assess report` reads this one as it is") from exc
        raise
    except Cancelled as exc:  # a stop signal, passed on to the render it was running
        echo(f"cancelled: {exc}", err=True)
        sys.exit(exc.exit_code)


def echo(message: str = "", err: bool = False, nl: bool = True) -> None:
    """click.echo with the credentials of every URL in `message` redacted and its control characters escaped
    (render.rundir.redact.shown): every line this CLI prints goes through here, its errors through Redacting."""
    click.echo(shown(message), err=err, nl=nl)


class Redacting(click.Group):
    """The CLI's group: the message of every error a command raises (a ClickException: a user error, a bad
    parameter) has its credentials redacted before click prints it."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            vars(exc)["message"] = shown(exc.message)  # click declares it Final; its show() reads it
            raise


@click.group(cls=Redacting, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hypergrid", message="%(version)s")
def cli() -> None:
    """Score hypergrid run directories into a sqlite index, show status, write a report."""


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@db_option
@click.option("--metrics", "metrics", default=None, metavar="NAMES",
              help=f"comma-separated metrics (default: all: {', '.join(scored_metric_names())})")
@click.option("--clip-model", default=None, envvar="HYPERGRID_CLIP_MODEL", metavar="ID_OR_FOLDER",
              help="CLIP model for clip_score: hub id or local folder (default: openai/clip-vit-large-patch14)")
@click.option("--metric-model", "metric_models", multiple=True, metavar="METRIC=ID_OR_FOLDER",
              help="the model a metric uses, e.g. pickscore=/models/PickScore_v1 (repeatable; docs/quality.md)")
@click.option("--force", is_flag=True, help="recompute scores that are already current")
@click.option("--rebuild", is_flag=True,
              help="build the index anew from every run PATHS know (an output root: its registered folders too), "
                   "then replace the old one (damaged or not); prints the counts before and after")
@click.option("-q", "--quiet", is_flag=True, help="print only the summary line")
@click.option("-v", "--verbose", is_flag=True,
              help="each unavailable metric's own reason, and every third-party warning (HYPERGRID_VERBOSE=1)")
def score(paths: tuple[Path, ...], db: Path, metrics: str | None, clip_model: str | None,
          metric_models: tuple[str, ...], force: bool, rebuild: bool, quiet: bool, verbose: bool) -> None:
    """Score runs under PATHS (run directories, sweep folders or outputs/) into the index. A run that cannot be
    read or indexed is named, the others are scored, and the command exits 1."""
    from render.run.quiet import show_everything, verbose as verbose_env

    if verbose:
        show_everything()
    verbose = verbose or verbose_env()
    from assess.scoring.rebuild import rebuild_index
    from assess.scoring.ingest import score as score_runs

    names = [m.strip() for m in metrics.split(",") if m.strip()] if metrics else None
    models = {}
    for item in metric_models:
        metric, sep, model = item.partition("=")
        if not sep or not metric.strip() or not model.strip():
            raise click.BadParameter(f"{item!r}: give METRIC=ID_OR_FOLDER, e.g. pickscore=/models/PickScore_v1",
                                     param_hint="--metric-model")
        models[metric.strip()] = model.strip()
    log = None if quiet else (lambda line: echo(line, err=True))
    with user_errors(db), _progress(quiet) as progress:
        if progress is not None:
            log = None  # the progress line names what is done; a line per run folder would scroll it away
        if rebuild:
            result = rebuild_index(list(paths), db, metrics=names, clip_model=clip_model, log=log,
                                   metric_models=models)
            summary = result.summary
        else:
            summary = score_runs(list(paths), db, metrics=names, clip_model=clip_model, force=force, log=log,
                                 metric_models=models, progress=progress)
    lines = summary.lines(verbose)
    echo("\n".join(lines[:1] if quiet else lines))
    if rebuild:
        echo(result.line())
    if not quiet:
        _answer([p for p in paths if p.is_dir()], db)
    if summary.failed:
        sys.exit(1)


@contextmanager
def _progress(quiet: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A progress line on stderr (rich) for `assess score` when stderr is a terminal and not -q; None otherwise."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("scoring run folders"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("score", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield advance


@cli.command()
@click.argument("path", type=click.Path(path_type=Path), default=Path("outputs"), required=False)
@click.option("--json", "as_json", is_flag=True, help="print a JSON list, one object per cell")
@db_option
@click.option("--quality-metric", default=None, metavar="NAME",
              help="with --json and an index: the metric of each cell's answers per category (default: the first "
                   "quality metric the cell has)")
@click.option("--band", type=click.FloatRange(min=0, min_open=True), default=None, metavar="B",
              help="with an index: a \"what if\" parity band, shown beside the recorded verdict (labelled what if; "
                   "in --json under what_if), never in its place")
@click.option("--openmetrics", is_flag=True, help="print the progress once in the Prometheus text format")
@click.option("--serve", is_flag=True, help="serve the Prometheus metrics at --addr:--port/metrics until Ctrl-C")
@click.option("--port", type=click.IntRange(0, 65535), default=9464, show_default=True, help="with --serve")
@click.option("--addr", default="127.0.0.1", show_default=True, callback=given, help="with --serve: the address to listen on")
@click.option("--textfile", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE.prom",
              help="write the metrics to FILE.prom for node_exporter's textfile collector (with --serve: every "
                   "--interval seconds)")
@click.option("--interval", type=click.FloatRange(min=0.1), default=15.0, show_default=True,
              help="with --serve and --textfile: seconds between rewrites")
def status(path: Path, as_json: bool, db: Path, quality_metric: str | None, band: float | None, openmetrics: bool,
           serve: bool, port: int, addr: str, textfile: Path | None, interval: float) -> None:
    """One line per cell of a sweep (or run, default outputs/): done, failed, running, crashed, pending; with --json
    and an index, each scored cell's paired delta to its anchor per category ("quality"); or its progress as
    Prometheus metrics (--openmetrics, --serve, --textfile: docs/trackers.md)."""
    if serve or openmetrics or textfile:
        from assess.export import openmetrics as om

        with user_errors():
            if textfile is not None:
                om.check_textfile(textfile)
            if serve:
                om.serve(path, port, addr, textfile, interval, log=lambda line: echo(line, err=True))
                return
            if textfile is not None:
                om.write_textfile(path, textfile)
            if openmetrics:
                echo(om.metrics_text(path), nl=False)
        return
    from assess.status import format_plain, print_table, with_drift
    from assess.status import status as sweep_status
    from assess.verdicts.recorded import label_what_if, recorded_verdicts, verdict_lines

    with user_errors():
        rows = with_drift(sweep_status(path), db)  # a parallel cell outside parity with one GPU (assess.statistics.parity)
    recorded = recorded_verdicts([r.path for r in rows if r.path])
    quality: dict[str, Any] = {}
    speeds: dict[str, Any] = {}
    if (as_json or band is not None) and db.is_file():
        from assess.report.category_sheet import cells_quality
        from assess.index.database import Index
        from assess.statistics.scope import path_scope
        from assess.statistics.compare import cell_speeds

        keys = [r.cell_key for r in rows if r.cell_key]
        with user_errors(), Index.open(db, create=False) as index:
            scope = path_scope(index, path)
            quality = cells_quality(index, keys, quality_metric, band, scope=scope)
            speeds = cell_speeds(index, keys, scope=scope) if as_json else {}
    if as_json:
        records = [r.as_dict() for r in rows]
        if quality or speeds:
            for record in records:
                if record["cell_key"] in quality:
                    found = quality[record["cell_key"]]
                    record["quality"] = found if band is None else label_what_if(found, band)
                if record["cell_key"] in speeds:  # side by side when timed so (assess retime), else timed apart
                    record["speed"] = speeds[record["cell_key"]]
        for record in records:  # the verdict is the recorded one, under the frozen rule
            if record["cell_key"] in recorded:
                record["recorded_verdict"] = recorded[record["cell_key"]]
        _with_default_verdicts(records, path, db)
        echo(json.dumps(records, indent=1))
    else:
        if sys.stdout.isatty():
            print_table(rows)
        else:
            echo(format_plain(rows))
        what_if = {key: {split: answers.get("verdict") for split, answers in found.items()}
                   for key, found in quality.items()} if band is not None else None
        lines = verdict_lines([(r.name, r.cell_key) for r in rows if r.cell_key], recorded, band, what_if)
        if lines:
            echo("\n".join(lines))
        if db.is_file():
            _answer([path], db)
    if any(r.state == "unreadable" for r in rows):
        sys.exit(1)


def _with_default_verdicts(records: list[dict[str, Any]], path: Path, db: Path) -> None:
    """Each record of a sweep's cell gets its verdict under the report's default rule, with the metric, the band and
    where the band comes from (assess.verdicts.default_rule): a verdict is never read without the band it was decided at."""
    from render.rundir import is_sweep_folder

    if not db.is_file() or not is_sweep_folder(path):
        return
    from assess.report.write import sweep_table

    with user_errors(db):
        table = sweep_table([path], db)
    if table is None:
        return
    by_key = {r["cell_key"]: r for r in table["rows"] if not r["is_anchor"]}
    for record in records:
        row = by_key.get(record["cell_key"])
        if row is not None:
            record["verdict"] = {"verdict": row["verdict"], "metric": table["metrics"][0], "band": table["band"],
                                 "band_source": table["band_source"], "speedup": row["speedup"], "timed": row["timed"]}


def _answer(paths: list[Path], db: Path) -> None:
    """The one sentence of the sweeps among `paths` under the default rule (assess.verdicts.answer), and the next command."""
    with user_errors(db):
        lines = _answer_lines(_sweeps_among(paths), db)
    for line in lines:
        echo(line)


def _sweeps_among(paths: Sequence[Path]) -> list[Path]:
    from render.rundir import is_sweep_folder

    return [p for p in paths if p.is_dir() and is_sweep_folder(p)]


def _answer_lines(sweeps: list[Path], db: Path) -> list[str]:
    """`answer: ...` and `next: ...` of these sweeps (none without a sweep); NotScored when none of their runs is
    indexed."""
    if not sweeps:
        return []
    from assess.report.write import sweep_answer

    answer = sweep_answer(sweeps, db)
    return [f"answer: {answer.text}", f"next: {answer.next}"] if answer else []


def _retime_ending(paths: Sequence[Path], db: Path) -> list[str]:
    """How `assess retime` ends, as `assess score` does: the sweeps' answer with the new side-by-side figures and
    the next command; runs not scored yet (nothing indexed to answer from) end with the command that scores them."""
    from assess.errors import NotScored

    sweeps = _sweeps_among(paths)
    with user_errors(db):
        try:
            lines = _answer_lines(sweeps, db)
        except NotScored:
            lines = []
    return lines or [f"next: assess score {' '.join(shlex.quote(str(p)) for p in (sweeps or paths))}"]


@cli.command()
@click.argument("sweeps", nargs=-1, required=True, type=click.Path(path_type=Path))
@db_option
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="report folder (default: <first sweep>/report, or <out_root>/experiments/<name>/report)")
@click.option("--quality-metric", default=None, metavar="NAME",
              help=f"quality axis of the Pareto plot: {', '.join(quality_metric_names())} (default: the first "
                   "of these that the cells have)")
@click.option("--out-root", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="for an experiment: the output root of its renders (default: the experiment config's out_root)")
@click.option("--set", "overrides", multiple=True, metavar="OVERRIDE",
              help="for an experiment: a Hydra override composed with it, as `assess climb --set` (repeatable)")
@click.option("--band", type=click.FloatRange(min=0, min_open=True), default=None, metavar="B",
              help="parity band in the quality metric's units: decide each cell's parity and flag the categories "
                   "a cell at parity is out of band on (docs/quality.md); beside a recorded verdict (an experiment's "
                   "frozen rule), a \"what if\" labelled as such, never in its place")
@click.option("--test", "parity_test", type=click.Choice(["noninferiority", "equivalence"]), default="noninferiority",
              show_default=True, help="with --band: the parity question (docs/climb.md)")
@click.option("--price-per-gpu-hour", type=click.FloatRange(min=0), default=None, metavar="PRICE",
              help="the verdict table's cost per 1,000 images in money too")
def report(sweeps: tuple[Path, ...], db: Path, out: Path | None, quality_metric: str | None,
           out_root: Path | None, overrides: tuple[str, ...], band: float | None, parity_test: str,
           price_per_gpu_hour: float | None) -> None:
    """Write an HTML report and print its path, then its cache engagement and compile break-even lines: of SWEEPS
    (leaderboard, Pareto plot, contact sheets, failures),
    or of an experiment's whole climb when the one argument names an experiment and no folder. A run directory it
    cannot read is named in the report and here, and the command exits 1."""
    problems: list[str] = []
    notes: list[str] = []
    with user_errors(db):
        if len(sweeps) == 1 and not sweeps[0].exists() and _is_experiment(str(sweeps[0])):
            from assess.climb.experiment_report import write_experiment_report

            path = write_experiment_report(str(sweeps[0]), db, out_root=out_root, overrides=overrides, out=out,
                                           what_if_band=band)
        else:
            from assess.report.write import write_report

            path = write_report(list(sweeps), db, out=out, quality_metric=quality_metric, problems=problems,
                                band=band, notes=notes, test=parity_test, price_per_gpu_hour=price_per_gpu_hour)
    echo(str(path))
    from assess.winner.contract import WINNER

    if (path.parent / WINNER).is_file():
        echo(f"winner: {path.parent / WINNER} (apply it: hypergrid.apply(pipe, \"{path.parent / WINNER}\"); "
             f"check it where it serves: assess verify {path.parent / WINNER} --model <folder or hub id>)")
    for line in notes:
        echo(line)
    for line in problems:
        echo(f"unreadable {line}", err=True)
    if problems:
        sys.exit(1)


@cli.command()
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path), default=Path("outputs"),
                required=False)
@db_option
@click.option("--multiple", type=click.FloatRange(min=1), default=3.0, show_default=True,
              help="the suggested band, in floors")
@click.option("--json", "as_json", is_flag=True, help="print the floors as JSON")
def floor(path: Path, db: Path, multiple: float, as_json: bool) -> None:
    """Measure each quality metric's lossless floor for the anchors of the runs under PATH (the drift of renders
    that change no mathematics: another attention backend, compile; docs/quality.md) and suggest a parity band
    MULTIPLE floors wide."""
    from assess.statistics.floor import floor_lines

    with user_errors(db):
        lines, records = floor_lines(path, db, multiple)
    echo(json.dumps(records, indent=1) if as_json else "\n".join(lines))


@cli.command()
@click.argument("sweeps", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@db_option
@click.option("--gpus", type=click.IntRange(min=1), required=True, metavar="N", help="the GPUs the fleet has")
@click.option("--json", "as_json", is_flag=True, help="print the arrangements as JSON")
def fleet(sweeps: tuple[Path, ...], db: Path, gpus: int, as_json: bool) -> None:
    """For N GPUs and the measured cells of SWEEPS (at parity under their report's rule): the arrangement with the
    lowest latency per image (one cell over several GPUs, parallel=) and the one with the most images per second
    (replicas of a cell at its batch), with their intervals, and which to pick for which goal."""
    from assess.report.fleet import fleet as answer

    with user_errors(db):
        found = answer(list(sweeps), db, gpus)
    echo(json.dumps(found.as_dict(), indent=1) if as_json else "\n".join(found.lines()))


def _is_experiment(name: str) -> bool:
    from assess.experiment import experiment_names

    return "/" not in name and name in experiment_names()


@cli.command()
@click.argument("winner", type=click.Path(path_type=Path))
@click.option("--model", "model", required=True, metavar="FOLDER|HUB_ID",
              help="where your copy of the winner's weights is: a diffusers folder or a hub id")
@click.option("--device", default="auto", show_default=True, metavar="DEVICE",
              help="torch device to verify on: cpu, cuda, cuda:N, auto (CUDA when present)")
@click.option("--samples", type=click.IntRange(min=1), default=2, show_default=True, metavar="N",
              help="judged samples to render again and compare")
@click.option("--rounds", type=click.IntRange(min=6), default=6, show_default=True, metavar="N",
              help="side-by-side rounds of the applied pipeline against the anchor")
@click.option("--json", "as_json", is_flag=True, help="print the verification as JSON")
def verify(winner: Path, model: str, device: str, samples: int, rounds: int, as_json: bool) -> None:
    """Check a WINNER file (winner.yaml, or a folder holding one) where it will serve: load the model from --model
    with the winner's levers (hypergrid.load: the renderer's code), render a few of its judged samples and compare
    them with the judged images (identical, or within the metric's lossless floor), and time it against the anchor
    side by side on this device. Exit 0 when it holds, 1 when it does not, 2 when it cannot be applied (other
    weights, a lever this pipeline cannot take); docs/production.md."""
    import warnings

    from assess.winner.apply import VersionWarning, load
    from assess.winner.verify import verify_applied
    from render.cell import resolve_device
    from render.errors import RenderError

    with user_errors():
        try:
            torch_device, _ = resolve_device(device)
        except RenderError as error:
            raise Refused(str(error)) from error
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", VersionWarning)
            pipe, applied = load(winner, model, torch_device)
        differ = [str(w.message) for w in caught if issubclass(w.category, VersionWarning)]
        for line in differ:
            echo(f"warning: {line}", err=True)
        result = verify_applied(pipe, applied, model=model, samples=samples, rounds=rounds, versions_differ=differ)
    echo(json.dumps(result.as_dict(), indent=1) if as_json else "\n".join(result.lines()))
    if not result.holds:
        sys.exit(1)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@db_option
@click.option("--rounds", type=click.IntRange(min=6), default=20, show_default=True, metavar="N",
              help="rounds to time: in each, every contender renders the same recorded sample once, order shuffled")
@click.option("--seconds", type=click.FloatRange(min=0, min_open=True), default=None, metavar="S",
              help="stop after S seconds of rounds (at least 6 rounds), before --rounds when that comes first")
@click.option("--device", default=None, metavar="DEVICE",
              help="torch device to time on, e.g. cuda:1 (default: the runs' own `device`, auto = CUDA when present)")
@click.option("--every-pair", is_flag=True, help="also time every two cells against each other, not only each cell "
              "against its anchor")
@click.option("--pairwise", is_flag=True, help="load two pipelines at a time (each cell with its anchor, one set "
              "after another) instead of every contender at once: for models too large to hold several")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the rounds' shuffled orders")
@click.option("--json", "as_json", is_flag=True, help="print a JSON list, one object per pair timed")
def retime(paths: tuple[Path, ...], db: Path, rounds: int, seconds: float | None, device: str | None,
           every_pair: bool, pairwise: bool, seed: int, as_json: bool) -> None:
    """Time the cells of finished runs under PATHS side by side: one process, one device, each pipeline loaded and
    warmed once, interleaved rounds (docs/timing.md). Writes no image; each session goes to the run directories
    and the index, and every speed-up shown from then on is this paired figure."""
    from assess.retime import Options, retime_runs

    log = None if as_json else (lambda line: echo(line, err=True))
    options = Options(rounds, seconds, device, every_pair, pairwise, seed)
    with user_errors(db):
        result = retime_runs(list(paths), db, options, log=log)
    if as_json:
        echo(json.dumps(result.as_json(), indent=1))
        return
    echo("\n".join([*result.lines(), *_retime_ending(paths, db)]))


@cli.command()
@click.argument("experiment")
@db_option
@click.option("--apply", is_flag=True, help="run the proposed render commands, then score what they rendered")
@click.option("--generations", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="with --apply: climb up to N generations, stopping early when the climb stops")
@click.option("--final", is_flag=True,
              help="once, at the end: claim the holdout and render the incumbent, the anchor and a steps-only control")
@click.option("--force", is_flag=True, help="with --final: run the final although the climb has not stopped")
@click.option("--out-root", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="output root of the renders (default: the experiment config's out_root, outputs)")
@click.option("--set", "overrides", multiple=True, metavar="OVERRIDE",
              help="a Hydra override composed with the experiment, e.g. --set experiment.eta=2 (repeatable)")
@click.option("--amend", metavar="WHY", default=None,
              help="take the experiment's changed decision rule (metric, band, rungs, budget, ...) as a recorded "
                   "amendment, with its reason; every later generation and report shows it")
@click.option("--adopt", metavar="WHY", default=None,
              help="record, with its reason, the adoption of runs that name the experiment but compare with another "
                   "anchor than its frozen one: listed and counted in the budget, never ranked")
@click.option("--restart", metavar="WHY", default=None,
              help="start over, with its reason, an experiment whose ledger is gone (every copy lost, or a fresh state "
                   "folder where the holdout lock names its final): recorded in a new ledger and the holdout lock; a "
                   "final on a holdout its earlier ledger used is labelled a reuse")
@click.option("--plan", "show_plan", is_flag=True,
              help="print, before anything runs, each rung's and the final's cells, samples and estimated GPU-hours, "
                   "the reserve, and whether the budget fits")
@click.option("--seconds-per-step", type=click.FloatRange(min=0, min_open=True), default=None, metavar="S",
              help="with --plan: cost each sample at S device seconds a denoising step (else from the model's history)")
@click.option("--json", "as_json", is_flag=True, help="print the generation record(s) as JSON")
def climb(experiment: str, db: Path, apply: bool, generations: int, final: bool, force: bool, out_root: Path | None,
          overrides: tuple[str, ...], amend: str | None, adopt: str | None, restart: str | None, show_plan: bool,
          seconds_per_step: float | None, as_json: bool) -> None:
    """Decide the next generation of EXPERIMENT's hill climb from the index; print it (or run it)."""
    log = lambda line: echo(line, err=True)  # noqa: E731
    if seconds_per_step is not None and not show_plan:
        raise click.UsageError("--seconds-per-step goes with --plan")
    if show_plan:
        if apply or final or amend or adopt or restart is not None:
            raise click.UsageError("--plan only reads: give it without --apply, --final, --amend, --adopt or --restart")
        from assess.climb.planning import climb_plan

        with user_errors():
            echo("\n".join(climb_plan(experiment, out_root, overrides, seconds_per_step).lines()))
        return
    if restart is not None:
        from assess.experiment import load_experiment
        from render.laws.restart import reuse_note

        with user_errors():
            exp = load_experiment(experiment, overrides, out_root, restart=restart)
        echo(f"experiment {experiment}: restarted (why: {restart}); its earlier ledger's evidence is kept apart"
             + (f"; {reuse_note(exp.ledger)}" if reuse_note(exp.ledger) else ""))
        return
    if adopt is not None:
        from assess.climb.generation import adopt_strangers

        with user_errors(db):
            found = adopt_strangers(experiment, adopt, db, out_root, overrides)
        echo(f"experiment {experiment}: adopted {len(found)} run(s) (why: {adopt}); counted in the budget, never "
                   "ranked:\n" + "\n".join(f"  {s.path}: {s.why}" for s in found) if found else
                   f"experiment {experiment}: no run to adopt; nothing was recorded")
        return
    if amend is not None:
        from assess.experiment import load_experiment

        with user_errors():
            exp = load_experiment(experiment, overrides, out_root, amend=amend)
        latest = exp.amendments[-1] if exp.amendments else None
        echo(f"experiment {experiment}: rule amended: {'; '.join(latest['changes'])} (why: {latest['reason']})"
                   if latest and latest.get("reason") == amend else f"experiment {experiment}: the rule is unchanged; "
                   "nothing was amended")
        return
    if final:
        from assess.climb.run_final import format_final, run_final

        with user_errors(db):
            result = run_final(experiment, db, out_root=out_root, overrides=overrides, force=force, log=log)
        echo(json.dumps(result.as_dict(), indent=1) if as_json else format_final(result))
        return
    from assess.climb.generation import climb as climb_generations
    from assess.climb.printout import format_step

    show = None if as_json else (lambda step: echo(format_step(step) + "\n"))
    with user_errors(db):
        steps = climb_generations(experiment, db, out_root=out_root, apply=apply, generations=generations,
                                  overrides=overrides, log=log, show=show)
    if as_json:
        echo(json.dumps([s.record for s in steps], indent=1))


@cli.group()
def export() -> None:
    """Send a sweep's or an experiment's numbers from the index to a tracker: MLflow, or W&B offline."""


TARGET_HELP = "TARGET: a sweep folder (scored into the index) or an experiment name (its climb)"


def _tracked_runs(target: str, db: Path, out_root: Path | None, work: Path) -> list[Any]:
    """The runs to export (assess.export.selection), built before any tracker is touched."""
    from assess.export.selection import experiment_runs, sweep_runs

    if Path(target).exists():
        return sweep_runs(Path(target), db, work)
    if _is_experiment(target):
        return experiment_runs(target, db, out_root, work)
    from assess.experiment import experiment_names

    raise click.UsageError(f"{target!r} is neither a folder nor an experiment; give a sweep folder or one of the "
                           f"experiments: {', '.join(sorted(experiment_names()))}")


out_root_option = click.option("--out-root", type=click.Path(file_okay=False, path_type=Path), default=None,
                               help="for an experiment: the output root of its renders (default: its config's)")


@export.command("mlflow", epilog=TARGET_HELP)
@click.argument("target")
@db_option
@click.option("--tracking-uri", envvar="MLFLOW_TRACKING_URI", required=True, callback=given,
              help="the MLflow tracking server, e.g. http://127.0.0.1:5000 (default: $MLFLOW_TRACKING_URI)")
@click.option("--experiment", "mlflow_experiment", default="hypergrid", show_default=True,
              help="the MLflow experiment that receives the runs")
@out_root_option
def export_mlflow(target: str, db: Path, tracking_uri: str, mlflow_experiment: str, out_root: Path | None) -> None:
    """One MLflow run per cell (or per generation of a climb) under a parent run; exporting again updates them."""
    import tempfile

    from assess.export.mlflow import export_mlflow as send

    with user_errors(), tempfile.TemporaryDirectory(prefix="hypergrid-export-") as work:
        runs = _tracked_runs(target, db, out_root, Path(work))
        done = send(runs, tracking_uri, mlflow_experiment)
    echo(done.line(f"MLflow {tracking_uri}, experiment {mlflow_experiment}"))


@export.command("wandb", epilog=TARGET_HELP)
@click.argument("target")
@db_option
@click.option("--project", default="hypergrid", show_default=True, help="the W&B project of the runs")
@click.option("--dir", "folder", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="where the offline runs go (DIR/wandb/offline-run-*; upload: wandb sync)")
@out_root_option
def export_wandb(target: str, db: Path, project: str, folder: Path, out_root: Path | None) -> None:
    """W&B runs in offline mode, one per cell (or generation) grouped under their parent; `wandb sync` uploads."""
    import tempfile

    from assess.export.wandb import export_wandb as send

    with user_errors(), tempfile.TemporaryDirectory(prefix="hypergrid-export-") as work:
        runs = _tracked_runs(target, db, out_root, Path(work))
        done = send(runs, project, folder)
    echo(done.line(f"W&B offline {Path(folder).resolve() / 'wandb'}, project {project}"))


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@db_option
@click.argument("datasette_args", nargs=-1, type=click.UNPROCESSED)
def ui(db: Path, datasette_args: tuple[str, ...]) -> None:
    """Browse the index in datasette (the `ui` extra), with its canned queries; extra args go to datasette."""
    from assess.datasette import serve

    with user_errors(db):
        code = serve(db, list(datasette_args))
    sys.exit(code)


def main() -> None:
    from render.run.quiet import filter_third_party_warnings
    from render.rundir.redact import install

    filter_third_party_warnings()
    install()  # no log line of this process carries a credential
    stoppable(lambda: cli(prog_name="assess"))


def stoppable(command: Callable[[], Any]) -> None:
    """Run `command` with SIGTERM (`timeout`, SLURM, a supervisor) and SIGINT (Ctrl-C) raising `Cancelled` where they
    land, so every command keeps what it finished alike for both (a retime's rounds, a rebuild's or a report's old
    copy, each `finally`); the process then ends with 128 + the signal's number."""
    try:
        with cancel_on_signals():
            command()
    except Cancelled as exc:
        echo(f"cancelled: {exc}", err=True)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
