"""The persistent compile cache (cache.py): hits across processes, keys, damage, concurrency,
the size bound and the switches. Small models built with onnx.helper; each test has its own
cache folder (ZIGGURAT_CACHE_DIR)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ziggurat
import ziggurat.runtime
from ziggurat import cache as disk_cache
from ziggurat import cache_key
from ziggurat.backends.llvm.options import LLVMOptions
from ziggurat.cli.main import main as cli_main
from ziggurat.compiler import clear_cache
from ziggurat.errors import CompileError
from ziggurat.target import Target

TARGET = "llvm -num-cores=1"


def dense_model(seed: int = 0, n: int = 8) -> onnx.ModelProto:
    """y = relu(x @ w + b), x: 2 x n."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["u"]),
         helper.make_node("Relu", ["u"], ["y"])],
        f"dense{seed}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, n])],
        [w, b],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.save_model(model, str(path))
    return path


def x_input(n: int = 8) -> np.ndarray:
    return np.random.default_rng(1).standard_normal((2, n)).astype(np.float32)


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """This test's cache root (entries under compiled/), with the cache on."""
    root = tmp_path / "cache"
    monkeypatch.setenv("ZIGGURAT_CACHE_DIR", str(root))
    monkeypatch.delenv("ZIGGURAT_CACHE", raising=False)
    monkeypatch.delenv("ZIGGURAT_CACHE_MAX_BYTES", raising=False)
    clear_cache()  # no in-process hits from earlier tests
    return root / "compiled"


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.zgc")) if folder.is_dir() else []


# A fresh interpreter compiles the model at argv[1], runs it on argv[2] and saves the output to
# argv[3]; it prints which cache served it and the compile's stages.
CHILD = """
import json, sys, numpy as np, ziggurat
m = ziggurat.compile(sys.argv[1], target=sys.argv[4])
np.save(sys.argv[3], m(np.load(sys.argv[2]))[0])
s = m.info["stats"]
print(json.dumps({"cache": s.cache, "hit": s.cache_hit, "stages": sorted(s.seconds), "ir": len(m.info["llvm_ir"])}))
"""


def child(model: Path, x: Path, out: Path, folder: Path) -> subprocess.Popen:
    env = dict(os.environ, ZIGGURAT_CACHE_DIR=str(folder.parent))
    return subprocess.Popen([sys.executable, "-c", CHILD, str(model), str(x), str(out), TARGET], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_a_new_process_compiles_from_the_disk_with_identical_outputs(folder, tmp_path):
    model, x = save(dense_model(), tmp_path / "m.onnx"), tmp_path / "x.npy"
    np.save(x, x_input())
    cold = finish(child(model, x, tmp_path / "cold.npy", folder))
    warm = finish(child(model, x, tmp_path / "warm.npy", folder))
    assert (cold["hit"], cold["cache"]) == (False, None) and "passes" in cold["stages"]
    assert (warm["hit"], warm["cache"]) == (True, "disk")
    assert "passes" not in warm["stages"] and "import" not in warm["stages"]
    assert warm["ir"] == cold["ir"] > 0  # info["llvm_ir"] is there on a disk hit too
    np.testing.assert_array_equal(np.load(tmp_path / "warm.npy"), np.load(tmp_path / "cold.npy"))
    assert len(entries(folder)) == 1


def test_an_in_process_disk_hit_matches_the_cold_build(folder, tmp_path):
    model = save(dense_model(2), tmp_path / "m.onnx")
    cold = ziggurat.compile(model, target=TARGET)
    clear_cache()
    warm = ziggurat.compile(str(model), target=TARGET)
    assert warm.info["stats"].cache == "disk"
    assert warm.info["llvm_ir"] == cold.info["llvm_ir"] and warm.info["entry_symbol"] == cold.info["entry_symbol"]
    assert [(s.name, s.shape, s.dtype) for s in warm.inputs + warm.outputs] == \
           [(s.name, s.shape, s.dtype) for s in cold.inputs + cold.outputs]
    assert (warm.info["stats"].kernels, warm.info["stats"].arena_bytes) == \
           (cold.info["stats"].kernels, cold.info["stats"].arena_bytes)
    np.testing.assert_array_equal(warm(x_input())[0], cold(x_input())[0])
    exported = ziggurat.runtime.load(warm.export(tmp_path / "m.so"))  # the entry keeps what export needs
    np.testing.assert_allclose(exported(x_input())[0], cold(x_input())[0], rtol=1e-6, atol=1e-6)
    # the same model as bytes or a ModelProto is keyed by its own bytes, and served the same way
    for given in (model.read_bytes(), dense_model(2)):
        ziggurat.compile(given, target=TARGET)
        clear_cache()
        again = ziggurat.compile(given, target=TARGET)
        assert again.info["stats"].cache == "disk"
        np.testing.assert_array_equal(again(x_input())[0], cold(x_input())[0])


def test_bfloat16_and_float8_signatures_come_back(folder, tmp_path):
    """numpy names bfloat16 '<V2' and float8_e5m2 '<f1', which it cannot read back: the header names
    ml_dtypes' types itself."""
    import ml_dtypes

    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"]),
                               helper.make_node("Cast", ["x"], ["z"], to=TensorProto.FLOAT8E5M2)], "bf16",
                              [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [4]),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT8E5M2, [4])])
    model = save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), tmp_path / "bf16.onnx")
    x = np.arange(4, dtype=np.float32).astype(ml_dtypes.bfloat16)
    cold = ziggurat.compile(model, target=TARGET)
    clear_cache()
    warm = ziggurat.compile(model, target=TARGET)
    assert warm.info["stats"].cache == "disk"
    assert [s.dtype for s in warm.inputs + warm.outputs] == [s.dtype for s in cold.inputs + cold.outputs] == \
           [np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e5m2)]
    for a, b in zip(warm(x), cold(x)):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def key_of(model, target: str = TARGET, pipeline: str = "p", bind=None, tuning_db=None, **options):
    tgt = Target.parse(target)
    opts = LLVMOptions.for_target(tgt, **options)
    key = disk_cache.DiskCache("unused").key(model, bind, pipeline, tgt, opts, tuning_db)
    assert key is not None
    return key.digest


