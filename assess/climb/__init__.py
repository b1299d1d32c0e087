"""The hill climb: `assess climb <experiment>` (decide a generation), `--final`, and its report.

decide.py holds the decision logic as pure functions (also what benchmarks/climb.py simulates);
observe.py reads the index; archive.py keeps the generations; commands.py builds and runs the
render commands; run_final.py runs the holdout once; experiment_report.py writes the experiment's report.
"""
