// RUN: ziggurat-opt %s -p loop-simplify-index | filecheck %s

// A reshape [4, 32] -> [128] -> [4, 32]: flatten, then unflatten by div/rem.
// With %a in [0, 3] and %b in [0, 31], (32 a + b) / 32 = a and (32 a + b) % 32 = b.
// CHECK-LABEL: func.func @reshape_roundtrip
// CHECK:         loop.block "reshape" [S %a = %i, S %b = %j] {
// CHECK-NEXT:      %v = loop.load %x[%a, %b] : memref<4x32xf32>
// CHECK-NEXT:      loop.store %v, %y[%a, %b] : memref<4x32xf32>
// CHECK-NEXT:    }
func.func @reshape_roundtrip(%x: memref<4x32xf32>, %y: memref<4x32xf32>) {
  loop.for %i = 0 to 4 serial {
    loop.for %j = 0 to 32 serial {
      loop.block "reshape" [S %a = %i, S %b = %j] {
        %c32 = arith.constant 32 : index
        %a32 = arith.muli %a, %c32 : index
        %flat = arith.addi %a32, %b : index
        %q = arith.divui %flat, %c32 : index
        %r = arith.remui %flat, %c32 : index
        %v = loop.load %x[%q, %r] : memref<4x32xf32>
        loop.store %v, %y[%a, %b] : memref<4x32xf32>
      }
    }
  }
  func.return
}

// A slice offset (+ 64) inside the remainder: (32 a + b + 64) % 128 stays a sum
// (32 a + b + 64 <= 159 is not below 128), but its division by 32 is a + 2.
// CHECK-LABEL: func.func @offset
// CHECK:         %[[TWO:.*]] = arith.constant 2 : index
// CHECK-NEXT:    %[[Q:.*]] = arith.addi %a, %[[TWO]] : index
// CHECK-NEXT:    %[[R:.*]] = arith.remui %off, %c128 : index
// CHECK-NEXT:    loop.load %x[%[[Q]], %[[R]]] : memref<8x128xf32>
func.func @offset(%x: memref<8x128xf32>, %y: memref<4x32xf32>) {
  loop.for %i = 0 to 4 serial {
    loop.for %j = 0 to 32 serial {
      loop.block "slice" [S %a = %i, S %b = %j] {
        %c32 = arith.constant 32 : index
        %c64 = arith.constant 64 : index
        %c128 = arith.constant 128 : index
        %a32 = arith.muli %a, %c32 : index
        %flat = arith.addi %a32, %b : index
        %off = arith.addi %flat, %c64 : index
        %q = arith.divui %off, %c32 : index
        %r = arith.remui %off, %c128 : index
        %v = loop.load %x[%q, %r] : memref<8x128xf32>
        loop.store %v, %y[%a, %b] : memref<4x32xf32>
      }
    }
  }
  func.return
}

// Negative: %b spans [0, 127], so %b % 32 and %b / 32 depend on it and stay.
// CHECK-LABEL: func.func @transpose_reshape
// CHECK:         arith.remui %b, %c32
// CHECK-NEXT:    arith.divui %b, %c32
func.func @transpose_reshape(%x: memref<4x32xf32>, %y: memref<128xf32>) {
  loop.for %j = 0 to 128 serial {
    loop.block "reshape" [S %b = %j] {
      %c32 = arith.constant 32 : index
      %r = arith.remui %b, %c32 : index
      %q = arith.divui %b, %c32 : index
      %v = loop.load %x[%q, %r] : memref<4x32xf32>
      loop.store %v, %y[%b] : memref<128xf32>
    }
  }
  func.return
}

// A padded read of an inlined transpose (te_inline.py): the clamp of %c (always in [0, 31]) goes,
// and with it its test in the pad condition; the clamp of the halo index %w1 = %w - 1 stays, and its
// range [0, 7] (from the test) lets the flat index split: %flat / 8 is %c, %flat % 8 is the clamp.
// CHECK-LABEL: func.func @clamped_transpose
// CHECK:         %[[WC:.*]] = arith.select %[[OKW:.*]], %w1, %{{.*}} : index
// CHECK:         %[[COND:.*]] = arith.andi %[[OKN:.*]], %[[OKW]] : i1
// CHECK:         %[[V:.*]] = loop.load %x[%[[WC]], %c] : memref<8x32xf32>
// CHECK:         arith.select %[[COND]], %[[V]], %{{.*}} : f32
// CHECK-NOT:     arith.divui
func.func @clamped_transpose(%x: memref<8x32xf32>, %y: memref<2x32x10xf32>) {
  loop.for %i = 0 to 2 serial {
    loop.for %j = 0 to 32 serial {
      loop.for %k = 0 to 10 serial {
        loop.block "layout_transform" [S %n = %i, S %c = %j, S %w = %k] {
          %zero = arith.constant 0 : index
          %one = arith.constant 1 : index
          %c8 = arith.constant 8 : index
          %c32 = arith.constant 32 : index
          %w1 = arith.subi %w, %one : index
          %c_lo = arith.cmpi sge, %c, %zero : index
          %c_hi = arith.cmpi slt, %c, %c32 : index
          %okc = arith.andi %c_lo, %c_hi : i1
          %cc = arith.select %okc, %c, %zero : index
          %n_lo = arith.cmpi sge, %n, %zero : index
          %n_hi = arith.cmpi slt, %n, %one : index
          %okn = arith.andi %n_lo, %n_hi : i1
          %w_lo = arith.cmpi sge, %w1, %zero : index
          %w_hi = arith.cmpi slt, %w1, %c8 : index
          %okw = arith.andi %w_lo, %w_hi : i1
          %wc = arith.select %okw, %w1, %zero : index
          %okcn = arith.andi %okc, %okn : i1
          %ok = arith.andi %okcn, %okw : i1
          %c8b = arith.muli %cc, %c8 : index
          %flat = arith.addi %c8b, %wc : index
          %q = arith.divui %flat, %c8 : index
          %r = arith.remui %flat, %c8 : index
          %v = loop.load %x[%r, %q] : memref<8x32xf32>
          %f0 = arith.constant 0.000000e+00 : f32
          %p = arith.select %ok, %v, %f0 : f32
          loop.store %p, %y[%n, %c, %w] : memref<2x32x10xf32>
        }
      }
    }
  }
  func.return
}

