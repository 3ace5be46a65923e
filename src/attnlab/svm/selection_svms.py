"""The attention SVMs of many data sets, each for a selection of its own, solved once per (data set, selection, norm).

Spec: mirror-descent-lp §5 (l_p-AttSVM of a selection, Definition 3), implicit-bias-ngd §5 (W-SVM).

A batched run trains one head per data set (:func:`attnlab.data.stack` puts them on the runs axis); its final
selection is known only after training, and several measurements ask for the same program again (the SVM of
every q's norm, the local optimality of the selection, which solves the same SVM). The programs of one shape (one
norm, the data sets' ``n, T, d``) are one cvxpy problem whose constraint data are Parameters, canonicalised once
(:class:`~attnlab.svm._program.ProgramCache`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnlab._validation import ValidationError, check_token_data
from attnlab.data.dataset import TokenSelectionData
from attnlab.data.selection import Selection
from attnlab.svm._program import ProgramCache, check_solver
from attnlab.svm.attention_svm import solve_attention_svm
from attnlab.svm.norms import Norm, program_norm
from attnlab.svm.result import AttentionSVMResult
from attnlab.svm.selection import local_optimality

__all__ = ["SelectionSVMs"]


class SelectionSVMs:
    """The attention SVM of each data set for its own selection, solved once per (data set, selection, norm).

    Spec: mirror-descent-lp §5 (``W^mm_{alpha, p}``, Definition 3).

    Parameters
    ----------
    datasets : sequence of TokenSelectionData
        R data sets with a head ``v``, one per run, all with n sequences of T tokens.
    solver : {"CLARABEL", "SCS"}, optional
        The cvxpy solver of every program (:func:`~attnlab.svm.attention_svm`).

    Examples
    --------
    >>> from attnlab.data import unit_gaussian
    >>> svms = SelectionSVMs([unit_gaussian(3, 4, 4, seed=s) for s in range(2)])
    >>> select = torch.stack([d.optimal_tokens() for d in svms.datasets])
    >>> svms.directions(select, 2.0).shape
    torch.Size([2, 4, 4])
    """

    def __init__(self, datasets: Sequence[TokenSelectionData], solver: str | None = None):
        if isinstance(datasets, TokenSelectionData) or not hasattr(datasets, "__len__") or not len(datasets):
            raise ValidationError("datasets must be a non-empty list of TokenSelectionData, one per run")
        self.datasets = tuple(check_token_data(f"datasets[{r}]", d) for r, d in enumerate(datasets))
        shapes = {tuple(d.X.shape[:2]) for d in self.datasets}
        if len(shapes) > 1:
            raise ValidationError(f"datasets must all have the same (n, T), got {sorted(shapes)}")
        self.solver = check_solver(solver)
        self._solved: dict[tuple, AttentionSVMResult] = {}
        self.cache = ProgramCache()  # one cvxpy problem per program shape, re-solved with each data set's values

    def _rows(self, select: object) -> list[torch.Tensor]:
        """``select`` as one checked row of token indices per data set."""
        n, T = self.datasets[0].X.shape[:2]
        rows = Selection.parse(select, n, T, runs=len(self.datasets)).one_token("SelectionSVMs")
        if rows.dim() == 1:
            raise ValidationError(f"select must have shape (R, n) = ({len(self.datasets)}, {n}), one row per data set")
        return list(rows)

    def _svm(self, r: int, row: torch.Tensor, norm: Norm) -> AttentionSVMResult:
        """The SVM of data set ``r`` for the selection ``row``, solved once."""
        key = (r, tuple(row.tolist()), norm)
        if key not in self._solved:  # spec §5: l_p-AttSVM of the selection
            self._solved[key] = solve_attention_svm(self.datasets[r], norm, row, self.solver, cache=self.cache)
        return self._solved[key]

    def directions(self, select: object, norm: Norm | str | float = "fro") -> torch.Tensor:
        """``W^mm_{alpha_r, norm}`` of every data set ``r`` for its selection ``select[r]``.

        Parameters
        ----------
        select : array-like of int, shape (R, n)
            One selection per data set.
        norm : float or {"fro", "nuc", "l1-diag"}, default="fro"
            The SVM's norm (:func:`~attnlab.svm.attention_svm`); ``2`` is solved as the exact QP ``"fro"``.

        Returns
        -------
        torch.Tensor, shape (R, d, d_q), float64
        """
        norm = program_norm(norm)
        return torch.stack([self._svm(r, row, norm).W for r, row in enumerate(self._rows(select))])

    def locally_optimal(self, select: object, p: Norm | str | float = "fro") -> torch.Tensor:
        """Whether each data set's selection is locally optimal for the SVM of norm ``p`` (Definition 3).

        Parameters
        ----------
        select : array-like of int, shape (R, n)
            One selection per data set.
        p : float or {"fro", "nuc", "l1-diag"}, default="fro"
            The SVM's norm; the SVM solved for the test is kept for :meth:`directions`.

        Returns
        -------
        torch.Tensor, shape (R,), bool
        """
        norm = program_norm(p, "p")
        holds = []
        for r, row in enumerate(self._rows(select)):
            scores = self.datasets[r].token_scores()  # (n, T); needs the head
            holds.append(local_optimality(scores, self._svm(r, row, norm), norm.label).holds)  # spec §5 Def. 3
        return torch.tensor(holds)
