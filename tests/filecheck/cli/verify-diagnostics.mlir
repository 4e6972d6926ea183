// `--verify-diagnostics` checks `expected-error` annotations as mlir-opt does (cli/diagnostics.py): the
// error must contain the text and be reported at the annotated line (@+N, @-N, @above, @below) or, for
// an error that names no op, `@unknown`. Chunks that fail as expected print nothing; the others print
// their IR. A mismatch fails the run and names the line.
// RUN: ziggurat-opt %s --split-input-file --verify-diagnostics -p cse,fold-constants | filecheck %s
// RUN: sed -e 's/contracting dims differ/no such message/' %s > %t.mlir
// RUN: not ziggurat-opt %t.mlir --split-input-file --verify-diagnostics -p cse,fold-constants 2>&1 | filecheck %s --check-prefix=WRONG
// RUN: sed -e 's/expected-error@+1 {{contracting/expected-error@+2 {{contracting/' %s > %t2.mlir
// RUN: not ziggurat-opt %t2.mlir --split-input-file --verify-diagnostics -p cse,fold-constants 2>&1 | filecheck %s --check-prefix=LINE

// CHECK-NOT:  graph.matmul
// CHECK:      func.func @fine
// CHECK-NOT:  graph.matmul

// WRONG:      ziggurat-opt: error: --verify-diagnostics: the diagnostics differ from the expected ones:
// WRONG-NEXT: verify-diagnostics.mlir.tmp.mlir:23: expected error "no such message: 8 vs 7" at line 24 was not produced
// WRONG-NEXT: verify-diagnostics.mlir.tmp.mlir:24: unexpected error: the input IR is invalid: 'graph.matmul' op contracting dims differ: 8 vs 7 (at loc("{{.*}}":24:3))

// LINE:       verify-diagnostics.mlir.tmp2.mlir:23: expected error "contracting dims differ: 8 vs 7" at line 25 was not produced
// LINE-NEXT:  verify-diagnostics.mlir.tmp2.mlir:24: unexpected error: the input IR is invalid: 'graph.matmul' op contracting dims differ

func.func @bad_matmul(%a: tensor<4x8xf32>, %b: tensor<7x5xf32>) -> tensor<4x5xf32> {
  // expected-error@+1 {{contracting dims differ: 8 vs 7}}
  %c = graph.matmul %a, %b : tensor<4x8xf32>, tensor<7x5xf32> -> tensor<4x5xf32>
  func.return %c : tensor<4x5xf32>
}

// -----

func.func @bad_add(%a: tensor<2xf32>, %b: tensor<3xf32>) -> tensor<2xf32> {
  %c = graph.add %a, %b : tensor<2xf32>, tensor<3xf32> -> tensor<2xf32> // expected-error {{'graph.add' op operand shapes (2,) and (3,) do not broadcast}}
  func.return %c : tensor<2xf32>
}

// -----

// A pass error that names no op: fold-constants needs weight values, and none are bound.
// expected-error@unknown {{pass 'fold-constants' needs the values of the weights, but none are bound (graph.constant 'w')}}
func.func @no_weights() -> tensor<8x4xf32> {
  %w = graph.constant "w" : tensor<4x8xf32>
  %t = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  func.return %t : tensor<8x4xf32>
}

// -----

func.func @fine(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.relu %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
