"""What the settings tests share: a config override refused when the config is built, with the words expected."""

import pytest

from attnlab._validation import ValidationError
from attnlab.experiments import get_experiment
from attnlab.verify import make_config


def refused(name: str, overrides: list[str], *words: str) -> str:
    """Build ``name``'s quick config with ``overrides``, expect a ValidationError holding every word; its message."""
    with pytest.raises(ValidationError) as err:
        make_config(get_experiment(name), overrides, quick=True)
    message = str(err.value)
    assert all(word in message for word in words), message
    return message
