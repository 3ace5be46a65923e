"""Update rules as small composable pure transforms, each written once beside its spec formula.

Spec: implicit-bias-ngd §4 (A1 GD, A2 NGD and its cap, A3 Polyak, A4 momentum, A6 joint adaptive rule, A7 per-block
NGD, A8 SPS), §9 (Adam), mirror-descent-lp §3-4 (l_p mirror map, dual-norm normalisation, l_p steepest descent),
preconditioned-regression §5.4 (preconditioner).

An update is built as a :class:`Step`: per tensor, a *direction* and a per-run *log coefficient*, the update being
``theta <- theta - exp(log_coef) * direction`` (or its mirror-map form). The direction starts as the gradient's
mantissa ``m`` with ``grad = m * exp(log_scale)`` (one ``log_scale`` per run; 0 for plain gradients) and the
coefficient as ``log_scale``, so the untouched chain is plain GD. Every transform changes coefficients in the log
domain and leaves mantissas alone, so a normalised rule stays exact after the true gradient underflows.

A :class:`Transform` is a pair of pure functions (``init(params) -> state``, ``update(step, state, context) ->
(step, state)``); state is plain data (lists with one entry per tensor), passed in and out, never hidden. A
:class:`Rule` is a chain of transforms plus how the update is applied (added, or through the l_p mirror map). The
``torch.optim`` classes of :mod:`attnlab.optim` and the training engine (:mod:`attnlab.training`) run the same
rules, so ``NormalizedGD`` handed to :func:`attnlab.train` and ``optimizer="ngd"`` in
:func:`attnlab.training.batched.train` are one code path.

Hyperparameters are given once (a scalar, or a per-run tensor of shape ``(R,)``) or per tensor (a list), which is
how parameter groups map onto a rule.

Writing a transform
-------------------
A transform of your own is a :class:`Transform` built from two functions; the engine (:func:`attnlab.training.fit`,
so :func:`attnlab.train` and :func:`attnlab.training.batched.train`) and the ``torch.optim`` classes run it alike. It
declares what it reads beyond the step, so the engine computes that only when some transform asks:

- ``needs_loss=True``: :attr:`Context.log_risk` (``log L`` per run) is filled at every step;
- ``needs_excess=True``: :attr:`Context.log_excess` (``log(L - L_*)`` per run, from the margins, exact however
  close ``L`` is to the fixed-head infimum ``L_*``) is filled at every step (the engine only);
- ``needs_weights=True``: :attr:`Context.weights` (``dL/ds``, on the gradient's scale) is filled;
- :attr:`Context.step` (the index of the step) is always filled;
- ``scale_invariant=True`` only if the update is unchanged when every gradient of a step is multiplied by one
  positive constant; ``coefficient_only=True`` only if it rescales or linearly combines directions, nothing else.

Scale invariance is defined, with both of its declarations (this field, and the ``scale_invariant = True`` a
``torch.optim`` optimizer sets to be handed mantissas by :func:`attnlab.train`), in one place: the tutorial's
"Declaring scale invariance" (docs/tutorial/your-model.md). The engine keeps every gradient as a mantissa ``m`` and
a log-scale ``s`` per run (``g = m e^s``), so a transform that reads ``step.direction`` and ``step.log_scale`` sees
the gradient's direction even after ``g`` itself underflows to 0 in float64 (a loss at float64 resolution).
Both :func:`steepest` (sign descent at ``p = inf``) and NGD's :func:`normalize` are scale-invariant;
:func:`adam` without epsilon is not in this sense (one step's gradients rescaled alone change its step) and keeps
its own log-scale instead, as :func:`momentum` does. A sign-like transform of your own, a sign step on each
tensor's largest-gradient entries only, reads::

    def update(step, state, ctx):
        out = []
        for m in step.direction:  # mantissas ([R,] ...): their signs are the gradient's
            top = m.abs() >= m.abs().amax(dim=tuple(range(1, m.dim())), keepdim=True) / 2  # the larger half
            out.append(torch.sign(m) * top)
        coefs = [c - step.log_scale for c in step.log_coef]  # drop the gradient's size: a unit step
        return Step(out, step.log_scale, coefs, step.factor), state

    mine = Rule((Transform("half_sign", lambda params: None, update, coefficient_only=False,
                           scale_invariant=True), scale_by_lr(0.01)))

(``coefficient_only=False``: it changes the direction, not only its coefficient). Its step is ``-0.01`` per moved
entry at every step, however small the gradient, like ``"sign"`` of the optimizer grammar.

Work on the coefficients in the log domain, as the transforms below do. A Polyak-like step
``eta_t = (L - L*) / ||g||^2`` with a known lower bound ``l_star`` reads::

    def update(step, state, ctx):
        norm = ctx.block_norms(step.direction, None)[0]  # ||m|| per run, g = m e^s
        gap = (torch.exp(ctx.log_risk) - l_star).clamp(min=0.0)
        log_eta = torch.log(gap) - 2 * torch.log(norm) - 2 * step.log_scale  # coefficient of m: eta_t e^s
        coefs = [c + log_eta for c in step.log_coef]
        return Step(step.direction, step.log_scale, coefs, step.factor), state

    mine = Rule((Transform("my_polyak", lambda params: None, update, scale_invariant=False, needs_loss=True),))

and runs as ``attnlab.train(model, mine, data)`` or ``attnlab.training.batched.train(X, Z, y, v, optimizer=mine)``.
"""

from attnlab.optim.transforms.core import (
    Context,
    Norms,
    Rule,
    Step,
    Transform,
    block_norms,
    mirror_step,
    per_tensor,
    run_rule,
    step_size,
)
from attnlab.optim.transforms.directions import adam, decoupled_decay, momentum, precondition, steepest
from attnlab.optim.transforms.step_sizes import (
    INFIMUM,
    cap,
    decay,
    divide_by_norm,
    log_loss_gap,
    loss_gap,
    normalize,
    normalize_by_loss,
    polyak,
    scale_by_lr,
    schedule,
    uncapped,
)

__all__ = [
    "INFIMUM",
    "Context",
    "Norms",
    "log_loss_gap",
    "loss_gap",
    "mirror_step",
    "run_rule",
    "Rule",
    "Step",
    "Transform",
    "adam",
    "block_norms",
    "cap",
    "decay",
    "decoupled_decay",
    "momentum",
    "normalize",
    "divide_by_norm",
    "normalize_by_loss",
    "per_tensor",
    "polyak",
    "precondition",
    "scale_by_lr",
    "schedule",
    "steepest",
    "step_size",
    "uncapped",
]
