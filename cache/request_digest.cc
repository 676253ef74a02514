#include "cache/request_digest.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"

namespace kiln {
namespace {

// Length-prefixed, so that no two field sequences hash the same bytes.
void HashField(Sha256& hasher, absl::string_view bytes) {
  const uint64_t length = bytes.size();
  hasher.Update(absl::string_view(reinterpret_cast<const char*>(&length), sizeof(length)));
  hasher.Update(bytes);
}

}  // namespace

std::string DeterministicBytes(const google::protobuf::MessageLite& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&out);
  }
  return bytes;
}

absl::StatusOr<std::string> RequestDigest(const kiln::v1::CompileRequest& request,
                                          const RequestSalts& salts) {
  const auto salt = salts.by_target.find(request.options().target());
  if (salt == salts.by_target.end()) {
    return absl::NotFoundError(absl::StrCat("no request salt for options.target ",
                                            static_cast<int>(request.options().target()),
                                            ": kilnd does not compile for it"));
  }
  Sha256 hasher;
  HashField(hasher, "kiln-request-digest 2");
  HashField(hasher, salt->second);
  HashField(hasher, DeterministicBytes(request.graph()));
  HashField(hasher, DeterministicBytes(request.guards()));
  HashField(hasher, DeterministicBytes(request.options()));
  // Only a respecialization has layouts: other requests keep their digests.
  for (const kiln::v1::InputLayout& layout : request.input_layouts()) {
    HashField(hasher, DeterministicBytes(layout));
  }
  return hasher.HexDigest();
}

RequestSalts DescriptorRequestSalts(const kiln::v1::CacheDescriptor& descriptor) {
  RequestSalts salts;
  for (const kiln::v1::TargetToolchainDigest& entry : descriptor.request_salts()) {
    salts.by_target[entry.target()] = entry.digest();
  }
  return salts;
}

}  // namespace kiln