def test_the_key_follows_model_weights_target_options_pipeline_and_code(tmp_path, monkeypatch):
    a, b = save(dense_model(0), tmp_path / "a.onnx"), save(dense_model(1), tmp_path / "b.onnx")  # other weights
    db1, db2 = tmp_path / "db1.jsonl", tmp_path / "db2.jsonl"
    db1.write_text('{"r": 1}\n')
    db2.write_text('{"r": 2}\n')  # same size, other content
    base = key_of(a)
    assert key_of(a) == base == key_of(str(a))  # deterministic
    variants = {
        "weights": key_of(b),
        "target": key_of(a, target="llvm -num-cores=2"),
        "cpu": key_of(a, target="llvm -mcpu=x86-64 -num-cores=1"),
        "options": key_of(a, fast_math=("fast",)),
        "opt level": key_of(a, opt_level=2),
        "pipeline": key_of(a, pipeline="q"),
        "bind": key_of(a, bind={"x": np.zeros((2, 8), np.float32)}),
        "tuning db": key_of(a, tuning_db=db1),
        "tuning db content": key_of(a, tuning_db=db2),
    }
    monkeypatch.setattr(cache_key, "code_stamp", lambda: b"another version of the code")
    variants["code"] = key_of(a)
    assert len(set(variants.values()) | {base}) == len(variants) + 1, variants


def test_the_code_stamp_covers_the_package_sources_only():
    root = Path(cache_key.__file__).resolve().parent
    files = {Path(p).relative_to(root).as_posix() for p in cache_key._source_files(str(root))}
    assert {"cache.py", "cache_key.py", "compiler.py", "backends/llvm/jit.py", "lowering/pipelines.py"} <= files
    assert not [f for f in files if f.startswith(("tests/", "docs/", "benchmarks/", ".venv/"))]
    assert cache_key.code_stamp() == cache_key.code_stamp()


def test_external_data_files_are_part_of_the_key(tmp_path):
    model = dense_model(3)
    path = tmp_path / "m.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin",
                    size_threshold=0)
    before = key_of(path)
    data = bytearray((tmp_path / "w.bin").read_bytes())
    data[0] ^= 0xFF  # the weights change, the .onnx file does not
    (tmp_path / "w.bin").write_bytes(bytes(data))
    assert key_of(path) != before


def test_instrumented_builds_are_not_cached():
    options = SimpleNamespace(profile=True, num_threads=1, cpu="x86-64")
    assert disk_cache.DiskCache("unused").key(b"model", None, "p", Target.parse(TARGET), options) is None


@pytest.mark.parametrize("damage", ["truncate", "flip payload", "flip header", "garbage", "empty"])
def test_a_damaged_entry_is_a_miss_and_is_removed(folder, tmp_path, damage):
    model = save(dense_model(4), tmp_path / "m.onnx")
    first = ziggurat.compile(model, target=TARGET)
    (entry,) = entries(folder)
    data = bytearray(entry.read_bytes())
    if damage == "truncate":
        data = data[: len(data) - 100]
    elif damage == "flip payload":
        data[-1] ^= 0x01
    elif damage == "flip header":
        data[40] ^= 0x01
    elif damage == "garbage":
        data = bytearray(os.urandom(len(data)))
    else:
        data = bytearray()
    entry.write_bytes(bytes(data))
    clear_cache()
    again = ziggurat.compile(model, target=TARGET)
    assert not again.info["stats"].cache_hit  # built again ...
    np.testing.assert_array_equal(again(x_input())[0], first(x_input())[0])
    (rewritten,) = entries(folder)  # ... and stored again, whole
    clear_cache()
    assert ziggurat.compile(model, target=TARGET).info["stats"].cache == "disk"
    assert rewritten.stat().st_size == len(entry.read_bytes())


