#include "common/graph_file.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace kiln {

absl::StatusOr<kiln::v1::Graph> ParseGraphJson(const std::string& json, const std::string& origin) {
  kiln::v1::Graph graph;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &graph);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": not a Kiln graph (protobuf JSON): ", status.message().as_string()));
  }
  return graph;
}

absl::StatusOr<kiln::v1::Graph> ReadGraphFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string json, ReadFile(path));
  return ParseGraphJson(json, path);
}

}  // namespace kiln
