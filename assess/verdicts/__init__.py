"""Verdicts: the table that opens every report, the verdict recorded under a frozen rule, a sweep's
default rule, and the one sentence the table comes to."""
