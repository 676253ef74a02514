// What //tools/bench:kernels reports: its measures (each a graph, a
// variant and a target), the table it prints and its JSON line.
#ifndef KILN_TOOLS_BENCH_KERNEL_REPORT_H_
#define KILN_TOOLS_BENCH_KERNEL_REPORT_H_

#include <string>

#include "tools/bench/bench_util.h"

namespace kiln::bench {

struct Measure {
  const char* key;
  const char* graph;
  bool out;       // eager out= vs Kiln into preallocated outputs; else both allocate
  double target;  // minimum median speedup at 1 thread; 0: none
  const char* what;
  const char* eager = "eager";  // the eager process (EagerConfig::name) Kiln is held against
};

inline constexpr Measure kMeasures[] = {
    {"tail_2048", "tail", false, 4.0,
     "relu(x + 1.0), 2048x2048, both sides allocating; eager's process has glibc's default "
     "malloc thresholds, as a fresh process calling it has",
     "eager_fresh_heap"},
    {"tail_2048_adapted_heap", "tail", false, 0,
     "the same, eager's heap adapted to 16 MiB blocks (its process freed larger ones first)"},
    {"tail_2048_out", "tail", true, 1.8,
     "the same, no allocation: Run(in, out) vs add(out=) + relu_"},
    {"f_1024", "f_1024", false, 1.7, "relu(x @ x.T + 1.0), 1024x1024"},
    {"softmax_1024", "softmax", false, 1.6, "softmax(x, dim=-1), 1024x1024"},
    {"layer_norm_1024", "layer_norm", false, 1.5, "layer_norm(x, [1024], w, b), 1024x1024"},
    {"gelu", "gelu", false, 1.2, "gelu (erf), 256x1024"},
    {"mlp", "mlp", false, 1.15, "Linear 256->1024, GELU, Linear 1024->256, batch 64"},
    {"attention", "attention", false, 1.3, "softmax(q k^T / sqrt(32)) v, (2, 4, 128, 32)"},
    {"transformer_layer", "transformer_layer", false, 1.2,
     "TransformerEncoderLayer(64, 4, 128) eval, (16, 2, 64)"},
    {"mlp_train", "mlp_train", false, 1.2,
     "the mlp's training step: MSE loss and its four parameter gradients, batch 64"},
    {"resnet18_b1", "resnet18", false, 1.2, "torchvision resnet18 eval, 1x3x224x224"},
    {"resnet18_b8", "resnet18_b8", false, 1.1, "torchvision resnet18 eval, 8x3x128x128"},
};

inline constexpr char kCompiledGraph[] = "transformer_layer";  // the cold-compile figure's graph

// The table of every measure at 1 and 2 threads, then the other figures.
void PrintTable(const Samples& samples, const Fields& facts);

// One JSON object: the measures' speedups first (in kMeasures' order),
// then every other figure and the facts.
std::string JsonLine(const Samples& samples, const Fields& facts);

}  // namespace kiln::bench

#endif  // KILN_TOOLS_BENCH_KERNEL_REPORT_H_
