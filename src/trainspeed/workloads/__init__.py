"""Built-in workloads: the seed's Iris MLP and a zoo of small models."""

from trainspeed.workloads.catalog import BUILTINS, builtin_workload, resolve_workload
from trainspeed.workloads.iris import IrisMLP, IrisSplit, load_iris_split, make_iris_mlp
from trainspeed.workloads.spec import ModelSpec, resolve_model_spec
from trainspeed.workloads.workload import Workload
from trainspeed.workloads.zoo import ZOO, ZooEntry

__all__ = ["BUILTINS", "ZOO", "Workload", "builtin_workload", "resolve_workload", "IrisMLP", "IrisSplit", "ModelSpec", "ZooEntry", "load_iris_split", "make_iris_mlp",
           "resolve_model_spec"]
