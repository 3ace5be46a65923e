"""One row per optimizer, and the papers' real-data claims checked against a :class:`Comparison`.

Spec: implicit-bias-ngd §9 (fig. 6-7: on ViTs SNGD trains slower than SGD and layer norms grow; fig. 1, 4: on
language data SNGD trains faster); mirror-descent-lp §4 (l_2-MD is GD), §8.6 (smaller p gives sparser weights,
l_1.1-MD generalises better than GD on IMDb).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch

from attnlab.nets.chance import binomial_se, chance_bound
from attnlab.nets.compare import Comparison
from attnlab.nets.optimizers import optimizer_kind
from attnlab.nets.probes import hoyer_sparsity
from attnlab.verify import Check, Claim, Reading, observation

__all__ = ["paper_checks"]

NGD = "docs/theory/implicit-bias-ngd.md"
MD = "docs/theory/mirror-descent-lp.md"


def _kind(name: str) -> str:
    """``"sgd"``, ``"sngd"``, ``"sps"``, ``"adam"`` or ``"md:<p>"`` for an optimizer string of the grammar."""
    kind, p = optimizer_kind(name)
    return kind if p is None else f"md:{p:g}"


_ALL_RUNS = "every seed of every optimizer of the config (a run that diverged enters at its last finite epoch)"
LEARNS = Claim(
    "{name} learns: mean final test accuracy exceeds the majority-class rate by 3 binomial standard errors",
    "001:§9",
    f"{NGD} §9; {MD} §9",
    kind="property",
    id="learns",
    reading=Reading(
        statistic="per optimizer: the mean over seeds of the test accuracy of its last row (one row per optimizer)",
        window="the last epoch",
        subset=_ALL_RUNS,
        tolerance=">= c + 3 sqrt(c (1 - c) / n_test): c the test set's majority-class rate, 3 binomial standard "
        "errors of an accuracy at that rate over the n_test test examples",
        params={"standard_errors": 3},
    ),
)
FINITE = Claim(
    "no run diverges: every mini-batch loss is finite (runs that diverged)",
    "001:§9",
    f"{NGD} §9; {MD} §9",
    kind="property",
    id="no-divergence",
    reading=Reading(
        statistic="the number of runs whose last row is flagged diverged (a non-finite mini-batch loss, parameter "
        "or training loss)",
        window="every mini-batch step of every epoch",
        subset=_ALL_RUNS,
        tolerance="== 0 runs",
        params={"bound": 0},
    ),
)
EACH_RUN = Claim(
    "{name} learns on every seed: the lowest final test accuracy over seeds exceeds the majority-class rate by 3 "
    "binomial standard errors",
    "001:§9",
    f"{NGD} §9; {MD} §9",
    kind="property",
    id="each-run-learns",
    reading=Reading(
        statistic="per optimizer: the minimum over seeds of the test accuracy of its last row (one row per "
        "optimizer); a seed left at chance is a setup defect (its rate), never an observation",
        window="the last epoch",
        subset=_ALL_RUNS,
        tolerance=">= c + 3 sqrt(c (1 - c) / n_test): c the test set's majority-class rate, 3 binomial standard "
        "errors of an accuracy at that rate over the n_test test examples",
        params={"standard_errors": 3},
    ),
)
MD2_IS_SGD = Claim(
    "l_2 mirror descent is SGD: same training loss at the same lr (max relative gap)",
    "002:§4",
    f"{MD} §4",
    kind="property",
    id="md2-is-sgd",
    reading=Reading(
        statistic="max over (seed, epoch) of |L_md2 - L_sgd| / |L_sgd|, L the training-set loss after the epoch",
        window="every epoch, 0 (before training) to the last",
        subset="every seed; the row is written only when the config runs sgd and md:2 at the same lr",
        tolerance="<= 1e-3 (float32 rounding of the loss)",
        params={"bound": 1e-3},
    ),
)
CLAIMS = (LEARNS, EACH_RUN, FINITE, MD2_IS_SGD)


def paper_checks(
    comparison: Comparison,
    summary: pd.DataFrame,
    *,
    chance: float,
    language: bool,
    test_size: int,
    claims: Sequence[Claim] = CLAIMS,
) -> list[Check]:
    """The properties of a comparison and the papers' empirical claims about real data, as :class:`Check` rows.

    The properties test our code and fail the run (kind ``"property"``: no theorem speaks of these models): every
    optimizer learns the task (model, data, loop and each optimizer's implementation work), no run diverges, and
    l_2 mirror descent equals SGD step for step.
    Everything the papers *report* about real models (SNGD vs SGD speed, norm growth, sparsity with p = 1.1,
    generalisation of l_1.1-MD) is an observation: the paper's report as ``predicted``, ours as ``measured``,
    agreeing or not, never failing the run.

    Parameters
    ----------
    comparison : Comparison
    summary : pandas.DataFrame
        From :func:`summary_table`.
    chance : float
        Accuracy of always predicting the most frequent class of the test set.
    language : bool
        True for text tasks: the NGD paper reports SNGD faster than SGD on language data (fig. 1, 4) and slower
        on ViTs (fig. 6, 7).
    test_size : int
        Examples in the test set: the binomial standard error of an accuracy at the majority rate.
    claims : sequence of Claim, default=CLAIMS
        The experiment's declared versions of :data:`CLAIMS` (with its revisions), matched by id.

    Returns
    -------
    list of Check
        One "learns" and one "learns on every seed" row per optimizer, named with its rate, then the other
        properties and the observations.
    """
    # the checks name each optimizer by kind and exponent ("md:2" is l_2-MD), whatever options its string carries
    declared = {c.id: c for c in claims}
    kinds = {name: _kind(name) for name in summary["optimizer"]}
    by = summary.set_index("optimizer").rename(index=kinds)
    checks = _learning_checks(comparison, by, kinds, [declared[c.id] for c in CLAIMS], chance, test_size)
    return checks + _observations(comparison, by, kinds, language)


def _learning_checks(
    comparison: Comparison,
    by: pd.DataFrame,
    kinds: dict[str, str],
    claims: Sequence[Claim],
    chance: float,
    test_size: int,
) -> list[Check]:
    """The property rows, in order: every optimizer learns (mean and lowest seed), no run diverges, and l_2-MD
    equals SGD step for step (when both ran at one lr). ``by`` is the summary indexed by optimizer kind; ``claims``
    the declared :data:`CLAIMS`, in its order."""
    learns, each_run, finite, md2 = claims
    se = binomial_se(chance, test_size)  # of an accuracy at the majority rate
    last = comparison.frame.sort_values("epoch").groupby(["optimizer", "seed"]).tail(1)
    lowest = last.groupby("optimizer")["test_accuracy"].min().rename(index=kinds)
    checks = []
    for claim, statistic in ((learns, by["test_accuracy_mean"]), (each_run, lowest)):
        k = claim.param("standard_errors")
        spread = f"majority rate {chance:.4g} + {k} binomial SE over {test_size} test examples (SE {se:.3g})"
        checks += [
            claim.format(name=f"{name} (lr {by.loc[name, 'lr']:g})").greater(
                float(statistic[name]), chance_bound(chance, test_size, k), spread=spread
            )
            for name in by.index
        ]
    runs, diverged = int(by["seeds"].sum()), int(by["diverged"].sum())
    bound = finite.param("bound")
    checks.append(finite.holds(bound, diverged, f"{bound} of {runs}", diverged <= bound))
    frame = comparison.frame.assign(optimizer=comparison.frame["optimizer"].map(kinds))
    if {"sgd", "md:2"} <= set(by.index) and by.loc["sgd", "lr"] == by.loc["md:2", "lr"]:
        pivot = frame.pivot_table(index=["seed", "epoch"], columns="optimizer", values="train_loss")
        gap = float(((pivot["md:2"] - pivot["sgd"]).abs() / pivot["sgd"].abs()).max())
        checks.append(md2.less(gap, md2.param("bound"), spread="float32 rounding of the loss"))
    return checks


def _observations(comparison: Comparison, by: pd.DataFrame, kinds: dict[str, str], language: bool) -> list[Check]:
    """The papers' reports on real models, in order: l_1.1-MD sparser than l_2-MD, layer norms grow under SGD,
    SNGD's speed against SGD's (faster on text, slower on a ViT), l_1.1-MD generalises on text; each written only
    when the optimizers it compares ran."""
    checks = []
    if {"md:1.1", "md:2"} <= set(by.index):
        sparse, dense = float(by.loc["md:1.1", "qkv_hoyer"]), float(by.loc["md:2", "qkv_hoyer"])
        init = comparison.entries[comparison.entries["optimizer"] == "init"]["value"]
        start = hoyer_sparsity(torch.tensor(init.to_numpy())) if len(init) else float("nan")
        checks.append(
            observation(
                f"paper: l_1.1-MD gives sparser key/query/value weights than l_2-MD (MD paper E4 "
                f"histograms; Hoyer sparsity, {start:.4g} at init)",
                f"> {dense:.4g} (p = 2)",
                sparse,
                bool(sparse > dense),
                f"{MD} §8.6 (the paper's remark on its E4 figures)",
            )
        )
    if "sgd" in by.index:
        norms = comparison.norms[comparison.norms["optimizer"].map(kinds) == "sgd"]
        ends = norms.sort_values("epoch").groupby(["seed", "layer"])["norm"].agg(["first", "last"])
        growth = (ends["last"] / ends["first"]).groupby("layer").mean()
        checks.append(
            observation(
                "paper: every layer's parameter norm grows under SGD (NGD paper fig. 7, CIFAR-10 "
                "ViT; min over layers of last / initial norm)",
                "> 1",
                float(growth.min()),
                bool(growth.min() > 1),
                f"{NGD} §9 fig. 7",
            )
        )
    if {"sgd", "sngd"} <= set(by.index):
        ratio = float(by.loc["sngd", "train_loss_area"] / by.loc["sgd", "train_loss_area"])
        measure = "area under the training-loss curve, SNGD / SGD"
        if language:
            checks.append(
                observation(
                    f"paper: SNGD trains faster than SGD on text (NGD paper fig. 1, 4; {measure})",
                    "< 1",
                    ratio,
                    bool(ratio < 1),
                    f"{NGD} §9 fig. 1, 4",
                )
            )
        else:
            checks.append(
                observation(
                    f"paper: SNGD trains slower than SGD on a ViT (NGD paper fig. 6, 7; {measure})",
                    "> 1",
                    ratio,
                    bool(ratio > 1),
                    f"{NGD} §9 fig. 6, 7",
                )
            )
    if language and {"md:1.1", "md:2"} <= set(by.index):
        better, base = float(by.loc["md:1.1", "test_accuracy_mean"]), float(by.loc["md:2", "test_accuracy_mean"])
        checks.append(
            observation(
                "paper: l_1.1-MD generalises at least as well as l_2-MD (GD) on text (MD paper §8.6, "
                "IMDb; mean final test accuracy)",
                f">= {base:.4g} (p = 2)",
                better,
                bool(better >= base),
                f"{MD} §8.6 (the paper's remark on its IMDb table)",
            )
        )
    return checks