// A value already in [0, c): (16 a + b - 768) with %a in [48, 63] and %b in [0, 15] spans
// [0, 255], so its remainder by 256 is itself and its quotient 0 (the last range of a
// concatenation along channel blocks, schedule/split_ranges.py).
// CHECK-LABEL: func.func @in_range
// CHECK-NOT:     arith.remui
// CHECK-NOT:     arith.divui
// CHECK:         loop.load %x[%{{.*}}, %[[X:.*]]] : memref<1x256xf32>
func.func @in_range(%x: memref<1x256xf32>, %y: memref<64x16xf32>) {
  loop.for %i = 48 to 64 serial {
    loop.for %j = 0 to 16 serial {
      loop.block "concat" [S %a = %i, S %b = %j] {
        %c16 = arith.constant 16 : index
        %c768 = arith.constant 768 : index
        %c256 = arith.constant 256 : index
        %a16 = arith.muli %a, %c16 : index
        %s = arith.addi %a16, %b : index
        %x0 = arith.subi %s, %c768 : index
        %r = arith.remui %x0, %c256 : index
        %q = arith.divui %x0, %c256 : index
        %v = loop.load %x[%q, %r] : memref<1x256xf32>
        loop.store %v, %y[%a, %b] : memref<64x16xf32>
      }
    }
  }
  func.return
}

// Over symbols: a [batch, sequence, 256] -> [batch, 4, sequence, 64] transpose's flat index
// (b * (256 * %s) + t * 256 + h * 64 + d) splits by 256, then by the symbol %s (t runs below %s):
// the read is in[b, t, 64 h + d], no division left.
// CHECK-LABEL: func.func @symbolic_transpose
// CHECK:         loop.block "transpose" [S %b = %i0, S %h = %i1, S %t = %i2, S %d = %i3] {
// CHECK-NOT:       arith.divui
// CHECK-NOT:       arith.remui
// CHECK:           %[[V:.*]] = loop.load %x[%b, %t, %{{.*}}] : memref<?x?x256xf32, #sym.dims<"batch", "seq">>
// CHECK-NEXT:      loop.store %[[V]], %y[%b, %h, %t, %d]
func.func @symbolic_transpose(%x: memref<?x?x256xf32, #sym.dims<"batch", "seq">>, %y: memref<?x4x?x64xf32, #sym.dims<"batch", "seq">>, %batch: index, %seq: index) attributes {sym.symbols = ["batch", "seq"]} {
  %c256 = arith.constant 256 : index
  %n = arith.muli %seq, %c256 : index
  loop.for %i0 = 0 to %batch serial {
    loop.for %i1 = 0 to 4 serial {
      loop.for %i2 = 0 to %seq serial {
        loop.for %i3 = 0 to 64 serial {
          loop.block "transpose" [S %b = %i0, S %h = %i1, S %t = %i2, S %d = %i3] {
            %bn = arith.muli %b, %n : index
            %c256b = arith.constant 256 : index
            %t256 = arith.muli %t, %c256b : index
            %s0 = arith.addi %bn, %t256 : index
            %c64 = arith.constant 64 : index
            %h64 = arith.muli %h, %c64 : index
            %s1 = arith.addi %s0, %h64 : index
            %flat = arith.addi %s1, %d : index
            %r256 = arith.remui %flat, %c256b : index
            %q256 = arith.divui %flat, %c256b : index
            %rs = arith.remui %q256, %seq : index
            %qs = arith.divui %q256, %seq : index
            %v = loop.load %x[%qs, %rs, %r256] : memref<?x?x256xf32, #sym.dims<"batch", "seq">>
            loop.store %v, %y[%b, %h, %t, %d] : memref<?x4x?x64xf32, #sym.dims<"batch", "seq">>
          }
        }
      }
    }
  }
  func.return
}

// A halo's offset: %t binds 1 to 1001 (a padded row read one step back), so (1000 c + t - 1) splits
// as 1000 c + (t - 1), with t - 1 in [0, 999]: the constant -1 stays with the remainder rather than
// being split off alone (-1 = 1000 * -1 + 999 would leave t + 999 out of [0, 1000)).
// CHECK-LABEL: func.func @halo_offset
// CHECK:         %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %r = arith.subi %t, %[[ONE]] : index
// CHECK-NEXT:    %v = loop.load %x[%r, %c] : memref<1000x256xf32>
func.func @halo_offset(%x: memref<1000x256xf32>, %y: memref<256x1002xf32>) {
  loop.for %i = 0 to 256 serial {
    loop.for %j = 1 to 1001 serial {
      loop.block "transpose" [S %c = %i, S %t = %j] {
        %c1000 = arith.constant 1000 : index
        %cm1 = arith.constant -1 : index
        %c1000c = arith.muli %c, %c1000 : index
        %tm1 = arith.addi %t, %cm1 : index
        %flat = arith.addi %c1000c, %tm1 : index
        %r = arith.remui %flat, %c1000 : index
        %q = arith.divui %flat, %c1000 : index
        %v = loop.load %x[%r, %q] : memref<1000x256xf32>
        loop.store %v, %y[%c, %t] : memref<256x1002xf32>
      }
    }
  }
  func.return
}
