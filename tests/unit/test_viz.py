"""`ziggurat viz`: DOT, SVG and HTML of the compiled model (cli/viz*.py, docs/viz.md).

The Chromium test renders the page headless and finds each kernel's fill colour in the
screenshot; it skips without a chromium binary. `make_doc_images` rewrites the two
screenshots in docs/images; it runs only with ZIGGURAT_VIZ_DOC_IMAGES=1.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections import deque
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ziggurat.cli import viz_render
from ziggurat.cli.main import main
from ziggurat.cli.viz import write
from ziggurat.cli.viz_model import extract
from ziggurat.cli.viz_png import decode_png, encode_png, find_chromium, screenshot, shrink_png

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "models"
SVG_NS = "{http://www.w3.org/2000/svg}"


def _init(name: str, shape: tuple[int, ...], rng: np.random.Generator, scale: float = 0.2) -> onnx.TensorProto:
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def small_cnn() -> onnx.ModelProto:
    """conv-bn-relu, conv-bn-relu, max pool, flatten, gemm: the conv groups fuse."""
    rng = np.random.default_rng(0)
    inits, nodes = [], []
    c_in = 3
    for i, c in enumerate((16, 32), 1):
        inits += [_init(f"w{i}", (c, c_in, 3, 3), rng), _init(f"b{i}", (c,), rng),
                  numpy_helper.from_array(np.abs(rng.standard_normal(c)).astype(np.float32) + 0.5, f"g{i}"),
                  _init(f"be{i}", (c,), rng), _init(f"m{i}", (c,), rng),
                  numpy_helper.from_array(np.abs(rng.standard_normal(c)).astype(np.float32) + 0.5, f"v{i}")]
        src = "x" if i == 1 else "r1"
        nodes += [helper.make_node("Conv", [src, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]),
                  helper.make_node("BatchNormalization", [f"c{i}", f"g{i}", f"be{i}", f"m{i}", f"v{i}"], [f"n{i}"],
                                   name=f"bn{i}"),
                  helper.make_node("Relu", [f"n{i}"], [f"r{i}"], name=f"relu{i}")]
        c_in = c
    inits += [_init("wf", (10, 32 * 4 * 4), rng, 0.05), _init("bf", (10,), rng)]
    nodes += [helper.make_node("MaxPool", ["r2"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
              helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
              helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1)]
    g = helper.make_graph(nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def small_transformer() -> onnx.ModelProto:
    """One encoder block: Q/K/V MatMuls, scaled scores, Softmax, output projection, residual
    Add and LayerNormalization, then a ReLU MLP with its own residual and LayerNormalization."""
    rng = np.random.default_rng(1)
    s, d = 16, 32
    inits = [_init(n, (d, d), rng) for n in ("wq", "wk", "wv", "wo")]
    inits += [_init("w1", (d, 2 * d), rng), _init("w2", (2 * d, d), rng),
              numpy_helper.from_array(np.array(d ** -0.5, np.float32), "scale"),
              numpy_helper.from_array(np.ones(d, np.float32), "gamma"),
              numpy_helper.from_array(np.zeros(d, np.float32), "beta")]
    mk = helper.make_node
    nodes = [mk("MatMul", ["x", "wq"], ["q"], name="q_proj"), mk("MatMul", ["x", "wk"], ["k"], name="k_proj"),
             mk("MatMul", ["x", "wv"], ["v"], name="v_proj"),
             mk("Transpose", ["k"], ["kt"], name="k_transpose", perm=[0, 2, 1]),
             mk("MatMul", ["q", "kt"], ["scores"], name="scores"), mk("Mul", ["scores", "scale"], ["scaled"], name="scale"),
             mk("Softmax", ["scaled"], ["attn"], name="softmax", axis=-1),
             mk("MatMul", ["attn", "v"], ["ctx"], name="context"), mk("MatMul", ["ctx", "wo"], ["o"], name="out_proj"),
             mk("Add", ["x", "o"], ["res1"], name="residual1"),
             mk("LayerNormalization", ["res1", "gamma", "beta"], ["ln1"], name="norm1", axis=-1),
             mk("MatMul", ["ln1", "w1"], ["h"], name="ffn_up"), mk("Relu", ["h"], ["hr"], name="ffn_relu"),
             mk("MatMul", ["hr", "w2"], ["f"], name="ffn_down"), mk("Add", ["ln1", "f"], ["res2"], name="residual2"),
             mk("LayerNormalization", ["res2", "gamma", "beta"], ["y"], name="norm2", axis=-1)]
    g = helper.make_graph(nodes, "small_transformer",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, s, d])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, s, d])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


MODELS = {"cnn": small_cnn, "transformer": small_transformer}


@pytest.fixture(scope="module")
def model_files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("viz_models")
    paths = {}
    for name, build in MODELS.items():
        paths[name] = folder / f"{name}.onnx"
        onnx.save(build(), paths[name])
    return paths


@pytest.fixture(scope="module")
def vizzes(model_files):
    return {name: extract(str(path)) for name, path in model_files.items()}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_dot_names_every_onnx_node_and_has_one_cluster_per_kernel(vizzes, name) -> None:
    viz = vizzes[name]
    dot = viz_render.to_dot(viz)
    for node in MODELS[name]().graph.node:
        assert node.name in dot, node.name
    assert dot.count("subgraph cluster_") == len(viz.kernels)
    assert all(f"subgraph cluster_k{k.index} " in dot for k in viz.kernels)
    assert all(e.src in dot and e.dst in dot for e in viz.edges)
    assert all(k.est_us is not None and k.est_us > 0 for k in viz.kernels)  # the cost oracle priced every kernel


def test_cnn_groups_conv_bn_relu_in_one_kernel(vizzes) -> None:
    viz = vizzes["cnn"]
    by_id = {v.id: v for v in viz.vertices}
    groups = [{n[1] for vid in k.vertices for n in by_id[vid].nodes + by_id[vid].folded} for k in viz.kernels]
    assert any({"conv1", "bn1", "relu1"} <= g for g in groups), groups  # the Conv folded into its BN, fused with Relu
    assert any({"conv2", "bn2", "relu2"} <= g for g in groups), groups
    assert any(v.layout and v.layout.startswith("NCHW") for v in viz.vertices)  # convert-layout's blocked values


def test_transformer_kernels_and_decisions(vizzes) -> None:
    viz = vizzes["transformer"]
    by_id = {v.id: v for v in viz.vertices}
    ops = {by_id[vid].op for k in viz.kernels for vid in k.vertices}
    assert {"softmax", "reduce"} & ops and any("matmul" in op for op in ops)
    assert any(k.decision for k in viz.kernels)  # cost-guided fuse-ops merged the layer norms (at least)
    assert any("fusion: the op-pattern rules make" in n for n in viz.notes)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_svg_is_well_formed_with_one_group_per_kernel(vizzes, name) -> None:
    viz = vizzes[name]
    root = ET.fromstring(viz_render.to_svg(viz))
    assert root.tag == f"{SVG_NS}svg"
    kernels = [g for g in root.iter(f"{SVG_NS}g") if g.get("class") == "kernel"]
    assert len(kernels) == len(viz.kernels)
    colours = [g.get("data-colour") for g in kernels]
    assert len(set(colours)) == len(colours)
    for g in kernels:
        assert g.find(f"{SVG_NS}rect").get("fill") == g.get("data-colour")
    assert len([p for p in root.iter(f"{SVG_NS}path") if "edge" in (p.get("class") or "")]) == len(viz.edges)


def test_html_has_the_kernel_table(vizzes) -> None:
    viz = vizzes["cnn"]
    page = viz_render.to_html(viz)
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and '<table class="kernels">' in page
    for k in viz.kernels:
        assert f'id="row-{k.index}"' in page and k.name in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")  # self-contained
    assert "https://" not in page


def test_cli_writes_each_format(model_files, tmp_path, capsys) -> None:
    model = str(model_files["cnn"])
    for suffix in ("dot", "svg"):
        assert main(["viz", model, "-o", str(tmp_path / f"g.{suffix}")]) == 0
    ET.parse(tmp_path / "g.svg")
    assert "digraph" in (tmp_path / "g.dot").read_text()
    assert main(["viz", model, "-o", str(tmp_path / "g.html"), "--rounds", "3", "--warmup", "1", "--threads", "1"]) == 0
    page = (tmp_path / "g.html").read_text()
    assert "measured: per kernel call" in page  # the profiler's times matched the kernels one to one
    assert main(["viz", model, "-o", str(tmp_path / "g.txt")]) == 1
    assert "cannot tell the format" in capsys.readouterr().err


def test_measured_times_come_from_the_profiler(model_files) -> None:
    viz = extract(str(model_files["transformer"]), target="llvm -num-cores=1", measure=True, rounds=3, warmup=1)
    assert viz.measured
    assert all(k.measured_us is not None and k.measured_us > 0 for k in viz.kernels)


def test_png_codec_round_trip() -> None:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (23, 17, 3)).astype(np.uint8)
    img[5:9] = img[4]  # rows the Up filter likes
    assert np.array_equal(decode_png(encode_png(img)), img)


def _components(mask: np.ndarray, min_size: int) -> int:
    """Connected regions (4-neighbour) of at least `min_size` pixels."""
    seen = np.zeros_like(mask)
    count = 0
    for y, x in zip(*np.nonzero(mask)):
        if seen[y, x]:
            continue
        seen[y, x], size, queue = True, 0, deque([(y, x)])
        while queue:
            cy, cx = queue.popleft()
            size += 1
            for ny, nx in ((cy + 1, cx), (cy - 1, cx), (cy, cx + 1), (cy, cx - 1)):
                if 0 <= ny < mask.shape[0] and 0 <= nx < mask.shape[1] and mask[ny, nx] and not seen[ny, nx]:
                    seen[ny, nx] = True
                    queue.append((ny, nx))
        count += size >= min_size
    return count


def test_chromium_screenshot_shows_each_kernel(vizzes, tmp_path) -> None:
    if find_chromium() is None:
        pytest.skip("no chromium, chromium-browser or google-chrome binary on PATH (apt-get install chromium)")
    viz = vizzes["cnn"]
    page = tmp_path / "cnn.html"
    page.write_text(viz_render.to_html(viz))
    height = int(viz_render.layout(viz).height) + 400  # the whole drawing in the window
    img = decode_png(screenshot(page, tmp_path / "cnn.png", 1400, max(1000, height)).read_bytes())[..., :3]
    for k, colour in zip(viz.kernels, viz_render.kernel_colours(len(viz.kernels))):
        rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)], np.uint8)
        mask = np.all(img == rgb, axis=2)
        assert mask.sum() > 300, f"kernel {k.index} ({k.name}): colour {colour} not in the screenshot"
        # its frame in the drawing and its swatch in the table
        assert _components(mask, 30) == 2, f"kernel {k.index} ({k.name}): colour {colour}"


def make_doc_images(folder: Path = ROOT / "docs" / "images", measure: bool = True) -> list[Path]:
    """docs/images/viz_vgg_small_bn.png and viz_transformer.png: the top of each model's page,
    measured on this machine, each under 300 KB."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for model, name in (("vgg_small_bn", "viz_vgg_small_bn.png"),
                        ("transformer_encoder_2l_d128", "viz_transformer.png")):
        path = SHARED / model / "model.onnx"
        if not path.is_file():
            continue
        viz = extract(str(path), target="llvm -num-cores=1", measure=measure)
        viz.model = f"../shared/models/{model}/model.onnx"
        out = write(viz, folder / name, "png", 1400, 1000)
        shrink_png(out, 300_000)
        made.append(out)
    return made


@pytest.mark.skipif(os.environ.get("ZIGGURAT_VIZ_DOC_IMAGES") != "1",
                    reason="rewrites docs/images; run with ZIGGURAT_VIZ_DOC_IMAGES=1")
def test_make_doc_images() -> None:
    if find_chromium() is None:
        pytest.skip("no chromium binary on PATH")
    made = make_doc_images()
    assert made
    for path in made:
        assert path.stat().st_size < 300_000
        assert decode_png(path.read_bytes()).shape[1] >= 700
