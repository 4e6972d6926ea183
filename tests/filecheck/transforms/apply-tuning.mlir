// RUN: echo '{"costs":[1e-06],"error":"ok","finished":0.0,"message":"","started":0.0,"target":"llvm -num-cores=1","trace":[{"block":"matmul","factor":16,"loop":1,"prim":"split"}],"v":1,"versions":{},"workload":{"hash":"49f89a69e5f5458a","name":"tuned_mm"}}' > %t.jsonl
// RUN: ziggurat-opt %s -p 'apply-tuning{database="%t.jsonl" target="llvm -num-cores=1"},loop-default-schedule{vector-width=16},loop-parallelize-outer{min-work=1},loop-vectorize-innermost{min-extent=8}' | filecheck %s
// RUN: ziggurat-opt %s -p 'apply-tuning{database="%t.jsonl" target="llvm -num-cores=4"}' 2> %t.err | filecheck %s --check-prefix=OTHER
// RUN: filecheck %s --check-prefix=WARN < %t.err

// The database holds one record, of @tuned_mm (its workload key: the structural
// hash of the kernel's text, the symbol name left out) on `llvm -num-cores=1`,
// whose trace splits the column loop by 16. apply-tuning replays it and marks
// the kernel `loop.scheduled`; the default schedule passes then leave it alone,
// even with options that would parallelize its row loop and vectorize its
// 8-trip reduction loop.
// CHECK-LABEL: func.func @tuned_mm
// CHECK-SAME:      attributes {loop.scheduled} {
// CHECK-NEXT:    loop.for %i0 = 0 to 16 serial {
// CHECK-NEXT:      loop.for %i1_o = 0 to 2 serial {
// CHECK-NEXT:        loop.for %i1_i = 0 to 16 serial {
// CHECK:               loop.block "matmul_init"
// CHECK:               loop.for %r0 = 0 to 8 serial {
// CHECK-NOT:       loop.alloc
// CHECK:           func.return

// Negative: no record of @untuned_mm (another shape, another key). It is not
// marked and gets the default schedule: a register-blocked, vectorized and
// parallel nest.
// CHECK-LABEL: func.func @untuned_mm
// CHECK-NOT:       loop.scheduled
// CHECK-NEXT:    loop.for %i0 = 0 to 16 step 8 parallel {
// CHECK-NEXT:      %{{.*}} = loop.alloc "local" : memref<8x48xf32>
// CHECK-NEXT:      loop.for %i1p = 0 to 2 step 2 serial {
// CHECK-NEXT:        loop.for %i1l = 0 to 16 vectorized {

// Negative: records only for another target replay nothing, with a warning.
// OTHER-LABEL: func.func @tuned_mm
// OTHER-SAME:      (%a: memref<16x8xf32>, %b: memref<8x32xf32>, %c: memref<16x32xf32>) {
// OTHER-NEXT:    loop.for %i0 = 0 to 16 serial {
// OTHER-NEXT:      loop.for %i1 = 0 to 32 serial {
// OTHER-NOT:   loop.scheduled
// WARN: UserWarning: the tuning database holds records of some kernels for target(s) ['llvm -num-cores=1'] but not for 'llvm -num-cores=4'

func.func @tuned_mm(%a: memref<16x8xf32>, %b: memref<8x32xf32>, %c: memref<16x32xf32>) {
  loop.for %i0 = 0 to 16 serial {
    loop.for %i1 = 0 to 32 serial {
      loop.block "matmul_init" [S %0 = %i0, S %1 = %i1] {
        %z = arith.constant 0.000000e+00 : f32
        loop.store %z, %c[%0, %1] : memref<16x32xf32>
      }
      loop.for %r0 = 0 to 8 serial {
        loop.block "matmul" [S %2 = %i0, S %3 = %i1, R %4 = %r0] {
          %x = loop.load %a[%2, %4] : memref<16x8xf32>
          %y = loop.load %b[%4, %3] : memref<8x32xf32>
          %p = arith.mulf %x, %y : f32
          %o = loop.load %c[%2, %3] : memref<16x32xf32>
          %s = arith.addf %o, %p : f32
          loop.store %s, %c[%2, %3] : memref<16x32xf32>
        }
      }
    }
  }
  func.return
}
func.func @untuned_mm(%a: memref<16x16xf32>, %b: memref<16x32xf32>, %c: memref<16x32xf32>) {
  loop.for %i0 = 0 to 16 serial {
    loop.for %i1 = 0 to 32 serial {
      loop.block "matmul_init" [S %0 = %i0, S %1 = %i1] {
        %z = arith.constant 0.000000e+00 : f32
        loop.store %z, %c[%0, %1] : memref<16x32xf32>
      }
      loop.for %r0 = 0 to 16 serial {
        loop.block "matmul" [S %2 = %i0, S %3 = %i1, R %4 = %r0] {
          %x = loop.load %a[%2, %4] : memref<16x16xf32>
          %y = loop.load %b[%4, %3] : memref<16x32xf32>
          %p = arith.mulf %x, %y : f32
          %o = loop.load %c[%2, %3] : memref<16x32xf32>
          %s = arith.addf %o, %p : f32
          loop.store %s, %c[%2, %3] : memref<16x32xf32>
        }
      }
    }
  }
  func.return
}
