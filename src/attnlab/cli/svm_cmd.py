"""``attnlab svm``: a max-margin program on the user's own tokens.

Spec: implicit-bias-ngd §5, mirror-descent-lp §5, kq-nuclear-norm §4 (the programs); DESIGN.md (file layouts).
"""

from __future__ import annotations

import click

from attnlab._errors import ValidationError  # not attnlab._validation, which loads torch
from attnlab.cli.main import KEEPS_NOTHING, main, user_errors, warnings_as_lines

_NORM_HELP = "fro, nuc, l1 (entrywise, an LP), l1-diag (diagonal W) or a number p >= 1 (entrywise l_p)."


def parse_norm(text: str) -> str | float:
    """``"l1"`` as ``1.0``; a number as a float ``p``; a registered norm's name (``"fro"``, ``"nuc"``, ``"l1-diag"``,
    or one of :func:`attnlab.svm.norms.register_norm`) as given."""
    if text == "l1":
        return 1.0
    try:
        p = float(text)
    except ValueError:
        p = None
    if p is not None:
        if not p >= 1:  # NaN too: the l_p norm needs p >= 1
            raise ValidationError(f"--norm {text}: an l_p norm needs p >= 1 (1, 1.5, 2, inf), or a name: {_NORM_HELP}")
        return p
    from attnlab.svm.norms import NORMS  # the registry of norms (loads cvxpy): only for a name

    if text in NORMS:
        return text
    raise ValidationError(f"--norm must be one of {_NORM_HELP[:-1]} (registered: {', '.join(NORMS)}); got {text!r}")


def parse_select(text: str) -> list[int]:
    """``"0,2,1"`` as ``[0, 2, 1]``."""
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise ValidationError(f"--select must be comma-separated token indices such as 0,2,1, got {text!r}") from None


def read_select_key(path: str, key: str) -> object:
    """The array stored under ``key`` in the ``.npz`` at ``path``."""
    from attnlab._io import read_npz

    arrays = read_npz(path)
    if key not in arrays:
        raise ValidationError(f"--select-key {key!r} is not in {path}; its keys are {', '.join(arrays)}")
    return arrays[key]


def read_selection(data: object, path: str, text: str | None, key: str | None) -> object:
    """The selection ``--select TEXT`` or ``--select-key KEY`` names, checked against ``data``, or None for neither.

    Parameters
    ----------
    data : TokenSelectionData
        The data file's data: the selection needs ``n`` tokens (or sets) of ``T``.
    path : str
        The data file, which holds ``KEY``.
    text, key : str or None
        ``--select`` and ``--select-key`` as typed (at most one of them).

    Returns
    -------
    Selection or None

    Raises
    ------
    ValidationError
        On a selection the library refuses, the message led by the option as typed (not the library's ``select``).
    """
    from attnlab.data import Selection

    if text is None and key is None:
        return None
    if key is not None:
        flag, value = f"--select-key {key}", read_select_key(path, key)
    else:
        flag, value = f"--select {text}", parse_select(text)
    try:
        return Selection.parse(value, data.n, data.T)
    except ValidationError as err:
        raise ValidationError(f"{flag}: {err}") from None


def read_head(data: object, source: str, path: str) -> object:
    """``data`` with the head ``v`` that ``--v SOURCE`` names (a ``.npy`` file or a key of ``path``), refused as
    ``--v`` unless it has shape ``(d,)``.

    Parameters
    ----------
    data : TokenSelectionData
    source : str
        ``--v`` as typed.
    path : str
        The data file.

    Returns
    -------
    TokenSelectionData
    """
    from attnlab._io import read_array
    from attnlab._validation import check_tensor

    return data.with_(v=check_tensor("--v", read_array("--v", source, path), "d", {"d": data.d}))


