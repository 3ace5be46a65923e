"""Optimizers for softmax-attention training, each a ``torch.optim.Optimizer`` around one pure functional update.

Spec: implicit-bias-ngd §4 (NGD, NGD-mom, Polyak step, joint adaptive rule, SNGD/SPS), mirror-descent-lp §4
(l_p mirror descent), preconditioned-regression §5.4 (structure-aware preconditioned GD), steepest-descent §1, §5
(normalised steepest descent in l_p, sign descent, Adam without epsilon).

Every class works on any list of parameters (a real transformer too), keeps ``defaults``/``param_groups``/
``state`` like ``torch.optim.SGD``, takes ``step(closure=None)``, and says in ``scale_invariant`` whether its update
ignores a positive rescaling of each step's gradients. The functionals (``normalized_gd``, ``polyak_step``,
``joint_adaptive``, ``mirror_descent``, ``preconditioned_gd``) hold the math and act on lists of tensors; the first
four take ``run_dims`` so that a batch of independent runs (leading axis ``R``) is the same code as one run.
The step-size rules on their own (``normalized_step_size``, ``polyak_step_size``) read the step size off the
transforms for callers that want it alone.

Every optimizer is one entry of the registry (:mod:`attnlab.optim.registry`: name, typed options, transform
chain, ``torch.optim`` class; the built-in ones in :mod:`attnlab.optim.entries`), named in one string grammar
everywhere (``"ngd:momentum=0.9"``, ``"polyak:max_step=5"``, ``"md:1.5"``, ``"sign:schedule=inv_sqrt"``;
:mod:`attnlab.optim.spec`): :func:`parse_optimizer` returns an :class:`OptimizerSpec`, which builds the engine rule
or the ``torch.optim`` optimizer. How to write a transform of your own: :mod:`attnlab.optim.transforms`; how to
register an optimizer of your own: :mod:`attnlab.optim.registry`.
"""

from attnlab.optim import registry
from attnlab.optim.adam import Adam, AdamNoEps
from attnlab.optim.joint_adaptive import JointAdaptive, joint_adaptive
from attnlab.optim.mirror_descent import MirrorDescent, mirror_descent, norm_growth_bounds
from attnlab.optim.normalized_gd import NormalizedGD, normalized_gd, normalized_step_size
from attnlab.optim.polyak import PolyakStep, polyak_step, polyak_step_size
from attnlab.optim.preconditioned import PreconditionedGD, preconditioned_gd
from attnlab.optim.spec import OptimizerSpec, parse_optimizer
from attnlab.optim.steepest_descent import SteepestDescent

GD = registry.get("gd").optimizer_class()  # generated from the registry entry (the chain of spec A1, A4)

__all__ = [
    "Adam",
    "AdamNoEps",
    "GD",
    "JointAdaptive",
    "MirrorDescent",
    "NormalizedGD",
    "OptimizerSpec",
    "PolyakStep",
    "PreconditionedGD",
    "SteepestDescent",
    "joint_adaptive",
    "mirror_descent",
    "norm_growth_bounds",
    "normalized_gd",
    "normalized_step_size",
    "parse_optimizer",
    "polyak_step",
    "polyak_step_size",
    "preconditioned_gd",
    "registry",
]
