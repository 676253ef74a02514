#include "proto/graph_file.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace kiln {

absl::Status ParseJsonMessage(const std::string& json, const std::string& origin,
                              const std::string& what, google::protobuf::Message& message) {
  const auto status = google::protobuf::util::JsonStringToMessage(json, &message);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": not ", what, " (protobuf JSON): ", status.message().as_string()));
  }
  return absl::OkStatus();
}

absl::Status ReadJsonFile(const std::string& path, const std::string& what,
                          google::protobuf::Message& message) {
  ASSIGN_OR_RETURN(const std::string json, ReadFile(path));
  return ParseJsonMessage(json, path, what, message);
}

std::string PrintJsonMessage(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  // Printing a valid message cannot fail: only parsing can.
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

absl::StatusOr<kiln::v1::Graph> ParseGraphJson(const std::string& json, const std::string& origin) {
  kiln::v1::Graph graph;
  RETURN_IF_ERROR(ParseJsonMessage(json, origin, "a Kiln graph", graph));
  return graph;
}

absl::StatusOr<kiln::v1::Graph> ReadGraphFile(const std::string& path) {
  kiln::v1::Graph graph;
  RETURN_IF_ERROR(ReadJsonFile(path, "a Kiln graph", graph));
  return graph;
}

}  // namespace kiln
