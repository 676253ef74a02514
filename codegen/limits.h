// The limits on what one graph may ask of Kiln.
//
// The daemon is shared: no graph may crash it (a stack overflow, a signed
// overflow turned into a bad allocation) or exhaust it (memory, CPU). Import
// (codegen/import.cc) checks every limit below before any pass runs, and
// each refusal is an InvalidArgument that names the limit, the value and the
// input, node or field. Past import, every pass is linear or near-linear in
// graph size and none recurses by graph size, so these bounds are what keeps
// a compile's time and memory in proportion to its request.
//
// Sizes: the largest tensor is kMaxTensorBytes (and kMaxTensorElements), so
// every element count, stride, offset and byte count that codegen or the
// generated code computes for one tensor fits in int64 with 2^23 to spare,
// and so does a sum of up to 2^22 of them (the scratch arena, its run-time
// slots, kiln_scratch_bytes). Symbolic sizes are products of symbols whose
// values the client learns at run time: it must check the bound values
// against the artifact's RunTimeSizes (RunTimeSizesOf) before kiln_run,
// which holds every tensor of the graph to the same two limits without
// overflowing.
#ifndef KILN_CODEGEN_LIMITS_H_
#define KILN_CODEGEN_LIMITS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "codegen/ir.h"
#include "proto/artifact.pb.h"

namespace kiln::limits {

// Nodes per graph: a 100,000-node pointwise chain fits; a traced transformer
// layer has a few hundred. Decompositions may add nodes past import.
inline constexpr int64_t kMaxNodes = int64_t{1} << 17;
// kilnd's default budget of nodes per graph it compiles (--max_graph_nodes,
// at most kMaxNodes): ten times the largest real models, and what clang
// compiles well within the default compile timeout.
inline constexpr int64_t kDefaultMaxGraphNodes = 50000;
// Graph inputs and graph outputs, each: kiln_run takes them as arrays.
inline constexpr int64_t kMaxInputs = int64_t{1} << 14;
inline constexpr int64_t kMaxOutputs = int64_t{1} << 14;
// Results of one node (split, unbind): each is a value of its own.
inline constexpr int64_t kMaxResultsPerNode = int64_t{1} << 12;
// Bytes in any name or string: the graph's, inputs', nodes', ops',
// arguments', symbols', string arguments. Names reach error messages and
// the generated source's first line.
inline constexpr int64_t kMaxNameLength = 1024;
// Dims per tensor: loop nests and affine maps are rank x rank.
inline constexpr int64_t kMaxRank = 32;
// Elements and bytes per tensor (1 TiB: more than any CPU host holds),
// counting every dim from each dim on, so a zero-size dim cannot hide a
// huge stride. Symbols count as at least 2, their smallest symbolic value.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 40;
// Entries in one list argument (sizes, dims, split sizes, scalars).
inline constexpr int64_t kMaxListLength = int64_t{1} << 12;
// Distinct size symbols per graph, and relations between them.
inline constexpr int64_t kMaxSymbols = 1024;
inline constexpr int64_t kMaxRelations = 1024;
// Terms of one symbolic expression (an argument or a stride): arithmetic on
// them is quadratic in their terms.
inline constexpr int64_t kMaxTermsPerExpression = 64;

// a * b and a + b, or nullopt when the result does not fit in int64. Every
// size computation that a graph can steer goes through these.
inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t result;
  if (__builtin_mul_overflow(a, b, &result)) return std::nullopt;
  return result;
}
inline std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t result;
  if (__builtin_add_overflow(a, b, &result)) return std::nullopt;
  return result;
}

// InvalidArgument "<what> is <length> bytes long, over the limit
// kMaxNameLength = 1024" when `name` is too long. `what` must not contain
// the name itself.
absl::Status CheckNameLength(const std::string& name, const std::string& what);

// `count` of `what` against `limit` (named `limit_name` in the message).
absl::Status CheckCount(int64_t count, int64_t limit, const char* limit_name,
                        const std::string& what);

// A declared type against kMaxRank, kMaxTensorElements and kMaxTensorBytes,
// symbols counted at 2 (their least value), and its strides against
// kMaxTensorElements (a stride past the largest tensor addresses outside
// any storage). `where` names the input or node result.
absl::Status CheckTensorType(const ir::TensorType& type, const ir::Graph& graph,
                             const std::string& where);

// A symbolic expression (an argument or a stride) against
// kMaxTermsPerExpression, its coefficients against kMaxTensorElements and
// each term's symbols against the count a tensor's element count can hold.
absl::Status CheckSymExpr(const ir::SymExpr& expr, const std::string& where);

// The symbolic tensors of `graph` (its canonical form, from PrepareGraph)
// and the limits above, as an artifact's metadata carries them: a client
// checks a call's symbol values against them (abi/run_time_sizes.h
// CheckSymbolValues) after binding symbols and before kiln_run. Values that
// decompositions add (a softmax's exp) are never larger than the graph's
// own, so the canonical graph's tensors cover every loop and buffer of the
// artifact.
kiln::v1::RunTimeSizes RunTimeSizesOf(const ir::Graph& graph);

// CheckSymbolValues(RunTimeSizesOf(graph), symbol_values), with
// `symbol_values[s]` for graph.symbols[s]: InvalidArgument naming the input
// or node result, the dim, the symbols' values and the limit.
absl::Status CheckRunTimeSizes(const ir::Graph& graph, const std::vector<int64_t>& symbol_values);

// The largest value v such that CheckSymbolValues passes with every symbol
// at v — and so with every symbol at any value up to v, since sizes only
// grow with each symbol. A client compares its bound values with it on
// each call and runs the full check only above it (0: always check).
int64_t LargestSafeSymbolValue(const kiln::v1::RunTimeSizes& sizes);

}  // namespace kiln::limits

#endif  // KILN_CODEGEN_LIMITS_H_
