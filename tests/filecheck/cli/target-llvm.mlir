// `-t llvm` is ziggurat's LLVM target: it lowers IR of any level the rest of the way (here graph
// level, and the hw level the default pipeline leaves) and prints the LLVM IR of the model.
// RUN: ziggurat-opt %s -t llvm | filecheck %s
// RUN: ziggurat-opt %s -p convert-graph-to-te,convert-te-to-loop -t llvm | filecheck %s
// RUN: ziggurat-opt %s -t 'llvm{target="llvm -mcpu=skylake-avx512"}' | filecheck %s --check-prefix=AVX512
// RUN: ziggurat-opt %s -t 'llvm{target="llvm -mcpu=haswell" opt-level=2}' | filecheck %s --check-prefix=AVX2

// CHECK: define {{.*}}void @"main"(
// CHECK: define {{.*}}void @"relu_0"(
// AVX512: load <16 x float>
// AVX2-NOT: <16 x float>
// AVX2: load <8 x float>
func.func @main(%x: tensor<4x64xf32>) -> tensor<4x64xf32> attributes {graph.input_names = ["x"], graph.output_names = ["y"]} {
  %y = graph.relu %x : tensor<4x64xf32>
  func.return %y : tensor<4x64xf32>
}
