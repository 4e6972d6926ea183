// RUN: ziggurat-opt %s -p 'convert-loop-to-hw{vector-width=8}' --split-input-file | filecheck %s

// An elementwise loop: vector loop of step 8 and a scalar tail of 4.
func.func @scale(%x: memref<2x20xf32>, %y: memref<2x20xf32>) {
  loop.for %i = 0 to 2 serial {
    loop.for %j = 0 to 20 vectorized {
      loop.block "scale" [S %a = %i, S %b = %j] {
        %v = loop.load %x[%a, %b] : memref<2x20xf32>
        %c = arith.constant 3.000000e+00 : f32
        %m = arith.mulf %v, %c : f32
        %s = arith.addf %m, %v : f32
        loop.store %s, %y[%a, %b] : memref<2x20xf32>
      }
    }
  }
  func.return
}
// CHECK-LABEL: func.func @scale
// CHECK:         loop.for %j = 0 to 16 step 8 serial {
// CHECK-NEXT:      loop.block "scale" [S %[[A:.*]] = %i, S %[[B:.*]] = %j] {
// CHECK-NEXT:        %[[V:.*]] = hw.vload %x[%[[A]], %[[B]]] : memref<2x20xf32> -> vector<8xf32>
// CHECK-NEXT:        %[[C:.*]] = arith.constant 3.000000e+00 : f32
// CHECK-NEXT:        %[[CV:.*]] = hw.vbroadcast %[[C]] : f32 -> vector<8xf32>
// CHECK-NEXT:        %[[F:.*]] = hw.vfma %[[V]], %[[CV]], %[[V]] : vector<8xf32>
// CHECK-NEXT:        hw.vstore %[[F]], %y[%[[A]], %[[B]]] : vector<8xf32>, memref<2x20xf32>
// CHECK:         } {hw.vector_width = 8 : i64}
// CHECK-NEXT:    loop.for %j{{.*}} = 16 to 20 serial {
// CHECK:           loop.load %x

// -----

// A reduction over the vectorized loop accumulates in lanes, then vreduce.
func.func @dot(%x: memref<32xf32>, %w: memref<32xf32>, %y: memref<1xf32>) {
  loop.for %i = 0 to 1 serial {
    loop.for %k = 0 to 32 vectorized {
      loop.block "dot" [S %a = %i, R %b = %k] {
        %p = loop.load %x[%b] : memref<32xf32>
        %q = loop.load %w[%b] : memref<32xf32>
        %acc = loop.load %y[%a] : memref<1xf32>
        %m = arith.mulf %p, %q : f32
        %s = arith.addf %acc, %m : f32
        loop.store %s, %y[%a] : memref<1xf32>
      }
    }
  }
  func.return
}
// CHECK-LABEL: func.func @dot
// CHECK:         %[[BUF:.*]] = loop.alloc "local" : memref<8xf32>
// CHECK:         hw.vstore %{{.*}}, %[[BUF]]
// CHECK:         loop.for %k = 0 to 32 step 8 serial {
// CHECK:           %[[P:.*]] = hw.vload %x
// CHECK-NEXT:      %[[Q:.*]] = hw.vload %w
// CHECK-NEXT:      %[[ACC:.*]] = hw.vload %[[BUF]]
// CHECK-NEXT:      %[[F:.*]] = hw.vfma %[[P]], %[[Q]], %[[ACC]] : vector<8xf32>
// CHECK-NEXT:      hw.vstore %[[F]], %[[BUF]]
// CHECK:         %[[T:.*]] = hw.vreduce "add" %{{.*}} : vector<8xf32> -> f32
// CHECK-NEXT:    %[[OLD:.*]] = loop.load %y[%i] : memref<1xf32>
// CHECK-NEXT:    arith.addf %[[OLD]], %[[T]] : f32
// CHECK-NOT:     loop.for

// -----

// A read strided in an outer dim (a column of a row-major matrix) becomes a gather of
// flat stride 16 (the row length); a strided store has no vector form: it stays scalar
// and says why; serial loops are untouched.
func.func @column(%x: memref<16x16xf32>, %y: memref<16xf32>, %w: memref<16x16xf32>) {
  loop.for %j = 0 to 16 vectorized {
    loop.block "col" [S %b = %j] {
      %z = arith.constant 0 : index
      %v = loop.load %x[%b, %z] : memref<16x16xf32>
      loop.store %v, %y[%b] : memref<16xf32>
    }
  }
  loop.for %j2 = 0 to 16 vectorized {
    loop.block "scatter" [S %b2 = %j2] {
      %z2 = arith.constant 0 : index
      %v2 = loop.load %y[%b2] : memref<16xf32>
      loop.store %v2, %w[%b2, %z2] : memref<16x16xf32>
    }
  }
  loop.for %k = 0 to 16 serial {
    loop.block "copy" [S %c = %k] {
      %v = loop.load %y[%c] : memref<16xf32>
      loop.store %v, %y[%c] : memref<16xf32>
    }
  }
  func.return
}
// CHECK-LABEL: func.func @column
// CHECK:         loop.for %j = 0 to 16 step 8 serial {
// CHECK:           %{{.*}} = hw.vgather %x[%{{.*}}, %{{.*}}], %{{.*}} {stride = 16 : i64} : memref<16x16xf32>, vector<8xi1> -> vector<8xf32>
// CHECK:         loop.for %j2 = 0 to 16 serial {
// CHECK:         } {hw.not_vectorized = "'loop.store' is not contiguous in the loop variable (strides [1, 0])"}
// CHECK:         loop.for %k = 0 to 16 serial {
// CHECK-NOT:     hw.

// -----

