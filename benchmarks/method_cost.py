"""Benchmark: time and memory per step of ERM, Bonsai, FeAT and iFeAT, per round.

A thin entry point to ``python -m featlib.cli.cost`` (same arguments), kept beside the other
benchmarks. It prints, measured side by side in one run on one device, the median step time
and peak memory of every round of every learner with their ratios to ERM, the paper's schedule
at those step times, and whether iFeAT stays within 1.3x ERM's time and 1.5x its memory and
FeAT's step time is linear in the round k.

    .venv/bin/python benchmarks/method_cost.py --out results/cost/cpu
    .venv/bin/python benchmarks/method_cost.py --benchmarks cmnist --n-train 5000 --repeats 2
"""
import sys

from featlib.cli.cost import main

if __name__ == "__main__":
    sys.exit(main())