def test_concurrent_writers_all_succeed_and_leave_one_valid_entry(folder, tmp_path):
    model, x = save(dense_model(5), tmp_path / "m.onnx"), tmp_path / "x.npy"
    np.save(x, x_input())
    procs = [child(model, x, tmp_path / f"out{i}.npy", folder) for i in range(4)]
    results = [finish(p) for p in procs]
    outs = [np.load(tmp_path / f"out{i}.npy") for i in range(4)]
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])
    assert len(entries(folder)) == 1 and not list(folder.glob("*.tmp")) and not list(folder.glob(".*.tmp"))
    assert all(r["cache"] in (None, "disk") for r in results)
    clear_cache()
    m = ziggurat.compile(model, target=TARGET)
    assert m.info["stats"].cache == "disk"
    np.testing.assert_array_equal(m(x_input())[0], outs[0])


def test_eviction_removes_the_least_recently_used_first(tmp_path):
    store = disk_cache.DiskCache(tmp_path, limit=2500)
    now = time.time()
    for i, age in enumerate([400, 300, 200, 100]):  # e0 oldest ... e3 newest, 1000 bytes each
        path = tmp_path / f"e{i}{disk_cache.SUFFIX}"
        path.write_bytes(bytes(1000))
        os.utime(path, (now - age, now - age))
    os.utime(tmp_path / f"e0{disk_cache.SUFFIX}")  # a hit: now the most recently used
    stale = tmp_path / ".abc.1.tmp"
    stale.write_bytes(b"x")
    os.utime(stale, (now - 2 * disk_cache.STALE_TMP_SECONDS,) * 2)
    assert store.evict() == 2000
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"e0{disk_cache.SUFFIX}", f"e3{disk_cache.SUFFIX}"]


def test_compiles_keep_the_folder_under_its_bound(folder, tmp_path, monkeypatch):
    first = save(dense_model(10, n=64), tmp_path / "m10.onnx")
    ziggurat.compile(first, target=TARGET)
    one = entries(folder)[0].stat().st_size
    monkeypatch.setenv("ZIGGURAT_CACHE_MAX_BYTES", str(int(2.5 * one)))
    for seed in (11, 12, 13):
        ziggurat.compile(save(dense_model(seed, n=64), tmp_path / f"m{seed}.onnx"), target=TARGET)
        assert sum(p.stat().st_size for p in entries(folder)) <= 2.5 * one
    assert len(entries(folder)) == 2


def test_max_bytes_reads_sizes(monkeypatch):
    for text, value in (("", disk_cache.DEFAULT_MAX_BYTES), ("1000", 1000), ("512M", 512 << 20), ("2g", 2 << 30)):
        monkeypatch.setenv("ZIGGURAT_CACHE_MAX_BYTES", text)
        assert disk_cache.max_bytes() == value
    monkeypatch.setenv("ZIGGURAT_CACHE_MAX_BYTES", "lots")
    with pytest.raises(CompileError, match="ZIGGURAT_CACHE_MAX_BYTES"):
        disk_cache.max_bytes()


def test_the_switches_turn_it_off(folder, tmp_path, monkeypatch):
    model = save(dense_model(6), tmp_path / "m.onnx")
    monkeypatch.setenv("ZIGGURAT_CACHE", "0")
    ziggurat.compile(model, target=TARGET)
    assert not entries(folder)
    ziggurat.compile(model, target=TARGET, cache=True)  # the argument wins over the variable
    assert len(entries(folder)) == 1
    monkeypatch.delenv("ZIGGURAT_CACHE")
    clear_cache()
    assert not ziggurat.compile(model, target=TARGET, cache=False).info["stats"].cache_hit
    other = save(dense_model(7), tmp_path / "other.onnx")
    ziggurat.compile(other, target=TARGET, after_pass=lambda *a: None)  # sees the passes: never cached
    assert len(entries(folder)) == 1


def test_cli_info_and_clear(folder, tmp_path, capsys):
    ziggurat.compile(save(dense_model(8), tmp_path / "m.onnx"), target=TARGET)
    assert cli_main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert str(folder) in out and "1 model(s)" in out and "m.onnx" in out
    assert cli_main(["cache", "clear"]) == 0
    assert "removed 1 compiled model(s)" in capsys.readouterr().out
    assert not entries(folder)
