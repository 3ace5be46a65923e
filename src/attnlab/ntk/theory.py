"""The theorem's quantities: contraction factor, step size, coupling bound.

Spec: softmax-ntk-diffusion §5 (Theorem 4.2, Lemma 5.3), §6.2 (Theorem F.2). Constants marked [R] in the spec
are recalled, not verified; the functions below keep them explicit so a reader can change them.
"""

from __future__ import annotations

import math

from attnlab._validation import ValidationError, check_scalar

__all__ = ["contraction_bound", "coupling_bound", "theorem_B", "theorem_log10_width", "theorem_step"]


def contraction_bound(lr: float, scale: float, lam: float) -> float:
    """Per-step factor ``1 - s lr lambda / 2`` of the loss bound ``||F(t) - Y||^2 <= factor^t ||F(0) - Y||^2``.

    Spec: §5, Lemma 5.3 (loss); ``s = m`` for the softmax network (``kernel_scale``).

    Parameters
    ----------
    lr : float
        The GD step, > 0.
    scale : float
        The network's kernel scale ``s`` (:attr:`~attnlab.ntk.TwoLayerNet.kernel_scale`).
    lam : float
        A lower bound ``lambda`` on the Gram's smallest eigenvalue along training, >= 0.

    Returns
    -------
    float
        The factor; below 1 when ``lam > 0`` (a contraction only when it is also >= 0, i.e. ``lr <= 2 / (s lam)``).

    Raises
    ------
    ValidationError
        When ``lr <= 0``, ``scale <= 0`` or ``lam < 0`` (or one is not a finite number), or the factor overflows
        float64 (``s lr lambda`` past 1e308).
    """
    check_scalar("lr", lr, low=0.0, low_inclusive=False)
    check_scalar("scale", scale, low=0.0, low_inclusive=False)
    check_scalar("lam", lam, low=0.0)
    factor = 1.0 - scale * lr * lam / 2  # spec §5 Lemma 5.3: (1 - m eta lambda / 2)
    return _finite("contraction_bound", factor, lr=lr, scale=scale, lam=lam)


