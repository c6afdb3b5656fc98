"""Tables of the two-bit chapters (01 and 02), as the book shows them (:mod:`featbook.tables`)."""
from __future__ import annotations

import pandas as pd

from featbook import prose
from featbook.tables import Table, table


def final_values(rows: list[tuple[str, float, float | None]], caption: str, columns=("end of training", "limit")) -> Table:
    """``(quantity, value, reference or None)`` rows, three decimals."""
    frame = pd.DataFrame([(name, prose.number(value, 3), prose.number(ref, 3) if ref is not None else prose.MISSING)
                          for name, value, ref in rows], columns=["", *columns])
    return table(frame, caption=caption)


def alpha_sweep_table(sweep: pd.DataFrame, probe_step: int, sweep_steps: int) -> Table:
    """Chapter 01's sweep: per alpha, spurious minus invariant coefficient early and at the end,
    and ERM's OOD accuracy."""
    frame = pd.DataFrame({
        "alpha": [prose.number(a, 2) for a in sweep["alpha"]],
        f"spurious − invariant, step {probe_step}": [prose.number(v, 3, sign=True) for v in sweep["gap_probe"]],
        f"spurious − invariant, step {sweep_steps}": [prose.number(v, 3, sign=True) for v in sweep["gap_final"]],
        "OOD test accuracy": [prose.number(v, 3) for v in sweep["test_acc_final"]],
    })
    return table(frame, caption="ERM for each alpha")


def lead_phrase(share: float) -> str:
    """How often the spurious increment leads, as a reader says it: "every step", or "93.5% of the
    steps" (chapter 01)."""
    return "every step" if share >= 1.0 else f"{prose.percent(share)} of the steps"


def lead_table(leads: dict[str, float]) -> Table:
    """Per activation psi: the share of steps where the spurious increment leads."""
    frame = pd.DataFrame({"activation psi": [n.replace("_", " ") for n in leads],
                          "steps where the spurious increment leads": [prose.percent(v) for v in leads.values()]})
    return table(frame)


def pretraining_sweep_table(sweep: pd.DataFrame) -> Table:
    """Chapter 02's sweep: per pre-training length, the coefficients at the switch and after
    IRMv1, and the OOD test accuracy and loss after IRMv1."""
    frame = pd.DataFrame({
        "ERM steps": [prose.integer(v) for v in sweep["pretrain_steps"]],
        "invariant at switch": [prose.number(v, 3) for v in sweep["inv_switch"]],
        "spurious at switch": [prose.number(v, 3) for v in sweep["spu_switch"]],
        "invariant after IRMv1": [prose.number(v, 3) for v in sweep["inv_final"]],
        "spurious after IRMv1": [prose.number(v, 3) for v in sweep["spu_final"]],
        "OOD test loss": [prose.number(v, 3) for v in sweep["test_loss_final"]],
    })
    return table(frame, caption="IRMv1 after each length of ERM pre-training")
