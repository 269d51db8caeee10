"""Halformer: Halide-generated Transformer kernels and the runtime that runs
models on them (docs/python.md).

    import halformer
    model = halformer.Model.load("models/en-de")
    print(model.translate(["Open the file"])[0].text)

The classes and functions live in the extension module
``halformer._halformer``; this package re-exports them, and makes its
``kernels`` submodule importable as ``halformer.kernels``.
"""
import sys as _sys

from ._halformer import (  # noqa: F401
    Activation,
    Architecture,
    Config,
    Engine,
    EngineBusy,
    EngineRequest,
    Error,
    GenerateOptions,
    Hypothesis,
    KernelError,
    Model,
    Positional,
    RopeScaling,
    Sampling,
    TextResult,
    Tokenizer,
    kernels,
)

# A pybind11 submodule is an attribute of its parent only; registering it
# lets `import halformer.kernels` and `from halformer.kernels import ...` work.
_sys.modules[__name__ + ".kernels"] = kernels

__all__ = [
    "Activation",
    "Architecture",
    "Config",
    "Error",
    "GenerateOptions",
    "Hypothesis",
    "KernelError",
    "Model",
    "Positional",
    "RopeScaling",
    "Sampling",
    "TextResult",
    "Tokenizer",
    "kernels",
]