def theorem_B(sigma_w: float, n: int, d: int, delta: float = 0.1, C: float = 10.0) -> float:  # noqa: N802 (spec B)
    """``B = max(C sigma_w sqrt(log(n d / delta)), 1)`` of Definition 4.1 (spec §5, constant C recalled [R]).

    Parameters
    ----------
    sigma_w : float
        Init standard deviation of ``W``'s entries, > 0.
    n : int
        Number of training samples, >= 1.
    d : int
        The spec's dimension ``d`` (input and output; the experiments pass the output dimension), >= 1.
    delta : float, default=0.1
        Failure probability, in (0, 1).
    C : float, default=10.0
        The absolute constant (recalled, [R]), > 0.

    Returns
    -------
    float
        ``B``, >= 1: with probability ``1 - delta`` every ``|w_r^T x_i|`` is at most ``B``.

    Raises
    ------
    ValidationError
        When ``sigma_w <= 0``, ``n`` or ``d`` is not an int >= 1, ``delta`` is not in (0, 1), ``C <= 0``, or ``B``
        overflows float64.
    """
    check_scalar("sigma_w", sigma_w, low=0.0, low_inclusive=False)
    _check_sizes(n=n, d=d)
    check_scalar("delta", delta, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    check_scalar("C", C, low=0.0, low_inclusive=False)
    B = max(C * sigma_w * math.sqrt(math.log(n * d / delta)), 1.0)  # spec §5 Def. 4.1
    return _finite("theorem_B", B, sigma_w=sigma_w, n=n, d=d, delta=delta, C=C)


def theorem_step(lam: float, n: int, d: int, width: int, B: float) -> float:
    """``eta = 0.1 lambda / (m n^2 d^2 e^{16 B})`` of Theorem 4.2 (spec §5; exponent recalled [R]).

    With the ``B`` of Definition 4.1 this is astronomically small (about 1e-170 for n=12, d=3); it underflows
    to 0.0 once ``16 B`` passes about 745.

    Parameters
    ----------
    lam : float
        The smallest eigenvalue ``lambda`` of ``H*``, > 0.
    n : int
        Number of training samples, >= 1.
    d : int
        Output dimension (the spec's ``d``), >= 1.
    width : int
        Hidden neurons ``m``, >= 1.
    B : float
        The bound of Definition 4.1 (:func:`theorem_B`), finite and >= 0.

    Returns
    -------
    float
        The step ``eta``, >= 0 (computed in the log domain; 0.0 on underflow).

    Raises
    ------
    ValidationError
        When ``lam <= 0``, ``n``, ``d`` or ``width`` is not an int >= 1, or ``B`` is not a finite number >= 0.
    """
    check_scalar("lam", lam, low=0.0, low_inclusive=False)
    _check_sizes(n=n, d=d, width=width)
    check_scalar("B", B, low=0.0)
    return math.exp(math.log(0.1 * lam) - math.log(width * n**2 * d**2) - 16 * B)  # spec §5 Thm 4.2


def theorem_log10_width(lam: float, n: int, d: int, B: float, delta: float = 0.1) -> float:
    """``log10`` of Theorem 4.2's width ``lambda^-2 n^2 d^2 e^{18 B} log^2(n d / delta)`` (spec §5; constant 1).

    The ``Omega`` hides a constant, taken as 1; with the ``B`` of Definition 4.1 the width is astronomically large
    (about 10^195 for n = 12, d = 3, sigma_w = 1), hence the log domain.

    Parameters
    ----------
    lam : float
        The smallest eigenvalue ``lambda`` of ``H*``, > 0.
    n : int
        Number of training samples, >= 1.
    d : int
        Output dimension (the spec's ``d``), >= 1.
    B : float
        The bound of Definition 4.1 (:func:`theorem_B`), finite and >= 0.
    delta : float, default=0.1
        Failure probability, in (0, 1).

    Returns
    -------
    float
        ``log10`` of the width.

    Raises
    ------
    ValidationError
        When ``lam <= 0``, ``n`` or ``d`` is not an int >= 1, ``B`` is not a finite number >= 0, ``delta`` is not
        in (0, 1), or the log overflows float64 (``B`` near 1e307).
    """
    check_scalar("lam", lam, low=0.0, low_inclusive=False)
    _check_sizes(n=n, d=d)
    check_scalar("B", B, low=0.0)
    check_scalar("delta", delta, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    log_term = math.log(n * d / delta)  # > 0: n d >= 1 > delta
    # spec §5 Thm 4.2: m = Omega(lambda^-2 n^2 d^2 e^{18 B} log^2(n d / delta))
    log10_width = (-2 * math.log(lam) + 2 * math.log(n * d) + 18 * B + 2 * math.log(log_term)) / math.log(10)
    return _finite("theorem_log10_width", log10_width, lam=lam, n=n, d=d, B=B, delta=delta)


def coupling_bound(eps_H: float, n: int, d: int, y_norm: float, lam: float) -> float:
    """``eps_H sqrt(n d) ||Y||_F / lambda``: Theorem F.2's bound on ``|F_nn - F_ker|`` with constant 1.

    Spec: §6.2 (shape [P], constant and log factors [R]; we take the constant to be 1).

    Parameters
    ----------
    eps_H : float
        How far the Gram moves from ``H*`` along training (e.g. the largest :func:`~attnlab.ntk.kernel_drift`),
        >= 0.
    n : int
        Number of training samples, >= 1.
    d : int
        Output dimension, >= 1.
    y_norm : float
        ``||Y||_F``, the Frobenius norm of the targets, >= 0.
    lam : float
        The smallest eigenvalue ``lambda`` of ``H*``, > 0.

    Returns
    -------
    float
        The bound, >= 0.

    Raises
    ------
    ValidationError
        When ``eps_H < 0``, ``n`` or ``d`` is not an int >= 1, ``y_norm < 0`` or ``lam <= 0`` (or a number is not
        finite; ``eps_H`` may be inf, the drift of a diverged run, which makes the bound inf), ``eps_H`` is inf
        while ``y_norm`` is 0 (inf * 0 has no value), or the bound of finite inputs overflows float64.
    """
    check_scalar("eps_H", eps_H, low=0.0, allow_inf=True)  # a diverged run's drift: the bound is inf
    _check_sizes(n=n, d=d)
    check_scalar("y_norm", y_norm, low=0.0)
    check_scalar("lam", lam, low=0.0, low_inclusive=False)
    bound = eps_H * math.sqrt(n * d) * y_norm / lam  # spec §6.2 Thm F.2
    if math.isinf(eps_H) and not math.isnan(bound):
        return bound  # inf: a diverged run's drift bounds nothing
    return _finite("coupling_bound", bound, eps_H=eps_H, n=n, d=d, y_norm=y_norm, lam=lam)


def _finite(name: str, value: float, **inputs: object) -> float:
    """``value`` when it is a finite number; else a ValidationError naming ``name`` and its ``inputs``."""
    if not math.isfinite(value):
        args = ", ".join(f"{k}={v!r}" for k, v in inputs.items())
        why = "an infinite input times a zero one has no value" if math.isnan(value) else "float64 overflows"
        raise ValidationError(
            f"{name}({args}) == {value}, not a finite number: {why} at these inputs; pass inputs of the sizes the "
            "bound is meant for"
        )
    return value


def _check_sizes(**sizes: object) -> None:
    """Refuse a size (``n``, ``d``, ``width``) that is not a whole number >= 1 (``log(n d)`` needs n d >= 1)."""
    for name, value in sizes.items():
        check_scalar(name, value, kind=int, low=1)
