// Pipeline mistakes: one error naming the pass and the option, with a suggestion.
// RUN: not ziggurat-opt %s -p 'loop-default-schedule{fuse-epilogues=maybe}' 2>&1 | filecheck %s --check-prefix=BOOL
// RUN: not ziggurat-opt %s -p 'loop-default-schedule{vector-width=wide}' 2>&1 | filecheck %s --check-prefix=INT
// RUN: not ziggurat-opt %s -p 'loop-default-schedule{fuse-epilogue=true}' 2>&1 | filecheck %s --check-prefix=NAME
// RUN: not ziggurat-opt %s -p 'cse,convert-graph-to-tee' 2>&1 | filecheck %s --check-prefix=PASS
// RUN: not ziggurat-opt %s -p cse --print-after convert-graph-to-tee 2>&1 | filecheck %s --check-prefix=AFTER
// RUN: not ziggurat-opt %s -p cse --print-after convert-graph-to-te 2>&1 | filecheck %s --check-prefix=ABSENT
// RUN: ziggurat-opt %s -p cse,convert-graph-to-te --print-after cse | filecheck %s --check-prefix=PRINTED

// BOOL: ziggurat-opt: error: pass 'loop-default-schedule': option 'fuse-epilogues' expects a bool (true or false), got 'maybe'
// INT: ziggurat-opt: error: pass 'loop-default-schedule': option 'vector-width' expects an integer, got 'wide'
// NAME: ziggurat-opt: error: pass 'loop-default-schedule' has no option 'fuse-epilogue' (did you mean 'fuse-epilogues'?)
// PASS: ziggurat-opt: error: bad pass pipeline 'cse,convert-graph-to-tee': unknown pass 'convert-graph-to-tee' (did you mean 'convert-graph-to-te'
// AFTER: ziggurat-opt: error: --print-after convert-graph-to-tee: the pipeline has no pass of that name (did you mean 'convert-graph-to-te'
// ABSENT: ziggurat-opt: error: --print-after convert-graph-to-te: the pipeline has no pass of that name (a pass, but not in this pipeline); it runs cse
// PRINTED: // -----// IR after cse //----- //
// PRINTED: graph.relu
// PRINTED: graph.call_kernel
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = graph.relu %x : tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
