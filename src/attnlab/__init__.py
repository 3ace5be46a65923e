"""attnlab: models, data, max-margin programs, optimizers and reproductions of the theory of softmax attention.

Spec: ../shared/spec (one file per paper); every formula cites its section.
"""

__version__ = "0.1.0"
