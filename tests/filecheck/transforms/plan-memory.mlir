// RUN: ziggurat-opt %s -p plan-memory --split-input-file | filecheck %s

// A chain: %c reuses %a's memory once %a is dead; the arena holds two slots
// (512 bytes) instead of three (768).
// CHECK:      builtin.module attributes {plan.arena_bytes = 512 : i64, plan.unplanned_bytes = 768 : i64}
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %a = loop.alloc "global" {arena_offset = 0 : i64} : memref<1x64xf32>
// CHECK-NEXT: func.call @k(%x, %a)
// CHECK-NEXT: %b = loop.alloc "global" {arena_offset = 256 : i64} : memref<1x64xf32>
// CHECK-NEXT: func.call @k(%a, %b)
// CHECK-NEXT: %c = loop.alloc "global" {arena_offset = 0 : i64} : memref<1x64xf32>
// CHECK-NEXT: func.call @k(%b, %c)
// CHECK-NEXT: func.call @k(%c, %y)
func.func @main(%x: memref<1x64xf32>, %y: memref<1x64xf32>) {
  %a = loop.alloc "global" : memref<1x64xf32>
  func.call @k(%x, %a) : (memref<1x64xf32>, memref<1x64xf32>) -> ()
  %b = loop.alloc "global" : memref<1x64xf32>
  func.call @k(%a, %b) : (memref<1x64xf32>, memref<1x64xf32>) -> ()
  %c = loop.alloc "global" : memref<1x64xf32>
  func.call @k(%b, %c) : (memref<1x64xf32>, memref<1x64xf32>) -> ()
  func.call @k(%c, %y) : (memref<1x64xf32>, memref<1x64xf32>) -> ()
  func.return
}
func.func private @k(memref<1x64xf32>, memref<1x64xf32>)

// -----

// Negative: every buffer is live until the last call, so nothing is shared;
// the larger buffer goes first. Local allocs and other functions are untouched.
// CHECK:      builtin.module attributes {plan.arena_bytes = 768 : i64, plan.unplanned_bytes = 768 : i64}
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %a = loop.alloc "global" {arena_offset = 512 : i64} : memref<1x64xf32>
// CHECK-NEXT: %b = loop.alloc "global" {arena_offset = 0 : i64} : memref<1x128xf32>
// CHECK-LABEL: func.func @kernel
// CHECK-NEXT: %t = loop.alloc "local" : memref<4xf32>
func.func @main(%x: memref<1x64xf32>, %y: memref<1x64xf32>) {
  %a = loop.alloc "global" : memref<1x64xf32>
  %b = loop.alloc "global" : memref<1x128xf32>
  func.call @k3(%x, %a, %b) : (memref<1x64xf32>, memref<1x64xf32>, memref<1x128xf32>) -> ()
  func.call @k3(%a, %y, %b) : (memref<1x64xf32>, memref<1x64xf32>, memref<1x128xf32>) -> ()
  func.return
}
func.func @kernel() {
  %t = loop.alloc "local" : memref<4xf32>
  func.return
}
func.func private @k3(memref<1x64xf32>, memref<1x64xf32>, memref<1x128xf32>)

// -----

// In place: @relu reads its input only at the element it writes, and %a dies
// there, so %b takes %a's memory. @shift reads a neighbour (negative case):
// %c gets its own slot even though %b dies at that call.
// CHECK:      builtin.module attributes {plan.arena_bytes = 128 : i64, plan.unplanned_bytes = 192 : i64}
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %a = loop.alloc "global" {arena_offset = 0 : i64} : memref<1x8xf32>
// CHECK:      %b = loop.alloc "global" {arena_offset = 0 : i64} : memref<1x8xf32>
// CHECK:      %c = loop.alloc "global" {arena_offset = 64 : i64} : memref<1x8xf32>
func.func @main(%x: memref<1x8xf32>, %y: memref<1x8xf32>) {
  %a = loop.alloc "global" : memref<1x8xf32>
  func.call @relu(%x, %a) : (memref<1x8xf32>, memref<1x8xf32>) -> ()
  %b = loop.alloc "global" : memref<1x8xf32>
  func.call @relu(%a, %b) : (memref<1x8xf32>, memref<1x8xf32>) -> ()
  %c = loop.alloc "global" : memref<1x8xf32>
  func.call @shift(%b, %c) : (memref<1x8xf32>, memref<1x8xf32>) -> ()
  func.call @relu(%c, %y) : (memref<1x8xf32>, memref<1x8xf32>) -> ()
  func.return
}
func.func @relu(%in0: memref<1x8xf32>, %out0: memref<1x8xf32>) {
  loop.for %i0 = 0 to 1 serial {
    loop.for %i1 = 0 to 8 serial {
      loop.block "relu" [S %0 = %i0, S %1 = %i1] {
        %z = arith.constant 0 : index
        %2 = loop.load %in0[%z, %1] : memref<1x8xf32>
        %3 = arith.constant 0.000000e+00 : f32
        %4 = arith.maximumf %2, %3 : f32
        loop.store %4, %out0[%0, %1] : memref<1x8xf32>
      }
    }
  }
  func.return
}
func.func @shift(%in0: memref<1x8xf32>, %out0: memref<1x8xf32>) {
  loop.for %i0 = 0 to 1 serial {
    loop.for %i1 = 0 to 7 serial {
      loop.block "shift" [S %0 = %i0, S %1 = %i1] {
        %c1 = arith.constant 1 : index
        %j = arith.addi %1, %c1 : index
        %2 = loop.load %in0[%0, %j] : memref<1x8xf32>
        loop.store %2, %out0[%0, %1] : memref<1x8xf32>
      }
    }
  }
  func.return
}
