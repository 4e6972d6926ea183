"""`ziggurat viz` output: DOT text, a built-in layered layout drawn as SVG, and a self-contained HTML page.

The layout needs no Graphviz. Each kernel is laid out on its own first (its ops
in rows by their depth inside the group) and becomes one rectangle; the
rectangles, with the model's inputs and outputs, are then put in layers by
their depth in the kernel graph (longest path from the inputs), each layer
ordered and placed by the mean x of its predecessors (one barycenter sweep, top
to bottom). Edges are cubic curves from the bottom of a producer to the top of
a consumer. Each kernel gets its own fill colour (`kernel_colours`), also used
for its swatch in the HTML table.
"""

from __future__ import annotations

import colorsys
import html
from dataclasses import dataclass

from ziggurat.cli.viz_model import Kernel, Vertex, VizGraph

VW, VH, IO_H = 236, 46, 30  # op box width and height, input/output box height
PAD, HEADER, ROW_GAP, COL_GAP = 10, 34, 16, 14  # inside a kernel box
LAYER_GAP, GROUP_GAP, MARGIN = 34, 26, 16
CHARS = 34  # characters of 11px monospace that fit in an op box
BLOCKED = "#7a3db8"  # edges and text of values in a layout a pass changed


def kernel_colours(n: int) -> list[str]:
    """`n` distinct light fill colours (golden-angle hues), as #rrggbb."""
    out: list[str] = []
    for i in range(n):
        hue, light = (i * 0.381966) % 1.0, 0.80 + 0.06 * ((i // 7) % 2)
        while True:
            r, g, b = colorsys.hls_to_rgb(hue, light, 0.62)
            c = f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"
            if c not in out:
                break
            hue = (hue + 0.003) % 1.0
        out.append(c)
    return out


def _clip(text: str, n: int = CHARS) -> str:
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def _us(x: float | None) -> str:
    return "-" if x is None else (f"{x:.2f}" if x < 10 else f"{x:.1f}")


def node_text(node: tuple[str, str]) -> str:
    return f"{node[0]} {node[1]}"


def vertex_lines(v: Vertex) -> list[str]:
    """The text of a box: op, ONNX node, layout and notes (the first two always present)."""
    if v.kind != "op":
        return [f"{v.kind} {v.op}", v.type]
    if v.nodes:
        second = node_text(v.nodes[0]) + (f" +{len(v.nodes) - 1}" if len(v.nodes) > 1 else "")
    elif v.part_of is not None:
        second = f"(in {node_text(v.part_of)})"
    elif v.op == "layout_transform":
        second = "(added by convert-layout)"
    else:
        second = "(no ONNX node)"
    third = ([f"\u2192 {v.layout}"] if v.layout else []) + v.notes + ([f"+{len(v.folded)} folded"] if v.folded else [])
    return [v.op, second] + ([" \u00b7 ".join(third)] if third else [])


def vertex_title(v: Vertex) -> str:
    lines = [f"{v.op} : {v.type}" if v.kind == "op" else f"{v.kind} {v.op} : {v.type}"]
    lines += [f"ONNX {node_text(n)}" for n in v.nodes]
    if v.part_of:
        lines.append(f"part of ONNX {node_text(v.part_of)}")
    lines += [f"folded into it: {node_text(n)}" for n in v.folded]
    if v.layout:
        lines.append(f"layout {v.layout}")
    lines += v.notes
    return "\n".join(lines)


def kernel_title(k: Kernel) -> str:
    lines = [f"kernel #{k.index} {k.name}" + (f" ({k.calls} calls of this function)" if k.calls > 1 else ""),
             f"estimated {_us(k.est_us)} us ({k.est_source or 'no estimate'}), measured {_us(k.measured_us)} us"]
    if k.decision:
        lines.append(f"fusion decision: {k.decision}")
    if k.layout_decision:
        lines.append(f"layout decision: {k.layout_decision}")
    return "\n".join(lines)


# ---------------------------------------------------------------- DOT


def _dq(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(viz: VizGraph) -> str:
    """Graphviz DOT: one `subgraph cluster_k<i>` per kernel (its colour, estimated and measured time,
    fusion decision), one node per graph op naming its ONNX nodes (folded ones too), layout-labelled edges."""
    colours = kernel_colours(len(viz.kernels))
    by_id = {v.id: v for v in viz.vertices}
    out = [f"digraph {_dq(viz.model)} {{",
           f"  label={_dq(f'{viz.model} for {viz.target}, O{viz.opt_level}: {len(viz.kernels)} kernels')};",
           "  labelloc=t; rankdir=TB; compound=true;",
           '  node [shape=box, style="rounded,filled", fillcolor=white, fontname="monospace", fontsize=10];',
           '  edge [fontname="monospace", fontsize=9, color="#555555"];']

    def node_line(v: Vertex, indent: str) -> str:
        lines = vertex_lines(v)
        if v.kind == "op":
            lines[1:2] = [node_text(n) for n in v.nodes] or lines[1:2]
            lines += [f"folded: {node_text(n)}" for n in v.folded]
            shape = ""
        else:
            shape = ', shape=ellipse, fillcolor="#eeeeee"'
        return f"{indent}{v.id} [label={_dq(chr(10).join(lines))}{shape}];"

    for v in viz.vertices:
        if v.kind == "input":
            out.append(node_line(v, "  "))
    for k, colour in zip(viz.kernels, colours):
        head = [k.name, f"est {_us(k.est_us)} us ({k.est_source or 'n/a'})"
                + (f", measured {_us(k.measured_us)} us" if k.measured_us is not None else "")]
        head += [d for d in (k.decision, k.layout_decision) if d]
        out.append(f"  subgraph cluster_k{k.index} {{")
        out.append(f'    label={_dq(chr(10).join(head))}; style="rounded,filled"; fillcolor="{colour}"; color="#666666";')
        out += [node_line(by_id[vid], "    ") for vid in k.vertices]
        out.append("  }")
    for v in viz.vertices:
        if v.kind == "output":
            out.append(node_line(v, "  "))
    for e in viz.edges:
        attrs = f' [label={_dq(e.layout)}, color="{BLOCKED}", fontcolor="{BLOCKED}"]' if e.layout else ""
        out.append(f"  {e.src} -> {e.dst}{attrs};")
    if viz.unplaced:
        text = "ONNX nodes not in the compiled graph:\n" + "\n".join(node_text(n) for n in viz.unplaced)
        out.append(f"  unplaced [shape=note, label={_dq(text)}];")
    out.append("}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- layout


@dataclass
class Box:
    x: float
    y: float
    w: float
    h: float


@dataclass
class Layout:
    width: float
    height: float
    vertices: dict[str, Box]
    kernels: dict[int, Box]
    routes: dict[int, list[tuple[float, float]]]  # edge index -> polyline, for edges not drawn as one curve


def _depths(members: list[str], preds: dict[str, list[str]]) -> dict[str, int]:
    """Longest-path depth of each of `members` (in topological order) over the edges among them."""
    inside, depth = set(members), {}
    for m in members:
        depth[m] = max((depth[p] + 1 for p in preds.get(m, []) if p in inside and p in depth), default=0)
    return depth


def layout(viz: VizGraph) -> Layout:
    """Positions of every op box and kernel box (see the module docstring)."""
    preds: dict[str, list[str]] = {}
    for e in viz.edges:
        preds.setdefault(e.dst, []).append(e.src)
    groups: list[tuple[int | None, list[str]]] = [(None, [v.id]) for v in viz.vertices if v.kind == "input"]
    groups += [(k.index, k.vertices) for k in viz.kernels]
    groups += [(None, [v.id]) for v in viz.vertices if v.kind == "output"]
    group_of = {vid: g for g, (_, members) in enumerate(groups) for vid in members}
    local: dict[str, tuple[float, float]] = {}
    sizes: list[tuple[float, float]] = []
    for kernel, members in groups:
        if kernel is None:
            local[members[0]] = (0.0, 0.0)
            sizes.append((VW, IO_H))
            continue
        depth = _depths(members, preds)
        rows: list[list[str]] = [[] for _ in range(max(depth.values()) + 1)]
        for m in members:
            rows[depth[m]].append(m)
        inner_w = max(len(r) * VW + (len(r) - 1) * COL_GAP for r in rows)
        for i, row in enumerate(rows):
            row_w = len(row) * VW + (len(row) - 1) * COL_GAP
            for j, m in enumerate(row):
                local[m] = (PAD + (inner_w - row_w) / 2 + j * (VW + COL_GAP), HEADER + i * (VH + ROW_GAP))
        sizes.append((inner_w + 2 * PAD, HEADER + len(rows) * VH + (len(rows) - 1) * ROW_GAP + PAD))
    gpreds: list[set[int]] = [set() for _ in groups]
    for e in viz.edges:
        a, b = group_of[e.src], group_of[e.dst]
        if a != b:
            gpreds[b].add(a)
    gdepth: list[int] = []
    for g in range(len(groups)):
        gdepth.append(max((gdepth[p] + 1 for p in gpreds[g] if p < g), default=0))
    layers: list[list[int]] = [[] for _ in range(max(gdepth, default=0) + 1)]
    for g, d in enumerate(gdepth):
        layers[d].append(g)
    centre: dict[int, float] = {}
    top: dict[int, float] = {}
    y = MARGIN
    for layer in layers:
        want = {g: sum(centre[p] for p in gpreds[g]) / len(gpreds[g]) if gpreds[g] else None for g in layer}
        order = sorted(layer, key=lambda g: (want[g] is None, want[g] or 0.0, g))
        right, placed = None, {}
        for g in order:
            w = sizes[g][0]
            x = want[g] - w / 2 if want[g] is not None else (right + GROUP_GAP if right is not None else 0.0)
            if right is not None:
                x = max(x, right + GROUP_GAP)
            placed[g], right = x, x + w
        moved = [want[g] - (placed[g] + sizes[g][0] / 2) for g in order if want[g] is not None]
        shift = sum(moved) / len(moved) if moved else 0.0  # pushed right by neighbours: recentre the layer
        for g in order:
            centre[g] = placed[g] + shift + sizes[g][0] / 2
            top[g] = y
        y += max(sizes[g][1] for g in layer) + LAYER_GAP
    vertices: dict[str, Box] = {}
    kernels: dict[int, Box] = {}
    for g, (kernel, members) in enumerate(groups):
        gx = centre[g] - sizes[g][0] / 2
        if kernel is not None:
            kernels[kernel] = Box(gx, top[g], *sizes[g])
        for m in members:
            lx, ly = local[m]
            vertices[m] = Box(gx + lx, top[g] + ly, VW, IO_H if kernel is None else VH)
    bands = [(top[layer[0]], top[layer[0]] + max(sizes[g][1] for g in layer),
              min(centre[g] - sizes[g][0] / 2 for g in layer), max(centre[g] + sizes[g][0] / 2 for g in layer))
             for layer in layers]
    depth_of = {vid: gdepth[group_of[vid]] for vid in group_of}
    routes = _routes(viz, vertices, kernels, bands, depth_of)
    xs = [b.x for b in vertices.values()] + [b.x for b in kernels.values()] + [x for r in routes.values() for x, _ in r]
    right = [b.x + b.w for b in vertices.values()] + [b.x + b.w for b in kernels.values()] + \
        [x for r in routes.values() for x, _ in r]
    dx = MARGIN - min(xs)
    for b in (*vertices.values(), *kernels.values()):
        b.x += dx
    routes = {i: [(x + dx, y) for x, y in r] for i, r in routes.items()}
    return Layout(max(right) + dx + MARGIN, y - LAYER_GAP + MARGIN, vertices, kernels, routes)


def _routes(viz: VizGraph, vertices: dict[str, Box], kernels: dict[int, Box],
            bands: list[tuple[float, float, float, float]], depth_of: dict[str, int]) -> dict[int, list]:
    """Polylines for the edges a curve would draw through boxes: an edge that skips a layer runs down
    a lane beside the layers it skips, and one into an op below the first row of its kernel comes down
    the kernel's inner left margin. Lanes are shared where their vertical spans do not overlap."""
    by_id = {v.id: v for v in viz.vertices}
    lanes: dict[str, list[list[tuple[float, float]]]] = {"left": [], "right": []}
    routes: dict[int, list] = {}

    def lane(side: str, y0: float, y1: float) -> int:
        for i, taken in enumerate(lanes[side]):
            if all(y1 < a or y0 > b for a, b in taken):
                taken.append((y0, y1))
                return i
        lanes[side].append([(y0, y1)])
        return len(lanes[side]) - 1

    for i, e in enumerate(viz.edges):
        src, dst = by_id[e.src], by_id[e.dst]
        a, b = vertices[e.src], vertices[e.dst]
        x1, y1, x2, y2 = a.x + a.w / 2, a.y + a.h, b.x + b.w / 2, b.y
        frame = kernels.get(dst.kernel) if dst.kernel is not None else None
        if src.kernel is not None and src.kernel == dst.kernel:
            if b.y - a.y > VH + ROW_GAP + 1:  # skips a row inside its kernel
                cx = frame.x + PAD / 2
                routes[i] = [(x1, y1), (x1, y1 + ROW_GAP / 2), (cx, y1 + ROW_GAP / 2), (cx, y2 - ROW_GAP / 2),
                             (x2, y2 - ROW_GAP / 2), (x2, y2)]
            continue
        first_row = frame is None or abs(b.y - frame.y - HEADER) < 1
        ds, dd = depth_of[e.src], depth_of[e.dst]
        if dd - ds <= 1 and first_row:
            continue  # the curve of to_svg
        wiggle = (i % 5 - 2) * 3.0
        gy = bands[ds][1] + LAYER_GAP / 2 + wiggle
        pts = [(x1, y1), (x1, gy)]
        if dd - ds > 1:
            skipped = bands[ds + 1:dd]
            lo, hi = min(bd[2] for bd in skipped), max(bd[3] for bd in skipped)
            side = "left" if (x1 + x2) / 2 < (lo + hi) / 2 else "right"
            gy2 = bands[dd][0] - LAYER_GAP / 2 + wiggle
            k = lane(side, gy, gy2)
            lx = lo - 12 - 7 * k if side == "left" else hi + 12 + 7 * k
            pts += [(lx, gy), (lx, gy2)]
            gy = gy2
        if first_row:
            pts += [(x2, gy), (x2, frame.y if frame is not None else y2)]
        else:
            cx = frame.x + PAD / 2
            pts += [(cx, gy), (cx, y2 - ROW_GAP / 2), (x2, y2 - ROW_GAP / 2), (x2, y2)]
        routes[i] = pts
    return routes


# ---------------------------------------------------------------- SVG


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


SVG_STYLE = """
.op rect { fill: #ffffff; stroke: #777777; }
.io rect { fill: #3b4252; stroke: none; }
.io text { fill: #ffffff; }
.cluster { stroke: #666666; stroke-width: 1; }
.khead { font-weight: bold; }
.kcost, .nline { fill: #333333; }
.opname { font-weight: bold; }
.blocked { fill: #7a3db8; }
.decision { fill: #b03000; font-weight: bold; }
.edge { fill: none; stroke: #555555; stroke-width: 1.2; opacity: 0.8; }
.edge.laid { stroke: #7a3db8; stroke-width: 2; }
.elabel { fill: #7a3db8; font-size: 9px; }
"""


def _text(x: float, y: float, text: str, cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}"{c}>{_e(text)}</text>'


def _vertex_svg(v: Vertex, b: Box) -> list[str]:
    lines = vertex_lines(v)
    cls = "op" if v.kind == "op" else "io"
    out = [f'<g class="{cls}" id="{v.id}"><title>{_e(vertex_title(v))}</title>',
           f'<rect x="{b.x:.1f}" y="{b.y:.1f}" width="{b.w:.1f}" height="{b.h:.1f}" rx="5"/>']
    if v.kind != "op":
        out.append(_text(b.x + 6, b.y + 12, _clip(lines[0])))
        out.append(_text(b.x + 6, b.y + 25, _clip(lines[1])))
    else:
        out.append(_text(b.x + 6, b.y + 13, _clip(lines[0]), "opname"))
        out.append(_text(b.x + 6, b.y + 27, _clip(lines[1]), "nline"))
        if len(lines) > 2:
            out.append(_text(b.x + 6, b.y + 40, _clip(lines[2]), "blocked"))
    out.append("</g>")
    return out


def to_svg(viz: VizGraph, lay: Layout | None = None) -> str:
    """The drawing as a standalone SVG document: one `<g class="kernel">` per kernel (its coloured
    rectangle, header and op boxes), the inputs and outputs, then the edges on top."""
    lay = lay or layout(viz)
    colours = kernel_colours(len(viz.kernels))
    by_id = {v.id: v for v in viz.vertices}
    w, h = max(lay.width, 200.0), max(lay.height, 60.0)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" viewBox="0 0 {w:.0f} {h:.0f}" '
           'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="11">',
           f"<style>{SVG_STYLE}</style>",
           '<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" '
           'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#555555"/></marker></defs>',
           '<g class="kernels">']
    for k, colour in zip(viz.kernels, colours):
        b = lay.kernels[k.index]
        out.append(f'<g class="kernel" id="kernel-{k.index}" data-kernel="{_e(k.name)}" data-colour="{colour}">'
                   f"<title>{_e(kernel_title(k))}</title>")
        out.append(f'<rect class="cluster" x="{b.x:.1f}" y="{b.y:.1f}" width="{b.w:.1f}" height="{b.h:.1f}" '
                   f'rx="10" fill="{colour}"/>')
        room = int((b.w - 2 * PAD) / 6.7)
        out.append(_text(b.x + PAD, b.y + 14, _clip(f"#{k.index} {k.name}", room), "khead"))
        cost = f"est {_us(k.est_us)} us" + (f" \u00b7 meas {_us(k.measured_us)} us" if k.measured_us is not None else "")
        tag = (k.decision or "").split(":")[0] or ("layout" if k.layout_decision else "")
        out.append(_text(b.x + PAD, b.y + 27, _clip(cost, room - len(tag) - 1), "kcost"))
        if tag:
            out.append(f'<text x="{b.x + b.w - PAD:.1f}" y="{b.y + 27:.1f}" text-anchor="end" class="decision">'
                       f"{_e(tag)}</text>")
        for vid in k.vertices:
            out += _vertex_svg(by_id[vid], lay.vertices[vid])
        out.append("</g>")
    out.append("</g>")
    for v in viz.vertices:
        if v.kind != "op":
            out += _vertex_svg(v, lay.vertices[v.id])
    out.append('<g class="edges">')
    for i, e in enumerate(viz.edges):
        cls = "edge laid" if e.layout else "edge"
        title = f"<title>{_e(e.type)}{' ' + e.layout if e.layout else ''}</title>"
        pts = lay.routes.get(i)
        if pts is None:
            a, b = lay.vertices[e.src], lay.vertices[e.dst]
            x1, y1, x2, y2 = a.x + a.w / 2, a.y + a.h, b.x + b.w / 2, b.y
            frame = lay.kernels.get(by_id[e.dst].kernel) if by_id[e.dst].kernel is not None else None
            if frame is not None and by_id[e.src].kernel != by_id[e.dst].kernel:
                y2 = frame.y  # into a first-row op: the arrow stops at the frame, clear of the header text
            bend = max(8.0, (y2 - y1) / 2)
            d = f"M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + bend:.1f} {x2:.1f},{y2 - bend:.1f} {x2:.1f},{y2:.1f}"
            mid = ((x1 + x2) / 2, (y1 + y2) / 2)
        else:
            d = "M" + " L".join(f"{x:.1f},{y:.1f}" for x, y in pts)
            mid = pts[len(pts) // 2 - 1]
        out.append(f'<path class="{cls}" d="{d}" marker-end="url(#arrow)">{title}</path>')
        if e.layout and by_id[e.src].kernel != by_id[e.dst].kernel:
            out.append(_text(mid[0] + 4, mid[1] + 3, e.layout, "elabel"))
    out.append("</g></svg>")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- HTML

PAGE_STYLE = """
body { margin: 16px; font-family: "DejaVu Sans", Arial, sans-serif; font-size: 13px; color: #222; }
h1 { font-size: 18px; margin: 0 0 4px 0; } h2 { font-size: 15px; margin: 14px 0 6px 0; }
.meta { color: #555; margin: 2px 0; }
.wrap { display: grid; grid-template-columns: minmax(0, 1fr) 560px; gap: 18px; align-items: start; margin-top: 10px; }
.graph { overflow: auto; border: 1px solid #ddd; background: #fafafa; }
.graph svg { max-width: 100%; height: auto; display: block; }
table.kernels { border-collapse: collapse; width: 100%; font-size: 12px; }
table.kernels th, table.kernels td { border-bottom: 1px solid #ddd; padding: 3px 5px; text-align: left; vertical-align: top; }
table.kernels td.num, table.kernels th.num { text-align: right; white-space: nowrap; }
table.kernels td:first-child { white-space: nowrap; }
table.kernels tfoot td { font-weight: bold; }
.swatch { display: inline-block; width: 12px; height: 12px; border: 1px solid #666; vertical-align: middle; margin-right: 4px; }
.kname { font-family: monospace; }
.nodes { color: #666; font-size: 11px; }
.decision { color: #b03000; }
ul.notes { margin: 4px 0; padding-left: 18px; color: #444; }
.legend span { margin-right: 14px; }
"""


def _kernel_nodes(viz: VizGraph, k: Kernel) -> list[str]:
    """The ONNX nodes a kernel computes, then those folded into it."""
    by_id = {v.id: v for v in viz.vertices}
    names = [node_text(n) for vid in k.vertices for n in by_id[vid].nodes]
    names += [node_text(n) for vid in k.vertices for n in by_id[vid].folded]
    return list(dict.fromkeys(names))


def kernel_table(viz: VizGraph) -> str:
    """The `<table class="kernels">`: one row per kernel call (colour, name, ops and ONNX nodes,
    estimated and measured microseconds, the feedback channel's decision), totals at the foot."""
    by_id = {v.id: v for v in viz.vertices}
    rows = []
    for k, colour in zip(viz.kernels, kernel_colours(len(viz.kernels))):
        ops = " ".join(by_id[v].op for v in k.vertices)
        nodes = _kernel_nodes(viz, k)
        shown = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
        decision = "<br>".join(_e(d) for d in (k.decision, k.layout_decision) if d)
        rows.append(f'<tr id="row-{k.index}"><td><span class="swatch" style="background:{colour}"></span>{k.index}</td>'
                    f'<td><span class="kname">{_e(k.name)}</span>{f" (x{k.calls})" if k.calls > 1 else ""}<br>'
                    f'<span class="nodes" title="{_e(chr(10).join(nodes))}">{_e(ops)}<br>{_e(shown)}</span>'
                    f'{"<br><span class=decision>" + decision + "</span>" if decision else ""}</td>'
                    f'<td class="num">{_us(k.est_us)}<br><span class="nodes">{_e(k.est_source)}</span></td>'
                    f'<td class="num">{_us(k.measured_us)}</td></tr>')
    est = sum(k.est_us for k in viz.kernels if k.est_us is not None)
    meas = sum(k.measured_us for k in viz.kernels if k.measured_us is not None)
    foot = (f'<tfoot><tr><td></td><td>{len(viz.kernels)} kernel calls</td><td class="num">{_us(est)}</td>'
            f'<td class="num">{_us(meas) if viz.measured else "-"}</td></tr></tfoot>')
    return ('<table class="kernels"><thead><tr><th>#</th><th>kernel: graph ops, ONNX nodes, decision</th>'
            '<th class="num">est. us</th><th class="num">measured us</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody>" + foot + "</table>")


def to_html(viz: VizGraph, lay: Layout | None = None) -> str:
    """A self-contained page (no scripts, no network): the SVG drawing next to the kernel table."""
    svg = to_svg(viz, lay)
    measured = ("measured: per kernel call, the kernel function's median time per inference over its calls "
                "(runtime/profile.py, the instrumented executor)" if viz.measured else
                "measured: not run (ziggurat viz --measure)")
    notes = "".join(f"<li>{_e(n)}</li>" for n in [*viz.notes, measured])
    if viz.unplaced:
        notes += f"<li>ONNX nodes not in the compiled graph: {_e(', '.join(node_text(n) for n in viz.unplaced))}</li>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>ziggurat viz: {_e(viz.model)}</title>
<style>{PAGE_STYLE}</style></head>
<body>
<h1>{_e(viz.model)}</h1>
<p class="meta">target <b>{_e(viz.target)}</b>, O{viz.opt_level}; {len(viz.kernels)} kernels;
graph passes: {_e(", ".join(viz.passes))}</p>
<p class="meta legend"><span>boxes: graph ops (op, ONNX node, layout)</span><span>coloured frames: one kernel each
(estimated cost from the cost oracle, measured time)</span><span style="color:{BLOCKED}">purple: a layout a pass
changed</span><span class="decision">red tag: a decision of the feedback channel</span></p>
<ul class="notes">{notes}</ul>
<div class="wrap"><div class="graph">
{svg}</div>
<div class="side"><h2>Kernels</h2>
{kernel_table(viz)}
</div></div>
</body></html>
"""
