"""What a scoring pass did, in numbers and lines: the one type the runs' scoring, the sets' scoring and a rebuild
share (its own module, so that neither of the scorers imports the other for it)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from assess.metrics.base import SetupProblem
from render.rundir.redact import shortened


@dataclass
class ScoreSummary:
    runs: int = 0
    samples: int = 0
    written: int = 0  # score rows computed and written
    current: int = 0  # score rows already in the index, left as they were
    unavailable: Counter[tuple[str, str]] = field(default_factory=Counter)  # (metric, reason) -> n
    flagged: list[str] = field(default_factory=list)  # "<image path>: <problem>"
    problems: list[str] = field(default_factory=list)  # skipped samples.jsonl lines
    failed: list[str] = field(default_factory=list)  # "<run path>: <problem>": runs that could not be indexed

    def unavailable_lines(self, verbose: bool = False) -> list[str]:
        """One line per metric that could not score some samples: the count, the most common reason, and how many
        other reasons there were (a reason that names its prompt would otherwise repeat once per prompt). The
        metrics stopped by this machine's setup alone (a model not at hand offline, torchvision missing: a
        SetupProblem) share one line naming them and each fix, unless `verbose`."""
        by_metric: dict[str, Counter[str]] = {}
        for (metric, reason), n in self.unavailable.items():
            by_metric.setdefault(metric, Counter())[reason] += n
        setup = {} if verbose else {metric: reasons for metric, reasons in by_metric.items()
                                    if all(isinstance(reason, SetupProblem) for reason in reasons)}
        out = [setup_line(setup)] if setup else []
        for metric, reasons in sorted(by_metric.items()):
            if metric in setup:
                continue
            (top, _), others = reasons.most_common(1)[0], len(reasons) - 1
            more = f" (and {others} other reason(s) like it)" if others else ""
            out.append(f"  {metric} unavailable for {sum(reasons.values())} sample(s): {shortened(str(top))}{more}")
        return out

    def lines(self, verbose: bool = False) -> list[str]:
        out = [
            f"scored {self.runs} run(s), {self.samples} sample(s): {self.written} score(s) written, "
            f"{self.current} already current"
            + (f"; {len(self.failed)} run(s) could not be indexed" if self.failed else "")
        ]
        out += self.unavailable_lines(verbose)
        out += [f"  flagged {named(line)}" for line in self.flagged]
        out += [f"  {named(line)}" for line in self.problems]
        out += [f"  NOT INDEXED {named(line)}" for line in self.failed]
        return out


def named(line: str) -> str:
    """A `<path>: <what>` line as a summary shows it: the path whole (the user needs it to find the run), what
    follows it shortened when it is long (a prompt, a message)."""
    path, sep, rest = line.partition(": ")
    return f"{path}{sep}{shortened(rest)}" if sep else shortened(line)


def setup_line(setup: dict[str, Counter[str]]) -> str:
    """The metrics this machine's setup stops, in one line: each missing thing with its metrics and its fix."""
    groups: dict[tuple[str, str], list[str]] = {}
    for metric, reasons in sorted(setup.items()):
        problem = reasons.most_common(1)[0][0]
        assert isinstance(problem, SetupProblem)
        groups.setdefault((problem.missing, problem.fix), []).append(metric)
    parts = [f"{', '.join(metrics)} ({missing}: {fix})" for (missing, fix), metrics in groups.items()]
    return f"  {len(setup)} metric(s) unavailable on this machine: {'; '.join(parts)}; -v gives each reason"
