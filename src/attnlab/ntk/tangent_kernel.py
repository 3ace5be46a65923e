"""The empirical neural tangent kernel: Gram matrix, test-vs-train kernel, eigenvalues, infinite-width limit.

Spec: softmax-ntk-diffusion §4.1 (Gram, Definition 3.6), §4.2 (infinite width), §6.1 (test kernel).

Index convention: row ``(l, i)`` of a Gram matrix sits at ``l * n + i`` (output-major blocks ``H_{l1, l2}``).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.sparse.linalg import LinearOperator, eigsh
from torch.func import functional_call, jacrev

from attnlab._validation import ValidationError, check_scalar, check_tensor
from attnlab.ntk.network import TwoLayerNet, check_net, output_tangent, weight_gradient

__all__ = [
    "cross_kernel",
    "extreme_eigenvalues",
    "gram",
    "gram_jacobian",
    "infinite_width_gram",
    "kernel_drift",
    "lambda_max",
    "practical_step",
    "stability_limit",
]

_DENSE_MAX = 512  # Gram sizes n * d_out up to this are formed densely; beyond, Lanczos is faster (lambda_max only)


def cross_kernel(net: TwoLayerNet, X_test: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """Test-vs-train kernel ``K(X_test, X)`` in closed form at the current weights.

    Spec: softmax-ntk-diffusion §6.1 (Definition F.1); ``cross_kernel(net, X, X) == gram(net, X)``.

    Parameters
    ----------
    net : TwoLayerNet
    X_test : torch.Tensor, shape (n_test, d_in)
    X : torch.Tensor, shape (n, d_in)

    Returns
    -------
    torch.Tensor, shape (n_test * d_out, n * d_out), float64
        Entry ``[(l1, p), (l2, j)] = (1/s) <x_p, x_j> sum_r C[p, l1, r] C[j, l2, r]`` at ``l1*n_test + p,
        l2*n + j``, with ``s = net.kernel_scale`` (``m`` for softmax).

    Raises
    ------
    ValidationError
        When ``net`` is not a float64 :class:`TwoLayerNet`, ``X_test`` or ``X`` is not a finite array of shape
        (rows, d_in) with at least one row, or the kernel overflows float64 (``net.overflow_cause``: inputs far
        outside the unit ball).
    """
    sizes = {"k": check_net("net", net).d_in}
    same = X is X_test  # the Gram: one input, validated and its Jacobian factors formed once (check_tensor copies)
    X_test = check_tensor("X_test", X_test, "pk", sizes, min_size={"p": 1})
    X = X_test if same else check_tensor("X", X, "nk", sizes, min_size={"n": 1})
    return net._finite("cross_kernel(net, X_test, X)", _cross_kernel(net, X_test, X))


def _cross_kernel(net: TwoLayerNet, X_test: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """:func:`cross_kernel` on a checked ``net`` and checked inputs; ``X is X_test`` forms the factors once."""
    C_test = net.jacobian(X_test).transpose(0, 1)  # (L, n_test, m)
    C = C_test if X is X_test else net.jacobian(X).transpose(0, 1)  # (L, n, m)
    L, n_test, m = C_test.shape
    n = C.shape[1]
    feature = C_test.reshape(L * n_test, m) @ C.reshape(L * n, m).T  # sum_r C C
    inputs = (X_test @ X.T).repeat(L, L)  # <x_p, x_j> on every (l1, l2) block
    return feature * inputs / net.kernel_scale  # spec §4.1: (1/m) <x_i,x_j> sum_r (m S <v,S>)(m S <v,S>)


def gram(net: TwoLayerNet, X: torch.Tensor) -> torch.Tensor:
    """NTK Gram matrix ``H(W)`` in closed form (spec §4.1, normalization ``1/m`` for softmax).

    Parameters
    ----------
    net : TwoLayerNet
        E.g. a :class:`attnlab.ntk.SoftmaxMLP`.
    X : torch.Tensor, shape (n, d_in)

    Returns
    -------
    torch.Tensor, shape (n * d_out, n * d_out), float64
        Symmetric PSD; row ``(l, i)`` at ``l * n + i``.

    Raises
    ------
    ValidationError
        When ``net`` is not a float64 :class:`TwoLayerNet`, ``X`` is not a finite array of shape (n, d_in) with
        n >= 1, or the Gram overflows float64 (``net.overflow_cause``: inputs far outside the unit ball).

    Examples
    --------
    >>> from attnlab.ntk import SoftmaxMLP
    >>> gram(SoftmaxMLP(3, 2, 8), torch.eye(3)).shape
    torch.Size([6, 6])
    """
    X = _train_inputs(net, X)
    return net._finite("gram(net, X)", _cross_kernel(net, X, X))


def gram_jacobian(net: TwoLayerNet, X: torch.Tensor) -> torch.Tensor:
    """The same Gram matrix through ``torch.func`` Jacobians of the outputs (an independent second method).

    ``H = J J^T / s`` with ``J = dF/dW`` flattened to shape (d_out * n, d_in * m), ``s = net.kernel_scale``.

    Parameters
    ----------
    net : TwoLayerNet
    X : torch.Tensor, shape (n, d_in)

    Returns
    -------
    torch.Tensor, shape (n * d_out, n * d_out), float64

    Raises
    ------
    ValidationError
        As :func:`gram`.
    """
    X = _train_inputs(net, X)
    params = {"W": net.W.detach()}

    def outputs(p: dict[str, torch.Tensor]) -> torch.Tensor:
        return functional_call(net, p, (X,)).T.reshape(-1)  # (L * n,), index l * n + i

    J = jacrev(outputs)(params)["W"].reshape(net.d_out * X.shape[0], -1)
    return J @ J.T / net.kernel_scale


def infinite_width_gram(net: TwoLayerNet, X: torch.Tensor) -> torch.Tensor:
    """``I_{d_out} (x) K``, the limit of ``H*`` as the width grows (spec §4.2).

    Parameters
    ----------
    net : TwoLayerNet
        Supplies the activation's kernel ``K`` and ``sigma_w``.
    X : torch.Tensor, shape (n, d_in)

    Returns
    -------
    torch.Tensor, shape (n * d_out, n * d_out), float64

    Raises
    ------
    ValidationError
        When ``net`` is not a float64 :class:`TwoLayerNet`, ``X`` is not a finite array of shape (n, d_in) with
        n >= 1 (as :func:`gram`), or the kernel overflows float64 (inputs far outside the unit ball).
    """
    K = check_net("net", net).limit_kernel(X)
    return torch.kron(torch.eye(net.d_out, dtype=K.dtype), K)  # spec §4.2: H^inf = I_d (x) K


def extreme_eigenvalues(H: torch.Tensor) -> tuple[float, float]:
    """The smallest and largest eigenvalues of a symmetric matrix.

    Parameters
    ----------
    H : array_like, shape (N, N)
        A symmetric matrix (e.g. a Gram); its symmetric part ``(H + H^T) / 2`` is used, so rounding asymmetry
        does not matter.

    Returns
    -------
    lambda_min : float
    lambda_max : float

    Raises
    ------
    ValidationError
        When ``H`` is not a finite square matrix of size >= 1.
    """
    H = check_tensor("H", H, "NN", min_size={"N": 1})
    evals = torch.linalg.eigvalsh((H + H.T) / 2)
    return float(evals[0]), float(evals[-1])


def lambda_max(net: TwoLayerNet, X: torch.Tensor) -> float:
    """Largest eigenvalue of ``gram(net, X)``; matrix-free (Lanczos on ``J J^T v / s``) for large ``n * d_out``.

    Parameters
    ----------
    net : TwoLayerNet
    X : torch.Tensor, shape (n, d_in)

    Returns
    -------
    float

    Raises
    ------
    ValidationError
        As :func:`gram`.
    """
    X = _train_inputs(net, X)
    n, L = X.shape[0], net.d_out
    if n * L <= _DENSE_MAX:
        return extreme_eigenvalues(gram(net, X))[1]
    with torch.no_grad():
        phi, b = net.jacobian_factors(X @ net.W)
    net._finite("the Jacobian of net at X", phi)  # what the dense path's gram(net, X) says
    a = net.a.detach()

    def matvec(v: np.ndarray) -> np.ndarray:
        V = torch.from_numpy(np.ascontiguousarray(v.reshape(L, n))).T  # (n, L): entry (i, l) = v[l * n + i]
        out = output_tangent(X, weight_gradient(X, V, phi, b, a), phi, b, a)  # J (J^T v)
        return (out.T.reshape(-1) / net.kernel_scale).numpy()

    operator = LinearOperator((n * L, n * L), matvec=matvec, dtype=np.float64)
    # a fixed start: eigsh's default start vector is drawn afresh on every call, so the step sizes built on this
    # value (practical_step) and every run after them differed between calls in their last digits
    start = np.random.default_rng(0).standard_normal(n * L)
    top = eigsh(operator, k=1, which="LA", v0=start, return_eigenvectors=False, tol=1e-8)
    return float(net._finite("lambda_max(net, X)", torch.from_numpy(top))[0])


def kernel_drift(H: torch.Tensor, H0: torch.Tensor) -> float:
    """``||H - H0||_F``, the kernel's movement along training (spec §4.3, P4).

    Parameters
    ----------
    H : torch.Tensor, shape (n * d_out, n * d_out)
        The Gram matrix now (:func:`gram`).
    H0 : torch.Tensor, shape (n * d_out, n * d_out)
        The Gram matrix at initialization, ``H*``.

    Returns
    -------
    float
        The Frobenius norm of the difference, >= 0.

    Raises
    ------
    ValidationError
        When ``H`` or ``H0`` is not a finite matrix, or their shapes differ (a test kernel ``(p * d_out, n * d_out)``
        against its start is fine).
    """
    sizes: dict[str, int] = {}
    H = check_tensor("H", H, "PN", sizes)
    H0 = check_tensor("H0", H0, "PN", sizes)
    return float(torch.linalg.matrix_norm(H - H0))


def stability_limit(net: TwoLayerNet, X: torch.Tensor) -> float:
    """``2 / (s lambda_max(H))``: the largest step for which the linearized dynamics do not diverge.

    Spec: §4.1 (``F(t+1) - F(t) ~ -lr s H (F - Y)``), §8 step 3. ``s = net.kernel_scale``.

    Parameters
    ----------
    net : TwoLayerNet
        The network at the weights of interest (at initialization, ``H = H*``).
    X : torch.Tensor, shape (n, d_in)
        Training inputs.

    Returns
    -------
    float
        The step bound, > 0.

    Raises
    ------
    ValidationError
        As :func:`gram`; and when ``lambda_max(H) <= 0`` (e.g. every row of ``X`` zero): no step moves the outputs.
    """
    top = lambda_max(net, X)
    if not top > 0:
        raise ValidationError(
            f"X gives a Gram with lambda_max(H) == {top:.3g}, so no step size exists (the outputs cannot move, e.g. "
            "every row of X is zero); pass inputs with a non-zero row"
        )
    return 2.0 / (net.kernel_scale * top)  # spec §4.1: |1 - lr s lambda_max| < 1


def practical_step(net: TwoLayerNet, X: torch.Tensor, c: float = 0.5) -> float:
    """The practical step ``lr = c / (s lambda_max(H*))``, ``0 < c <= 1`` (spec §8, Algorithm C step 3).

    Parameters
    ----------
    net : TwoLayerNet
        At initialization, so that ``H = H*``.
    X : torch.Tensor, shape (n, d_in)
    c : float, default=0.5

    Returns
    -------
    float

    Raises
    ------
    ValidationError
        When ``c`` is not in (0, 1], or as :func:`stability_limit`.
    """
    check_scalar("c", c, low=0.0, high=1.0, low_inclusive=False)
    return c * stability_limit(net, X) / 2  # spec §8: eta = c / (m lambda_max(H*))


def _train_inputs(net: TwoLayerNet, X: object) -> torch.Tensor:
    """The training inputs of a Gram: ``X`` of shape (n, d_in), n >= 1, for a float64 ``net``; named errors else."""
    return check_tensor("X", X, "nk", {"k": check_net("net", net).d_in}, min_size={"n": 1})
