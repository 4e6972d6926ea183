// ONNX node names as locations: the importer gives each graph op loc("<node name>") (`<node #i>` for a
// node without a name), fuse-ops gives a group loc(fused[...]) of its members, and every kernel function
// records the nodes it computes in `graph.source_nodes`, down to the loop level (lowering/locations.py).
// RUN: python %S/Inputs/locations_model.py %t.onnx
// RUN: ziggurat import %t.onnx --print-debuginfo 2>/dev/null > %t.mlir
// RUN: filecheck %s --check-prefix=GRAPH < %t.mlir
// RUN: ziggurat-opt %t.mlir -p fuse-ops --print-debuginfo | filecheck %s --check-prefix=FUSED
// RUN: ziggurat-opt %t.mlir -p fuse-ops,convert-graph-to-te | filecheck %s --check-prefix=TE
// RUN: ziggurat compile %t.onnx --emit loop 2>/dev/null | filecheck %s --check-prefix=LOOP

// GRAPH:      %m = graph.matmul %x, %w {{.*}} loc("mm1")
// GRAPH-NEXT: %b = graph.constant "b" {{.*}} loc("add1")
// GRAPH-NEXT: %a = graph.add %m, %b {{.*}} loc("add1")
// GRAPH-NEXT: %y = graph.relu %a {{.*}} loc("relu1")
// GRAPH-NEXT: %t = graph.tanh %x2 {{.*}} loc("tanh_a")
// GRAPH-NEXT: %u = graph.tanh %x3 {{.*}} loc("<node #4>")

// FUSED:      %y = graph.fused
// FUSED:      graph.matmul {{.*}} loc("mm1")
// FUSED:      } loc(fused["mm1", "add1", "relu1"])

// TE-LABEL:   func.func @main
// TE:         func.func @fused_matmul_add_relu_0({{.*}}) -> tensor<4x16xf32> attributes {graph.source_nodes = ["mm1", "add1", "relu1"]}
// TE:         func.func @tanh_0({{.*}}) -> tensor<4x8xf32> attributes {graph.source_nodes = ["tanh_a"]}
// TE:         func.func @tanh_1({{.*}}) -> tensor<4x8xf32> attributes {graph.source_nodes = ["<node #4>"]}

// The loop level: the matmul's weight is stored as panels (a new op, same node); the two tanh kernels
// are one after dedupe-kernels, which lists both nodes.
// LOOP-LABEL: func.func @main
// LOOP:       func.func @fused_matmul{{.*}}_add_relu_0({{.*}}) attributes {graph.source_nodes = ["mm1", "add1", "relu1"]}
// LOOP:       func.func @tanh_0({{.*}}) attributes {graph.source_nodes = ["tanh_a", "<node #4>"]}
// LOOP-NOT:   func.func @tanh_1
