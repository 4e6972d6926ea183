// RUN: ziggurat-opt %s -p 'convert-graph-to-te' | filecheck %s --check-prefix=TE
// RUN: ziggurat-opt %s -p 'convert-graph-to-te,convert-te-to-loop,loop-default-schedule{int8-dot=vnni}' | filecheck %s --check-prefix=VNNI
// RUN: ziggurat-opt %s -p 'convert-graph-to-te,convert-te-to-loop,loop-default-schedule{int8-dot=avx2}' | filecheck %s --check-prefix=AVX2
// RUN: ziggurat-opt %s -p 'convert-graph-to-te,convert-te-to-loop,loop-default-schedule{int8-dot=none}' | filecheck %s --check-prefix=NONE
// RUN: ziggurat-opt %s -p 'convert-graph-to-te,convert-te-to-loop,loop-default-schedule{int8-dot=amx},loop-vectorize-innermost' | filecheck %s --check-prefix=AMX

// graph.qgemm: k split in (k/4, k%4), zero-extended a, sign-extended packed b; {pairs16} tags it qgemm_s16.
// TE:      te.reduce "qgemm" add init 0 : i32 ({{.*}}) reduce ({{.*}} : 16, {{.*}} : 4) : tensor<8x32xi32>
// TE:        arith.extui {{.*}} : i8 to i32
// TE-NEXT:   arith.extsi {{.*}} : i8 to i32
// TE-NEXT:   arith.muli
// TE:      te.reduce "qgemm_s16" add init 0 : i32
// A pairs16 GEMM of signed activations and unsigned (shifted) weights: sign-extended a, zero-extended b, qgemm_x16.
// TE:      te.reduce "qgemm_x16" add init 0 : i32
// TE:        arith.extsi {{.*}} : i8 to i32
// TE-NEXT:   arith.extui {{.*}} : i8 to i32

// The default schedule: an 8x32 register block (8 rows unrolled, 2 vectors unrolled) per k quad, one vpdpbusd each.
// VNNI-LABEL: func.func @qgemm_0
// VNNI:      loop.for %{{.*}} = 0 to 16 serial {
// VNNI-NEXT:   loop.for %{{.*}} = 0 to 8 unrolled {
// VNNI-NEXT:     loop.for %{{.*}} = 0 to 2 unrolled {
// VNNI:            x86vec.bcast_group {{.*}} : vector<4xi8> -> vector<64xi8>
// VNNI:            x86vec.dpbusd {{.*}} : vector<16xi32>, vector<64xi8>, vector<64xi8>
// VNNI-NOT:  loop.block "qgemm"
// VNNI-LABEL: func.func @qgemm_1
// VNNI:            x86vec.dpbusd {{.*}} : vector<16xi32>, vector<64xi8>, vector<64xi8>

// AVX2 (16 vector registers): only the pairs16 GEMM (vpmaddubsw would saturate the other's int16 pairs),
// in 4x16 blocks (4 rows, 2 vectors of 8 lanes), vpmaddubsw + vpmaddwd each.
// AVX2-LABEL: func.func @qgemm_0
// AVX2:      loop.block "qgemm"
// AVX2-NOT:  x86vec.maddubs_dot
// AVX2-LABEL: func.func @qgemm_1
// AVX2:      loop.for %{{.*}} = 0 to 16 serial {
// AVX2-NEXT:   loop.for %{{.*}} = 0 to 4 unrolled {
// AVX2-NEXT:     loop.for %{{.*}} = 0 to 2 unrolled {
// AVX2:            x86vec.bcast_group {{.*}} : vector<4xi8> -> vector<32xi8>
// AVX2:            x86vec.maddubs_dot {{.*}} : vector<8xi32>, vector<32xi8>, vector<32xi8>
// AVX2-NOT:  loop.block "qgemm_s16"
// The swapped GEMM (-int8=saturate): the same blocks on x86_avx2_s8u8_8x4, the packed weight as vpmaddubsw's unsigned
// operand (first) and the broadcast activations as its signed one.
// AVX2-LABEL: func.func @qgemm_2
// AVX2:            %[[G:.*]] = x86vec.bcast_group {{.*}} : vector<4xi8> -> vector<32xi8>
// AVX2:            %[[B:.*]] = hw.vload {{.*}} : memref<16x128xi8> -> vector<32xi8>
// AVX2:            x86vec.maddubs_dot %{{.*}}, %[[B]], %[[G]] : vector<8xi32>, vector<32xi8>, vector<32xi8>
// AVX2-NOT:  loop.block "qgemm_x16"

// int8-dot=none must not fire: the scalar nests stay.
// NONE:      loop.block "qgemm"
// NONE-NOT:  x86vec.dpbusd
// NONE:      loop.block "qgemm_s16"
// NONE:      loop.block "qgemm_x16"

// AMX (lowering/qgemm_amx.py): per 16-column panel (N = 32 is 2 tiles, so one panel of 2), one tile
// configuration, 8 rows (M < 16) in tiles of 8 rows, K = 64 in one 64-byte step (no k loop); the init nest is
// gone (the C tiles start at zero) and loop-vectorize-innermost leaves the block-less loops alone.
// AMX-LABEL: func.func @qgemm_0
// AMX-NOT:   loop.block
// AMX:       loop.for %jo = 0 to 1 serial {
// AMX-NOT:     amx.tile_config array<i64: 16
// AMX:         amx.tile_config array<i64: 8, 64, 8, 64, 8, 64, 16, 64, 16, 64, 0, 0, 0, 0, 0, 0>
// AMX:         amx.tile_zero 0
// AMX-NEXT:    amx.tile_zero 1
// AMX:         amx.tile_load 2, %{{.*}}[%{{.*}}, %{{.*}}] : memref<8x64xi8>
// AMX:         amx.tile_load 3, %{{.*}}[%{{.*}}, %{{.*}}] : memref<16x128xi8>
// AMX:         amx.tile_load 4, %{{.*}}[%{{.*}}, %{{.*}}] : memref<16x128xi8>
// AMX-NEXT:    amx.tdp "busd" 0, 2, 3
// AMX-NEXT:    amx.tdp "busd" 1, 2, 4
// AMX:         amx.tile_store 0, %{{.*}}[%{{.*}}, %{{.*}}] : memref<8x32xi32>
// AMX:         amx.tile_store 1, %{{.*}}[%{{.*}}, %{{.*}}] : memref<8x32xi32>
// AMX-NEXT:    amx.tile_release
// AMX-NOT:   vectorized
// AMX-LABEL: func.func @qgemm_1
// AMX:         amx.tdp "busd"

func.func @main(%a: tensor<8x64xui8>, %b: tensor<16x128xi8>, %as: tensor<8x64xi8>, %bu: tensor<16x128xui8>) -> (tensor<8x32xi32>, tensor<8x32xi32>, tensor<8x32xi32>) {
  %c = graph.qgemm %a, %b : tensor<8x64xui8>, tensor<16x128xi8> -> tensor<8x32xi32>
  %d = graph.qgemm %a, %b {pairs16} : tensor<8x64xui8>, tensor<16x128xi8> -> tensor<8x32xi32>
  %s = graph.qgemm %as, %bu {pairs16} : tensor<8x64xi8>, tensor<16x128xui8> -> tensor<8x32xi32>
  func.return %c, %d, %s : tensor<8x32xi32>, tensor<8x32xi32>, tensor<8x32xi32>
}
