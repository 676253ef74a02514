#include "tools/kiln/json.h"

#include <google/protobuf/util/json_util.h>

namespace kiln {

std::string ToJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  // Printing a valid message cannot fail: only parsing can.
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

}  // namespace kiln
