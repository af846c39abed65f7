"""Schemathesis hooks for scripts/api-fuzz: most generated path ids are swapped for
ids that exist (set by the script in FUZZ_* variables), so that the fuzzed bodies
reach the handlers instead of stopping at a 404; and what a case created against
a workspace's limits is removed again."""

import os
import random
import urllib.request

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
    operation = getattr(ctx, "operation", None)
    path = getattr(operation, "path", "") or ""
    if "/stream" in path:
        # A listener's stream never ends by itself: only ids that exist not.
        return path_parameters
    for name, variable in REAL.items():
        if name == "id" and "/listeners/" in path:
            variable = "FUZZ_LSN"
        value = os.environ.get(variable)
        if path_parameters and name in path_parameters and value and random.random() < 0.7:
            path_parameters[name] = value
    return path_parameters


# What a case made that counts against a limit, and how to take it away again:
# the path that answered 201, the id's prefix, and the removal's path.
REMOVE_AFTER_CREATION = [
    ("/api/v1/hooks", "wh_", "FUZZ_PUBLIC", "FUZZ_API_KEY", "/api/v1/hooks/{}"),
    ("/api/v1/listeners", "lsn_", "FUZZ_PUBLIC", "FUZZ_API_KEY", "/api/v1/listeners/{}"),
    ("/hooks", "wh_", "FUZZ_ADMIN", "FUZZ_TOKEN", "/admin/v1/hooks/{}"),
    ("/keys", "key_", "FUZZ_ADMIN", "FUZZ_TOKEN", "/admin/v1/keys/{}"),
]


@schemathesis.hook
def after_call(ctx, case, response):
    """A webhook or key a case created is deleted (revoked) again, so that the
    next case meets a workspace below its limits (ten webhooks, three listeners),
    as a test would."""
    if response.status_code != 201:
        return
    path = case.formatted_path
    for suffix, prefix, base, credential, removal in REMOVE_AFTER_CREATION:
        if not path.endswith(suffix) or not os.environ.get(base):
            continue
        made = response.json().get("data", {}).get("id", "")
        if made.startswith(prefix):
            request = urllib.request.Request(
                os.environ[base] + removal.format(made),
                method="DELETE",
                headers={"Authorization": "Bearer " + os.environ[credential]},
            )
            urllib.request.urlopen(request, timeout=10).read()
        return