@main.command("svm")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--norm", "norm_text", default="fro", show_default=True, help=_NORM_HELP)
@click.option(
    "--select",
    "select_text",
    default=None,
    help="Selected token per sequence, e.g. 0,2,1 (default: the file's 'select', else the optimal tokens).",
)
@click.option("--select-key", default=None, metavar="KEY", help="Read the selection from this key of the data file.")
@click.option(
    "--v",
    "v_source",
    default=None,
    metavar="FILE.npy|KEY",
    help="The linear head v (d,) whose optimal tokens are the default selection: a .npy file or a key of the data "
    "file (default: the file's v).",
)
@click.option(
    "--solver", type=click.Choice(["CLARABEL", "SCS"], case_sensitive=False), default="CLARABEL", show_default=True
)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write W, margin, status, ... to this .npz.")
@user_errors(interrupted=KEEPS_NOTHING)
def svm_cmd(
    path: str,
    norm_text: str,
    select_text: str | None,
    select_key: str | None,
    v_source: str | None,
    solver: str,
    out: str | None,
) -> None:
    """Solve the attention SVM on the tokens in PATH (an .npz with X, y and optionally Z, v, select).

    The selection: --select or --select-key, else the file's select, else the optimal tokens of the head v (the
    file's, or --v). A file with only X and y needs one of them. Exit status 2 on bad input, an infeasible program
    included (the message says which constraint).
    """
    import numpy as np

    from attnlab._io import save_npz
    from attnlab.data import TokenSelectionData
    from attnlab.svm import SetProgramResult, attention_svm

    if select_text is not None and select_key is not None:
        raise ValidationError("pass either --select or --select-key, not both")
    norm = parse_norm(norm_text)
    if out is not None:
        check_out_file(out)  # before solving: a solution is never printed and then lost
    data = TokenSelectionData.load(path)
    if v_source is not None:
        data = read_head(data, v_source, path)
    if select_text is None and select_key is None and data.select is None and data.v is None:
        raise ValidationError(
            f"{path} holds no selection and no head v: pass --select 0,2,1, --select-key KEY (token indices or "
            "sets stored in the file), or a head whose optimal tokens to select, --v FILE.npy or --v KEY"
        )
    select = read_selection(data, path, select_text, select_key)
    _refuse_norm_of_sets(norm, norm_text, data, path, select, select_key)
    if v_source is not None and select is None and data.select is not None:
        click.echo(
            f"warning: --v is not used: {path} stores a selection (select), which decides the program before any "
            "head; pass --select or --select-key to choose another one",
            err=True,
        )
    with warnings_as_lines():
        sol = attention_svm(data, norm, select=select, solver=solver)
    sets = isinstance(sol, SetProgramResult)  # token sets were selected: the set-direction program
    click.echo(f"status        {sol.status} ({sol.solver})")
    click.echo(f"norm          {norm_text} = {sol.norm_value:.10g}")
    click.echo(
        f"margin        {sol.margin:.10g} (max violation {sol.max_violation:.2e}, KKT residual {sol.kkt_residual:.2e})"
    )
    if sets:
        chosen = " ".join(
            f"{i}:{','.join(map(str, row.nonzero().flatten().tolist()))}" for i, row in enumerate(sol.sets)
        )
        click.echo(f"sets (i:O_i)  {chosen}")
    else:
        click.echo(f"selected      {','.join(str(t) for t in sol.select.tolist())}")
        click.echo(f"support (i:t) {' '.join(f'{i}:{t}' for i, t in sol.support)}")
    if out is not None:
        arrays = {
            "W": sol.W.numpy(),
            "margin": np.float64(sol.margin),
            "status": np.str_(sol.status),
            "norm": np.str_(norm_text),
            "norm_value": np.float64(sol.norm_value),
            "duals": sol.duals.numpy(),
        }
        if sets:  # the constraints (i, tau, t) of the duals, and the (n, T) mask of the sets
            arrays.update(pairs=sol.pairs.numpy(), select=sol.sets.numpy())
        else:
            arrays.update(support=np.array(sol.support, dtype=np.int64).reshape(-1, 2), select=sol.select.numpy())
        written = save_npz(out, arrays)  # at --out exactly, whatever its suffix
        click.echo(f"wrote {written}")


def check_out_file(out: str) -> None:
    """Refuse, before any work, an ``--out`` file that cannot be written: an empty path or a folder (bad input), or
    one under a file or in a folder not writable (the file system's refusal, in the words and exit status of the
    write itself, which would come only after the solve).

    Parameters
    ----------
    out : str
        ``--out`` as typed.
    """
    import errno
    import os
    from pathlib import Path

    from attnlab._io import _output_error  # the write's own message: the same line, before the work

    if not out.strip():
        raise ValidationError("--out is empty: pass the path of the .npz file to write, e.g. --out solution.npz")
    target = Path(out)
    if target.is_dir() or out.endswith(("/", os.sep)):
        raise ValidationError(
            f"--out {out} is a folder: pass the path of a file in it, e.g. --out {target / 'solution.npz'}"
        )
    folder = next(p for p in target.absolute().parents if p.exists())  # the folder that holds it, or will
    refused = None if folder.is_dir() else errno.EEXIST  # a file where a folder is needed
    if refused is None and not os.access(folder, os.W_OK | os.X_OK):
        refused = errno.EACCES
    if refused is not None:
        raise _output_error(target, OSError(refused, os.strerror(refused), str(folder)))


def _refuse_norm_of_sets(
    norm: object, norm_text: str, data: object, path: str, select: object, select_key: str | None
) -> None:
    """Refuse, naming ``--norm``, a norm the set-direction program cannot solve when the selection holds token sets
    (several tokens per sequence, multi-token §3.1: ``fro`` or ``nuc`` only)."""
    from attnlab.svm.norms import as_norm

    sets = select.is_sets if select is not None else data.select is not None and data.select.dim() == 2
    if sets and not as_norm(norm).unitarily_invariant:
        where = f"--select-key {select_key}" if select is not None else f"the select of {path}"
        raise ValidationError(
            f"--norm {norm_text}: {where} holds token sets (several tokens per sequence), whose set-direction program "
            "takes --norm fro or --norm nuc only; pass one of them, or a selection of one token per sequence"
        )
