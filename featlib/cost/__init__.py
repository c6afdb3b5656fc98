"""Time and memory of ERM, Bonsai, FeAT and iFeAT, measured (Appendix F.3, Table 14; chapter 07).

``python -m featlib.cli.cost`` (or ``benchmarks/method_cost.py``) runs the benchmark and prints the
table of per-step times and peak memory per round with their ratios to ERM, and the targets.
"""
from .benchmark import COST_CASES, CMNISTCost, CostSettings, WildsCost, measure, run_cost_benchmark
from .recorder import PeakMemory, StageMeasure, StepRecorder
from .report import (
    check_targets, format_table, format_targets, paper_schedules, paper_table14, schedule_estimate, summarise,
)
from .results import load_cost_results

__all__ = [
    "COST_CASES", "CMNISTCost", "CostSettings", "WildsCost", "measure", "run_cost_benchmark",
    "PeakMemory", "StageMeasure", "StepRecorder",
    "check_targets", "format_table", "format_targets", "paper_schedules", "paper_table14", "schedule_estimate", "summarise",
    "load_cost_results",
]
