// Graph files: the protobuf JSON mapping of kiln.v1.Graph (see examples/).
#ifndef KILN_COMMON_GRAPH_FILE_H_
#define KILN_COMMON_GRAPH_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/graph.pb.h"

namespace kiln {

// InvalidArgument naming the file and the parser's complaint for malformed
// JSON or unknown fields; NotFound when the file does not exist.
absl::StatusOr<kiln::v1::Graph> ReadGraphFile(const std::string& path);
absl::StatusOr<kiln::v1::Graph> ParseGraphJson(const std::string& json, const std::string& origin);

}  // namespace kiln

#endif  // KILN_COMMON_GRAPH_FILE_H_
