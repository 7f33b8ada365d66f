"""Built-in workloads."""

from trainspeed.workloads.iris import IrisMLP, IrisSplit, load_iris_split, make_iris_mlp

__all__ = ["IrisMLP", "IrisSplit", "load_iris_split", "make_iris_mlp"]
