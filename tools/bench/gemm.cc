// //tools/bench:gemm — the measurements behind Kiln's GEMM choices
// (docs/BENCHMARKS.md, "GEMM choices"): for the shapes the public workloads
// multiply and a ladder of small ones, the runtime's gemm_f32 (as artifacts
// call it) pinned to OpenBLAS and to oneDNN, each with B row-major and with
// B read transposed (x @ W.T), against a generated-style loop (tools/bench/
// gemm_loop.c); and a pair of linear layers (the feed-forward block) as
// written, G = x · W1ᵀ then G · W2ᵀ, against the same in transposed space,
// Gᵀ = W1 · xᵀ then W2 · Gᵀ (codegen/passes/transpose_linear.h).
// Interleaved per round, min/median/max over rounds.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/runtime/runtime.h"
#include "tools/bench/accuracy.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/gemm_loop.h"

ABSL_FLAG(bool, json, false, "Also print every figure as one JSON object on the last line.");
ABSL_FLAG(int, repetitions, 10, "Rounds; each times every variant of every shape once.");
ABSL_FLAG(double, batch_ms, 10, "Target length of one batch of calls.");
ABSL_FLAG(int, threads, 1, "The runtime's pool size (large GEMMs are split across it).");

namespace kiln::bench {
namespace {

struct Shape {
  int64_t m, n, k;
  const char* where;
};
constexpr Shape kShapes[] = {
    {8, 8, 8, "small ladder"},        {16, 16, 16, "small ladder"},
    {32, 64, 32, "small ladder"},     {64, 64, 64, "f (examples/f.json)"},
    {128, 128, 32, "attention q.kT"}, {128, 32, 128, "attention p.v"},
    {64, 1024, 256, "mlp, Linear 1"}, {64, 256, 1024, "mlp, Linear 2"},
};

// A pair of linear layers: x (batch x in) -> hidden -> in.
struct PairShape {
  int64_t batch, in, hidden;
};
constexpr PairShape kPairs[] = {
    {16, 64, 128},   {32, 64, 128},   {64, 64, 128},    {128, 64, 128},   {256, 64, 128},
    {16, 256, 1024}, {64, 256, 1024}, {256, 256, 1024}, {512, 256, 1024},
};

// C = A . B in float64 (row-major, no strides).
std::vector<double> Product64(const std::vector<float>& a, const std::vector<float>& b, int64_t m,
                              int64_t n, int64_t k) {
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += double(a[i * k + p]) * b[p * n + j];
    }
  }
  return c;
}

// W (rows x cols) transposed, as a cols x rows row-major matrix.
std::vector<float> Transposed(const std::vector<float>& w, int64_t rows, int64_t cols) {
  std::vector<float> t(w.size());
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = w[i * cols + j];
  }
  return t;
}

