"""The old import paths of the real-model library and of explain: each name warns with its new path, same object."""

import importlib

import pytest

import attnlab.explain
import attnlab.nets
import attnlab.nets.datasets

MODULES = {
    "attnlab.experiments.real.encoder": "attnlab.nets.encoder",
    "attnlab.experiments.real.vit": "attnlab.nets.vit",
    "attnlab.experiments.real.text_encoder": "attnlab.nets.text_encoder",
    "attnlab.experiments.real.probes": "attnlab.nets.probes",
    "attnlab.experiments.real.optimizers": "attnlab.nets.optimizers",
    "attnlab.experiments.real.harness": "attnlab.nets.classifier",
    "attnlab.experiments.real.split": "attnlab.nets.datasets.split",
    "attnlab.experiments.real.digits": "attnlab.nets.datasets.digits",
    "attnlab.experiments.real.aclimdb": "attnlab.nets.datasets.aclimdb",
    "attnlab.experiments.real.keywords": "attnlab.nets.datasets.keywords",
    "attnlab.experiments.explain": "attnlab.explain",
}


@pytest.mark.parametrize("old", MODULES)
def test_every_name_of_a_moved_module_warns_with_its_new_path(old):
    new = importlib.import_module(MODULES[old])
    module = importlib.import_module(old)
    for name in new.__all__:
        with pytest.warns(DeprecationWarning, match=rf"{old}\.{name} moved to {MODULES[old]}\.{name}"):
            assert getattr(module, name) is getattr(new, name)


def test_the_old_harness_fit_is_fit_classifier():
    from attnlab.nets import fit_classifier

    with pytest.warns(DeprecationWarning, match=r"harness\.fit moved to attnlab\.nets\.classifier\.fit_classifier"):
        from attnlab.experiments.real.harness import fit
    assert fit is fit_classifier


def test_the_package_names_of_experiments_real_warn_with_their_new_path():
    import attnlab.experiments.real as real

    for new in (attnlab.nets, attnlab.nets.datasets):
        for name in new.__all__:
            with pytest.warns(DeprecationWarning, match=rf"real\.{name} moved to {new.__name__}\.{name};"):
                assert getattr(real, name) is getattr(new, name)
    with pytest.warns(DeprecationWarning, match=r"real\.fit moved to attnlab\.nets\.fit_classifier"):
        assert real.fit is attnlab.nets.fit_classifier


def test_the_experiments_stay_without_a_warning(recwarn):
    from attnlab.experiments.real import run_digits_vit, run_text  # noqa: F401

    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]


def test_a_name_that_never_existed_is_an_attribute_error():
    module = importlib.import_module("attnlab.experiments.real.vit")
    with pytest.raises(AttributeError, match="'attnlab.experiments.real.vit' has no attribute 'Nope'"):
        module.Nope  # noqa: B018
