// Specializing a graph on the wire format, with no op table: the symbol
// values that input sizes give, and the graph with symbols made constants
// (a static bucket, or a symbol run at 0 or 1). Clients build their static
// specializations' requests with it; kilnd's re-typing for new input
// layouts (codegen/retype.h) builds on it.
#ifndef KILN_PROTO_SPECIALIZE_H_
#define KILN_PROTO_SPECIALIZE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "proto/graph.pb.h"

namespace kiln {

// Whether `dims` are the `declared` ones, symbol for symbol.
bool SameDims(const google::protobuf::RepeatedPtrField<kiln::v1::Dim>& declared,
              const std::vector<kiln::v1::Dim>& dims);

// The value each symbol takes at these input sizes (input i's dims, in
// order): size / multiplier for every input dim that names a symbol and
// divides whole.
std::map<std::string, int64_t> SymbolValues(const kiln::v1::Graph& graph,
                                            const std::vector<std::vector<int64_t>>& input_sizes);

// `graph` with every dim and symbolic argument naming a symbol in `values`
// (or a symbol the graph states equal to one) made constant: a static
// specialization, such as a symbolic graph's size-1 version. Relations on
// the fixed symbols go.
kiln::v1::Graph Specialize(kiln::v1::Graph graph, std::map<std::string, int64_t> values);

// Symbolic arguments (a view to [8, S, 32]) with the symbols in `values`
// replaced by their values.
void FixSymbolicArguments(kiln::v1::Graph& graph, const std::map<std::string, int64_t>& values);

// Drops the relations naming a symbol that no input size uses any more.
void DropRelationsOfLostSymbols(kiln::v1::Graph& graph);

}  // namespace kiln

#endif  // KILN_PROTO_SPECIALIZE_H_