int Main() {
  Runtime runtime(absl::GetFlag(FLAGS_threads));  // its own choice per shape
  Runtime openblas(absl::GetFlag(FLAGS_threads), GemmLibraries::kOpenBlas);
  Runtime onednn(absl::GetFlag(FLAGS_threads), GemmLibraries::kOneDnn);
  const kiln_runtime* rt = runtime.table();
  Samples samples;
  std::vector<std::string> keys;
  // Each variant's result, checked in the warm-up round against float64
  // (accuracy.h; K: the inner dim, both inner dims for a pair): a wrong one
  // gets no figures, and the run exits 1.
  std::vector<std::string> accuracy_keys, wrong;
  auto check = [&](const std::string& name, const float* got, const std::vector<double>& want,
                   int64_t reduction_length) {
    const Accuracy accuracy = MeasureAccuracy(got, want, reduction_length);
    samples[name + "_max_abs_err"].push_back(accuracy.max_abs_err);
    samples[name + "_max_rel_err"].push_back(accuracy.max_rel_err);
    accuracy_keys.push_back(name + "_max_abs_err");
    accuracy_keys.push_back(name + "_max_rel_err");
    const absl::Status status = CheckAccuracy(name, accuracy);
    if (!status.ok()) {
      fprintf(stderr, "gemm: %s\n", std::string(status.message()).c_str());
      wrong.push_back(name);
    }
  };
  auto is_wrong = [&](const std::string& name) {
    return std::find(wrong.begin(), wrong.end(), name) != wrong.end();
  };
  auto key = [](const Shape& s, const char* variant) {
    return absl::StrCat("gemm_", s.m, "x", s.n, "x", s.k, "_", variant, "_us");
  };
  for (int round = 0; round <= absl::GetFlag(FLAGS_repetitions); ++round) {
    fprintf(stderr, "gemm: round %d of %d%s\n", round, absl::GetFlag(FLAGS_repetitions),
            round == 0 ? " (warm-up)" : "");
    for (const Shape& s : kShapes) {
      std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n);
      for (size_t i = 0; i < a.size(); ++i) a[i] = float(i % 7) - 3;
      for (size_t i = 0; i < b.size(); ++i) b[i] = float(i % 5) - 2;
      const double flops = 2.0 * s.m * s.n * s.k;
      const int calls = std::max(9, int(absl::GetFlag(FLAGS_batch_ms) * 1e6 / (flops / 50.0)));
      const std::vector<double> want =
          round == 0 ? Product64(a, b, s.m, s.n, s.k) : std::vector<double>();
      const std::vector<float> b_t = Transposed(b, s.k, s.n);  // n x k, read transposed
      auto time = [&](const char* variant, auto&& fn) {
        const std::string name = absl::StrCat("gemm_", s.m, "x", s.n, "x", s.k, "_", variant);
        if (round == 0) {
          std::fill(c.begin(), c.end(), NAN);
          fn();
          check(name, c.data(), want, s.k);
        }
        const double us = TimeBatch(calls, fn).median_ns / 1e3;
        if (round > 0 && !is_wrong(name)) samples[key(s, variant)].push_back(us);
      };
      // B (k x n) row-major; then the same product with B stored n x k and
      // read transposed, as x @ W.T reads a Linear weight. oneDNN takes
      // products of 2^21 multiply-adds or more (gemm_ways.h): below, its
      // runtime multiplies by OpenBLAS too.
      for (const auto& [variant, library] :
           {std::pair{"blas", openblas.table()}, {"onednn", onednn.table()}}) {
        const kiln_runtime* lib = library;
        time(variant, [&] {
          lib->gemm_f32(lib->context, s.m, s.n, s.k, 1.0f, a.data(), s.k, 1, b.data(), s.n, 1, 0.0f,
                        c.data(), s.n);
        });
        time(absl::StrCat(variant, "_bt").c_str(), [&] {
          lib->gemm_f32(lib->context, s.m, s.n, s.k, 1.0f, a.data(), s.k, 1, b_t.data(), 1, s.k,
                        0.0f, c.data(), s.n);
        });
      }
      if (s.n <= 1024)
        time("loop", [&] { KilnBenchGemmLoop(a.data(), b.data(), c.data(), s.m, s.n, s.k); });
    }
    for (const PairShape& p : kPairs) {
      std::vector<float> x(p.batch * p.in), w1(p.hidden * p.in), w2(p.in * p.hidden),
          g(p.batch * p.hidden), c(p.batch * p.in);
      for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7) - 3;
      for (size_t i = 0; i < w1.size(); ++i) w1[i] = float(i % 5) - 2;
      for (size_t i = 0; i < w2.size(); ++i) w2[i] = float(i % 3) - 1;
      const double flops = 4.0 * p.batch * p.in * p.hidden;
      const int calls = std::max(9, int(absl::GetFlag(FLAGS_batch_ms) * 1e6 / (flops / 50.0)));
      const std::string name = absl::StrCat("pair_", p.batch, "x", p.in, "x", p.hidden);
      // C = (x . W1T) . W2T in float64, batch x in.
      std::vector<double> want;
      if (round == 0) {
        const std::vector<double> g64 =
            Product64(x, Transposed(w1, p.hidden, p.in), p.batch, p.hidden, p.in);
        const std::vector<float> w2_t = Transposed(w2, p.in, p.hidden);
        want.assign(p.batch * p.in, 0.0);
        for (int64_t i = 0; i < p.batch; ++i) {
          for (int64_t h = 0; h < p.hidden; ++h) {
            for (int64_t j = 0; j < p.in; ++j)
              want[i * p.in + j] += g64[i * p.hidden + h] * w2_t[h * p.in + j];
          }
        }
      }
      auto time = [&](const char* variant, auto&& fn) {
        const std::string figure = absl::StrCat(name, "_", variant);
        if (round == 0) {
          std::fill(c.begin(), c.end(), NAN);
          fn();
          // The transposed variant leaves Cᵀ (in x batch) in c.
          std::vector<float> result = c;
          if (std::string(variant) == "transposed") result = Transposed(c, p.in, p.batch);
          check(figure, result.data(), want, p.in + p.hidden);
        }
        const double us = TimeBatch(calls, fn).median_ns / 1e3;
        if (round > 0 && !is_wrong(figure)) samples[figure + "_us"].push_back(us);
      };
      time("as_written", [&] {  // G = x · W1ᵀ, C = G · W2ᵀ
        rt->gemm_f32(rt->context, p.batch, p.hidden, p.in, 1.0f, x.data(), p.in, 1, w1.data(), 1,
                     p.in, 0.0f, g.data(), p.hidden);
        rt->gemm_f32(rt->context, p.batch, p.in, p.hidden, 1.0f, g.data(), p.hidden, 1, w2.data(),
                     1, p.hidden, 0.0f, c.data(), p.in);
      });
      time("transposed", [&] {  // Gᵀ = W1 · xᵀ, Cᵀ = W2 · Gᵀ
        rt->gemm_f32(rt->context, p.hidden, p.batch, p.in, 1.0f, w1.data(), p.in, 1, x.data(), 1,
                     p.in, 0.0f, g.data(), p.batch);
        rt->gemm_f32(rt->context, p.in, p.batch, p.hidden, 1.0f, w2.data(), p.hidden, 1, g.data(),
                     p.batch, 1, 0.0f, c.data(), p.batch);
      });
    }
  }
  printf(
      "GEMM choices: runtime gemm_f32 (OpenBLAS %s; oneDNN %s; %d thread(s)) vs a "
      "generated-style loop\n",
      MappedLibraries("openblas").c_str(), MappedLibraries("dnnl").c_str(),
      absl::GetFlag(FLAGS_threads));
  printf("%-16s %-22s %26s %26s %26s %26s %26s\n", "m x n x k", "where", "OpenBLAS, B row-major",
         "OpenBLAS, B transposed", "oneDNN, B row-major", "oneDNN, B transposed",
         "loop (FMA, widest vectors)");
  for (const Shape& s : kShapes) {
    std::string line =
        absl::StrFormat("%-16s %-22s", absl::StrCat(s.m, "x", s.n, "x", s.k), s.where);
    for (const char* variant : {"blas", "blas_bt", "onednn", "onednn_bt", "loop"}) {
      const std::optional<Summary> summary = Summarize(samples, key(s, variant));
      keys.push_back(key(s, variant));
      absl::StrAppend(&line, summary ? absl::StrFormat(" %8.2f/%8.2f/%8.2f", summary->min,
                                                       summary->median, summary->max)
                                     : absl::StrFormat(" %26s", "-"));
    }
    printf("%s\n", line.c_str());
  }
  printf("(us per call, min/median/max over %d rounds)\n", absl::GetFlag(FLAGS_repetitions));
  printf(
      "\nLinear pairs, both products: as written (x . W1T, then . W2T) vs transposed "
      "(W1 . xT, then W2 . GT)\n");
  printf("%-10s %-8s %-8s %26s %26s %8s\n", "batch", "in", "hidden", "as written", "transposed",
         "ratio");
  for (const PairShape& p : kPairs) {
    const std::string name = absl::StrCat("pair_", p.batch, "x", p.in, "x", p.hidden);
    std::string line = absl::StrFormat("%-10d %-8d %-8d", p.batch, p.in, p.hidden);
    double medians[2] = {0, 0};
    int k = 0;
    for (const char* variant : {"as_written", "transposed"}) {
      const std::string key = absl::StrCat(name, "_", variant, "_us");
      keys.push_back(key);
      const std::optional<Summary> summary = Summarize(samples, key);
      medians[k++] = summary ? summary->median : 0;
      absl::StrAppend(&line, summary ? absl::StrFormat(" %8.2f/%8.2f/%8.2f", summary->min,
                                                       summary->median, summary->max)
                                     : absl::StrFormat(" %26s", "-"));
    }
    absl::StrAppend(&line,
                    medians[1] > 0 ? absl::StrFormat(" %8.2f", medians[0] / medians[1]) : "");
    printf("%s\n", line.c_str());
  }
  double worst_rel = 0;
  for (const std::string& key : accuracy_keys) {
    if (absl::EndsWith(key, "_max_rel_err")) worst_rel = std::max(worst_rel, samples[key][0]);
  }
  printf(
      "\nEvery result against float64: worst max_rel_err %.3g (bound 16 eps sqrt(K)); %zu wrong\n",
      worst_rel, wrong.size());
  keys.insert(keys.end(), accuracy_keys.begin(), accuracy_keys.end());
  if (absl::GetFlag(FLAGS_json)) {
    printf("%s\n",
           JsonLine(samples, keys,
                    {{"cpu", CpuModel()}, {"openblas_core", BlasCore()}, {"load", LoadAverage()}})
               .c_str());
  }
  return wrong.empty() ? 0 : 1;
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  kiln::bench::PinThreadsOrReexecute(argv, {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}, "gemm");
  absl::ParseCommandLine(argc, argv);
  return kiln::bench::Main();
}
