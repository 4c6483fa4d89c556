"""A failed helm's message in a condition: helm's error (the last "Error:" on), not its log lines, with
helm's own "UPGRADE FAILED:" prefix dropped (helmop's message names the action once). The stderr texts
are what helm 4.1 and 3.17 print for these failures."""

from __future__ import annotations

import pytest
from pyhelm3 import errors as helm_errors

from helmop.helm.engine import classify

INVALID = 'ConfigMap in version "v1" cannot be handled as a ConfigMap: data.a: Invalid value: "integer": ' \
          'data.a in body must be of type string: "integer"'


@pytest.mark.parametrize("stderr,expected", [
    (f"Error: {INVALID}\n", INVALID),
    (f'level=WARN msg="upgrade failed" name=rm error="failed to create resource: {INVALID}"\n'
     f"Error: UPGRADE FAILED: failed to create resource: {INVALID}\n", f"failed to create resource: {INVALID}"),
    (f"Error: 1 error occurred:\n\t* {INVALID}\n\n\n", INVALID),
    (f"Error: INSTALLATION FAILED: {INVALID}\n", INVALID),
    ("W1124 08:00:00.000000   12 warnings.go:70] unknown field \"spec.x\"\nError: UPGRADE FAILED: context deadline "
     "exceeded\n", "context deadline exceeded"),
    ("", "helm failed without a message"),
])
def test_conditions_carry_helms_error_not_its_log(stderr: str, expected: str) -> None:
    error = classify(helm_errors.Error(1, b"", stderr.encode()), "upgrade")
    assert str(error) == expected or str(error).endswith(expected), str(error)
    assert "level=" not in str(error) and "FAILED:" not in str(error) and not str(error).startswith("Error:")
