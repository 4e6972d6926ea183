"""libgomp's wait policy: set before libgomp loads, and only when the user has not chosen one."""

import os
import subprocess
import sys

import pytest

from ziggurat.backends.llvm.jit import OMP_WAIT_DEFAULT, apply_omp_wait_policy, omp_wait_env
from ziggurat.errors import ZigguratError


@pytest.mark.parametrize("policy, env", [
    ("passive", {"OMP_WAIT_POLICY": "passive"}),
    ("active", {"OMP_WAIT_POLICY": "active"}),
    ("spin=5000", {"GOMP_SPINCOUNT": "5000"}),
    (" spin=0 ", {"GOMP_SPINCOUNT": "0"}),
    ("libgomp", {}),
])
def test_policy_maps_to_libgomp_environment(policy, env):
    assert omp_wait_env(policy) == env


@pytest.mark.parametrize("policy", ["fast", "spin", "spin=-1", "spin=1e4", "passive=1", ""])
def test_bad_policy_is_one_clear_error(policy):
    with pytest.raises(ZigguratError, match="ZIGGURAT_OMP_WAIT.*passive, active, spin=N"):
        omp_wait_env(policy)


def test_default_policy_is_applied_when_user_chose_none():
    environ = {"PATH": "/bin"}
    applied = apply_omp_wait_policy(environ)
    assert applied == omp_wait_env(OMP_WAIT_DEFAULT)
    assert environ == {"PATH": "/bin", **applied}
    environ = {"ZIGGURAT_OMP_WAIT": "spin=300"}
    assert apply_omp_wait_policy(environ) == {"GOMP_SPINCOUNT": "300"}
    assert environ == {"ZIGGURAT_OMP_WAIT": "spin=300", "GOMP_SPINCOUNT": "300"}


@pytest.mark.parametrize("user", [{"OMP_WAIT_POLICY": "active"}, {"GOMP_SPINCOUNT": "300000"},
                                  {"OMP_WAIT_POLICY": "passive", "ZIGGURAT_OMP_WAIT": "spin=1"}])
def test_user_libgomp_settings_win(user):
    environ = dict(user)
    assert apply_omp_wait_policy(environ) == {}
    assert environ == user


def test_ziggurat_omp_wait_chooses_the_policy():
    environ = {"ZIGGURAT_OMP_WAIT": "passive"}
    assert apply_omp_wait_policy(environ) == {"OMP_WAIT_POLICY": "passive"}
    assert environ["OMP_WAIT_POLICY"] == "passive" and "GOMP_SPINCOUNT" not in environ
    environ = {"ZIGGURAT_OMP_WAIT": "libgomp"}
    assert apply_omp_wait_policy(environ) == {} and environ == {"ZIGGURAT_OMP_WAIT": "libgomp"}


_CHILD = """
import os
from ziggurat.backends.llvm.jit import load_libgomp
before = {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
load_libgomp()
after = {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
print(before, after)
"""


def _child(env: dict[str, str]) -> str:
    base = {k: v for k, v in os.environ.items()
            if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "ZIGGURAT_OMP_WAIT")}
    out = subprocess.run([sys.executable, "-c", _CHILD], env={**base, **env},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_load_libgomp_sets_the_policy_before_loading():
    none = {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": None}
    assert _child({}) == f"{none} {dict(none, **omp_wait_env(OMP_WAIT_DEFAULT))}"
    spin = {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": "2000"}
    assert _child({"ZIGGURAT_OMP_WAIT": "spin=2000"}) == f"{none} {spin}"
    user = {"OMP_WAIT_POLICY": "active", "GOMP_SPINCOUNT": None}
    assert _child({"OMP_WAIT_POLICY": "active"}) == f"{user} {user}"


def test_bad_ziggurat_omp_wait_fails_the_load_cleanly():
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run([sys.executable, "-c", _CHILD], env={**env, "ZIGGURAT_OMP_WAIT": "fastest"},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "unknown OpenMP wait policy 'fastest'" in out.stderr
