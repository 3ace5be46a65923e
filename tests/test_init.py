"""The top-level package: a cheap import, lazy subpackages that dir() shows, and public names that stay put."""

import subprocess
import sys

import attnlab
from attnlab import _errors, _validation

HEAVY = ("torch", "cvxpy", "pandas")


def _loaded_after(code: str) -> list[str]:
    """The heavy libraries in sys.modules after running ``code`` in a fresh interpreter."""
    probe = f"import sys\n{code}\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return [m for m in out.strip().split(",") if m]


def test_import_attnlab_loads_no_torch_cvxpy_or_pandas():
    assert _loaded_after("import attnlab; attnlab.__version__; attnlab.ValidationError") == []


def test_the_probe_sees_a_heavy_import():
    # the test above can fail: the same probe reports torch once a torch-backed name is touched
    assert "torch" in _loaded_after("import attnlab; attnlab.train")


def test_dir_lists_every_public_subpackage_and_each_resolves():
    names = dir(attnlab)
    for sub in ("batched", "callbacks", "data", "experiments", "models", "optim", "runner", "svm", "trackers"):
        assert sub in names
    for name in names:
        assert getattr(attnlab, name) is not None, name


def test_the_short_names_of_the_front_doors_are_the_training_modules_themselves():
    code = (
        "import attnlab, sys; import attnlab.flow as f; from attnlab.batched import train; "
        "from attnlab.callbacks import EarlyStop; import attnlab.training.flow as g; "
        "print(f is g, attnlab.flow is g, train is attnlab.training.batched.train, f.__spec__.name, "
        "EarlyStop.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", "True", "attnlab.training.flow", "attnlab.training.callbacks"]


def test_validation_error_is_public_and_the_one_class_everywhere():
    assert attnlab.ValidationError is _validation.ValidationError is _errors.ValidationError
    assert issubclass(attnlab.ValidationError, ValueError)


def test_train_stays_the_function_after_its_module_loads():
    # importing a submodule binds it on the package; the module of train is attnlab.training, so nothing shadows it
    code = "import attnlab.training, attnlab, inspect; print(inspect.isfunction(attnlab.train), attnlab.train.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "train"]


def test_unknown_attribute_raises_attribute_error():
    try:
        attnlab.no_such_thing  # noqa: B018
    except AttributeError as err:
        assert "no_such_thing" in str(err)
    else:
        raise AssertionError("attnlab.no_such_thing did not raise")
