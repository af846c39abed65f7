"""Schemathesis hooks for scripts/api-fuzz: most generated path ids are swapped for
ids that exist (set by the script in FUZZ_* variables), so that the fuzzed bodies
reach the handlers instead of stopping at a 404."""

import os
import random

import schemathesis

# Path parameter name -> the variable holding an id that exists.
REAL = {
    "ws": "FUZZ_WS",
    "wh": "FUZZ_WH",
    "id": "FUZZ_WH",
    "acc": "FUZZ_ACC",
    "key": "FUZZ_KEY",
}


@schemathesis.hook
def map_path_parameters(ctx, path_parameters):
    for name, variable in REAL.items():
        value = os.environ.get(variable)
        if path_parameters and name in path_parameters and value and random.random() < 0.7:
            path_parameters[name] = value
    return path_parameters