// A read marked `hw.transpose_rows` (a transposed read in an unrolled strip, transpose_tiles.py)
// becomes a gather with `rows` where its last dim is whole vectors (16 = 2 x 8) and every lane
// is on; a marked read whose last dim is not (12) stays a plain gather.
func.func @rows(%x: memref<16x16xf32>, %y: memref<16x16xf32>, %x2: memref<16x12xf32>, %y2: memref<12x16xf32>) {
  loop.for %i = 0 to 8 unrolled {
    loop.for %j = 0 to 16 vectorized {
      loop.block "t" [S %a = %i, S %b = %j] {
        %v = loop.load %x[%b, %a] {hw.transpose_rows} : memref<16x16xf32>
        loop.store %v, %y[%a, %b] : memref<16x16xf32>
      }
    }
  }
  loop.for %i2 = 0 to 8 unrolled {
    loop.for %j2 = 0 to 16 vectorized {
      loop.block "t2" [S %a2 = %i2, S %b2 = %j2] {
        %v2 = loop.load %x2[%b2, %a2] {hw.transpose_rows} : memref<16x12xf32>
        loop.store %v2, %y2[%a2, %b2] : memref<12x16xf32>
      }
    }
  }
  func.return
}
// CHECK-LABEL: func.func @rows
// CHECK:         hw.vgather %x[%{{.*}}, %{{.*}}], %{{.*}} {stride = 16 : i64, rows} : memref<16x16xf32>, vector<8xi1> -> vector<8xf32>
// CHECK:         hw.vgather %x2[%{{.*}}, %{{.*}}], %{{.*}} {stride = 12 : i64} : memref<16x12xf32>, vector<8xi1> -> vector<8xf32>

// -----

// An outer vectorized loop (a reduction loop inside): vector code for whole
// vectors, then one masked vector iteration for the tail (20 = 16 + 4, width 8). The
// padded read (clamped index) becomes a masked load; the stride-2 read a gather.
// CHECK-LABEL: func.func @outer
// CHECK:         loop.for %j = 0 to 16 step 8 serial {
// CHECK:           loop.for %k = 0 to 3 serial {
// CHECK:             %{{.*}} = hw.vlanecmp "sge" %{{.*}}, %{{.*}} : vector<8xi1>
// CHECK:             %{{.*}} = hw.vmaskload %x[%{{.*}}], %{{.*}} : memref<24xf32>, vector<8xi1> -> vector<8xf32>
// CHECK:             %{{.*}} = hw.vselect %{{.*}}, %{{.*}}, %{{.*}} : vector<8xi1>, vector<8xf32>
// CHECK:             %{{.*}} = hw.vgather %w[%{{.*}}], %{{.*}} {stride = 2 : i64} : memref<48xf32>, vector<8xi1> -> vector<8xf32>
// CHECK:             hw.vstore %{{.*}}, %y[%{{.*}}] : vector<8xf32>, memref<20xf32>
// CHECK:         loop.for %{{.*}} = 16 to 24 step 8 serial {
// CHECK-NEXT:      %{{.*}} = arith.constant 20 : index
// CHECK-NEXT:      %[[TAIL:.*]] = hw.vlanecmp "slt" %{{.*}}, %{{.*}} : vector<8xi1>
// CHECK:           hw.vmaskstore %{{.*}}, %y[%{{.*}}], %[[TAIL]] : vector<8xf32>, memref<20xf32>, vector<8xi1>
// CHECK-NOT:     to 20 serial
func.func @outer(%x: memref<24xf32>, %w: memref<48xf32>, %y: memref<20xf32>) {
  loop.for %j = 0 to 20 vectorized {
    loop.for %k = 0 to 3 serial {
      loop.block "conv" [S %vj = %j, R %vk = %k] {
        %m1 = arith.constant -1 : index
        %s = arith.addi %vj, %vk : index
        %i = arith.addi %s, %m1 : index
        %zero = arith.constant 0 : index
        %ok = arith.cmpi sge, %i, %zero : index
        %safe = arith.select %ok, %i, %zero : index
        %v = loop.load %x[%safe] : memref<24xf32>
        %pad = arith.constant 0.000000e+00 : f32
        %xv = arith.select %ok, %v, %pad : f32
        %two = arith.constant 2 : index
        %j2 = arith.muli %vj, %two : index
        %wv = loop.load %w[%j2] : memref<48xf32>
        %p = arith.mulf %xv, %wv : f32
        %o = loop.load %y[%vj] : memref<20xf32>
        %r = arith.addf %o, %p : f32
        loop.store %r, %y[%vj] : memref<20xf32>
      }
    }
  }
  func.return
}

// -----

// Negative for the outer loop: its accesses are strided along %i (the read could be a
// gather, the store cannot), so it stays serial with the reason; the vectorized loop
// inside it is still vectorized.
// CHECK-LABEL: func.func @nested
// CHECK:         loop.for %i = 0 to 4 serial {
// CHECK-NEXT:      loop.for %j = 0 to 32 step 8 serial {
// CHECK:           } {hw.vector_width = 8 : i64}
// CHECK-NEXT:    } {hw.not_vectorized = "'loop.store' is not contiguous in the loop variable (strides [1, 0])"}
func.func @nested(%x: memref<4x32xf32>, %y: memref<4x32xf32>) {
  loop.for %i = 0 to 4 vectorized {
    loop.for %j = 0 to 32 vectorized {
      loop.block "b" [S %a = %i, S %v = %j] {
        %e = loop.load %x[%a, %v] : memref<4x32xf32>
        loop.store %e, %y[%a, %v] : memref<4x32xf32>
      }
    }
  }
  func.return
}
