// Graph files: the protobuf JSON mapping of kiln.v1.Graph (see examples/),
// and the JSON files of Kiln's other messages (warmup plans, references).
#ifndef KILN_PROTO_GRAPH_FILE_H_
#define KILN_PROTO_GRAPH_FILE_H_

#include <google/protobuf/message.h>

#include <string>

#include "absl/status/statusor.h"
#include "proto/graph.pb.h"

namespace kiln {

// InvalidArgument naming the file and the parser's complaint for malformed
// JSON or unknown fields; NotFound when the file does not exist.
absl::StatusOr<kiln::v1::Graph> ReadGraphFile(const std::string& path);
absl::StatusOr<kiln::v1::Graph> ParseGraphJson(const std::string& json, const std::string& origin);

// `json` into `message`; InvalidArgument "ORIGIN: not WHAT (protobuf JSON):
// the parser's complaint".
absl::Status ParseJsonMessage(const std::string& json, const std::string& origin,
                              const std::string& what, google::protobuf::Message& message);
// The same for the file at `path`; NotFound when it does not exist.
absl::Status ReadJsonFile(const std::string& path, const std::string& what,
                          google::protobuf::Message& message);

// The JSON text Kiln writes for `message`, in files and --json outputs
// alike: the proto's field names (snake_case: output_types, int_value),
// indented. Parsing takes these and the camelCase JSON names both.
std::string PrintJsonMessage(const google::protobuf::Message& message);

}  // namespace kiln

#endif  // KILN_PROTO_GRAPH_FILE_H_
