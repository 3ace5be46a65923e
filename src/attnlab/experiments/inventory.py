"""The numbered results of the five seed papers: the denominator of each paper's coverage.

For each paper, every numbered result of its text (main text and appendix) that is the paper's own: a result that
restates another one of the paper (an appendix version with constants) or quotes a generic tool from another work
(Hoeffding, a Bregman identity) is left out. Each id is written as the paper prints it, with how far a finite run
can check it:

- ``"yes"``: a finite measurement tests it without lost constants (an identity, an exact inequality, a sign);
- ``"partly"``: only part is measurable (a rate whose order or constant was lost in extraction, an asymptotic claim,
  a hypothesis that cannot be computed): its shape, sign, monotonicity or dependence on n can still be checked;
- ``"no"``: its statement or constants were lost, or it is a choice of constants.

``FIGURES`` lists each paper's figures and tables that report an empirical finding (checked as observations).
The coverage table of each theory page (:mod:`attnlab.experiments.coverage`) lists exactly these ids, and
``tests/experiments/test_coverage.py`` fails when a registered result is missing from it or not in it.
"""

from __future__ import annotations

__all__ = ["FIGURES", "OWN_RESULTS"]

OWN_RESULTS: dict[str, dict[str, str]] = {
    "000": {
        "000:Thm1": "yes",
        "000:Lem1": "yes",
        "000:Thm2": "partly",
        "000:Lem2": "yes",
        "000:Lem3": "partly",
        "000:Lem4": "partly",
        "000:Thm3": "partly",
        "000:Lem5": "partly",
        "000:Lem6": "partly",
        "000:Lem7": "partly",
        "000:Thm4": "partly",
        "000:Thm5": "partly",
        "000:Lem8": "partly",
        "000:Lem9": "partly",
        "000:Lem10": "partly",
        "000:Lem11": "partly",
        "000:Lem12": "no",
        "000:Lem13": "no",
        "000:Lem14": "partly",
        "000:Lem15": "partly",
        "000:Lem16": "no",
        "000:Lem17": "no",
        "000:Lem18": "no",
        "000:Lem19": "partly",
        "000:Lem20": "partly",
        "000:Lem21": "no",
        "000:Lem22": "no",
        "000:Lem23": "partly",
    },
    "001": {
        "001:Thm1": "partly",
        "001:Lem1": "partly",
        "001:Lem2": "partly",
        "001:Thm2": "partly",
        "001:Thm3": "partly",
        "001:Thm4": "partly",
        "001:Lem3": "partly",
        "001:Lem4": "partly",
        "001:Lem5": "yes",
        "001:Lem6": "yes",
        "001:Lem7": "yes",
        "001:Lem8": "partly",
        "001:Thm6": "partly",
        "001:Thm7": "partly",
        "001:Lem11": "partly",
        "001:Lem12": "partly",
        "001:Lem13": "partly",
        "001:Lem14": "partly",
        "001:Lem15": "partly",
    },
    "002": {
        "002:Lem4": "partly",
        "002:Lem12": "yes",
        "002:Lem13": "partly",
        "002:Lem14": "no",
        "002:Lem15": "no",
        "002:Lem16": "yes",
        "002:Lem17": "yes",
        "002:Lem18": "partly",
        "002:Lem19": "partly",
        "002:Lem20": "partly",
        "002:Lem21": "partly",
        "002:Lem22": "yes",
        "002:Lem24": "partly",
        "002:Lem25": "no",
        "002:Lem27": "partly",
        "002:Lem28": "partly",
        "002:Lem29": "partly",
        "002:Lem30": "partly",
    },
    "003": {
        "003:Lem4.1": "yes",
        "003:Lem4.2": "partly",
        "003:Thm4.1": "partly",
        "003:Lem5.1": "yes",
        "003:Thm5.1": "partly",
        "003:LemA.1": "yes",
    },
    "004": {
        "004:Claim3.4": "yes",
        "004:Thm4.2": "partly",
        "004:Cor4.3": "partly",
        "004:Lem5.1": "partly",
        "004:Lem5.3": "partly",
        "004:Thm6.6": "partly",
        "004:FactA.3": "yes",
        "004:FactA.4": "no",
        "004:FactA.5": "no",
        "004:FactA.6": "no",
        "004:FactA.7": "no",
        "004:FactA.8": "no",
        "004:LemB.1": "partly",
        "004:LemC.2": "partly",
        "004:LemC.3": "partly",
        "004:LemC.4": "partly",
        "004:LemD.1": "partly",
        "004:LemD.2": "no",
        "004:LemD.3": "partly",
        "004:LemE.1": "partly",
        "004:LemE.2": "no",
        "004:LemE.3": "partly",
        "004:LemE.4": "partly",
        "004:ClaimE.5": "partly",
        "004:ClaimE.6": "partly",
        "004:ClaimE.7": "partly",
        "004:ThmF.2": "partly",
        "004:ClaimG.1": "partly",
    },
}
FIGURES: dict[str, tuple[str, ...]] = {
    "000": (
        "000:Fig1",
        "000:Fig2",
    ),
    "001": (
        "001:Fig1",
        "001:Fig2",
        "001:Fig3",
        "001:Fig4",
        "001:Fig5",
        "001:Fig6",
        "001:Fig7",
    ),
    "002": (),
    "003": (),
    "004": (),
}
