"""The gap studies' summaries change one thing at a time, flag weights the protocol could not
choose, show no spread for one seed, and end in one sentence that says what the study shows."""
import pandas as pd

from featbook.cmnist_views import erm_nf_erm_conclusion, frozen_steps_changes, frozen_steps_conclusion, frozen_steps_table


def _frozen(n_seeds=3):
    rows = []
    for objective, values in (("vrex", {(1, 1000): (0.78, 1e3), (1, 5000): (0.81, 1e4), (0, 5000): (0.84, 1e4),
                                        (0, 1000): (0.79, 1e3)}),
                              ("fishr", {(1, 1000): (0.775, 1e4), (1, 5000): (0.82, 1e6), (0, 5000): (0.83, 1e5),
                                         (0, 1000): (0.78, 1e4)})):
        for (l2, step), (mean, weight) in values.items():
            rows.append({"objective": objective, "head_l2": 1e-3 * l2, "step": step, "penalty_weight": weight,
                         "mean": mean, "std": 0.01 if n_seeds > 1 else 0.0, "n_seeds": n_seeds})
    return pd.DataFrame(rows)


def test_frozen_steps_changes_one_thing_at_a_time():
    changes = frozen_steps_changes(_frozen()).set_index(["objective", "change"])
    length = changes.loc[("vrex", "steps 1,000 → 5,000, head L2 on")]
    assert (length["before"], length["after"]) == (0.78, 0.81)  # L2 held on: only the length changes
    l2 = changes.loc[("vrex", "head L2 on → off, 5,000 steps")]
    assert (l2["before"], l2["after"]) == (0.81, 0.84)  # length held at 5,000: only L2 changes
    assert round(changes.loc[("fishr", "head L2 on → off, 5,000 steps"), "difference"], 6) == 0.01


def test_conclusions_say_the_size_of_each_change_flag_outside_weights_and_one_seed():
    sentence = frozen_steps_conclusion(frozen_steps_changes(_frozen()))
    assert "V-REx by +3.0 points" in sentence and "Fishr by +4.5 points" in sentence
    assert "1e6" in sentence and "outside the protocol's grid" in sentence and "3\xa0seeds" in sentence
    one = frozen_steps_conclusion(frozen_steps_changes(_frozen(n_seeds=1)))
    assert "one seed, so this gives a direction, not a size" in one
    table = frozen_steps_table(_frozen(n_seeds=1), 1)
    import html as html_lib
    html = html_lib.unescape(table._repr_html_())
    assert "1e6 (outside the protocol's grid)" in html and "±" not in html.split("paper")[0]
    erm = pd.DataFrame([{"risk": r, "step": st, "mean": m, "std": 0.0, "n_seeds": 1}
                        for r, st, m in (("mean", 500, 0.165), ("mean", 1001, 0.21), ("sum", 500, 0.22),
                                         ("sum", 1001, 0.27))])
    text = erm_nf_erm_conclusion(erm)
    assert "alone moves the cell by −5.0 points" in text and "alone moves it by −6.0" in text and "16.5%" in text
