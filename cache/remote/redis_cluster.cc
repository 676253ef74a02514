#include "cache/remote/redis_cluster.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kiln {
namespace {

// CRC16-CCITT as XMODEM computes it: polynomial 0x1021, initial value 0,
// most significant bit first, no final xor.
uint16_t Crc16Xmodem(absl::string_view bytes) {
  uint16_t crc = 0;
  for (const char byte : bytes) {
    crc ^= static_cast<uint16_t>(static_cast<uint8_t>(byte)) << 8;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<uint16_t>(crc << 1);
    }
  }
  return crc;
}

std::optional<int> ParsePort(absl::string_view text) {
  int port = 0;
  if (!absl::SimpleAtoi(text, &port) || port <= 0 || port > 65535) return std::nullopt;
  return port;
}

}  // namespace

int KeySlot(absl::string_view key) {
  const size_t open = key.find('{');
  if (open != absl::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    // "{}" tags nothing: the whole key is hashed.
    if (close != absl::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16Xmodem(key) % kRedisClusterSlots;
}

std::optional<RedisEndpoint> ParseClusterEndpoint(absl::string_view text,
                                                  const RedisEndpoint& asked) {
  const size_t colon = text.rfind(':');  // IPv6 hosts have colons of their own
  if (colon == absl::string_view::npos) return std::nullopt;
  const std::optional<int> port = ParsePort(text.substr(colon + 1));
  if (!port) return std::nullopt;
  RedisEndpoint endpoint;
  endpoint.host = colon == 0 ? asked.host : std::string(text.substr(0, colon));
  endpoint.port = *port;
  if (endpoint.host.empty()) return std::nullopt;
  return endpoint;
}

RedisSlotMap::RedisSlotMap() : master_of_slot_(kRedisClusterSlots, -1) {}

absl::StatusOr<RedisSlotMap> RedisSlotMap::Parse(const RedisReply& cluster_slots,
                                                 const RedisEndpoint& asked) {
  if (cluster_slots.type != RedisReply::Type::kArray) {
    return absl::InvalidArgumentError("CLUSTER SLOTS reply is not an array");
  }
  RedisSlotMap map;
  for (size_t i = 0; i < cluster_slots.elements.size(); ++i) {
    const RedisReply& range = cluster_slots.elements[i];
    const auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(
          absl::StrCat("CLUSTER SLOTS reply from ", asked.ToString(), ": range ", i, " ", what));
    };
    if (range.type != RedisReply::Type::kArray || range.elements.size() < 3) {
      return bad("is not [start, end, master, ...]");
    }
    const RedisReply& start = range.elements[0];
    const RedisReply& end = range.elements[1];
    if (start.type != RedisReply::Type::kInteger || end.type != RedisReply::Type::kInteger ||
        start.integer < 0 || start.integer > end.integer || end.integer >= kRedisClusterSlots) {
      return bad("has no valid slot range");
    }
    const RedisReply& node = range.elements[2];
    if (node.type != RedisReply::Type::kArray || node.elements.size() < 2 ||
        (node.elements[0].type != RedisReply::Type::kString &&
         node.elements[0].type != RedisReply::Type::kNil) ||
        node.elements[1].type != RedisReply::Type::kInteger) {
      return bad("has no master [host, port, ...]");
    }
    RedisEndpoint master;
    master.host = node.elements[0].str.empty() ? asked.host : node.elements[0].str;
    if (master.host.empty() || !ParsePort(absl::StrCat(node.elements[1].integer))) {
      return bad("has a master without host or valid port");
    }
    master.port = static_cast<int>(node.elements[1].integer);
    for (int64_t slot = start.integer; slot <= end.integer; ++slot) {
      map.Set(static_cast<int>(slot), master);
    }
  }
  return map;
}

const RedisEndpoint* RedisSlotMap::Find(int slot) const {
  if (slot < 0 || slot >= kRedisClusterSlots || master_of_slot_[slot] < 0) return nullptr;
  return &masters_[master_of_slot_[slot]];
}

void RedisSlotMap::Set(int slot, const RedisEndpoint& master) {
  if (slot < 0 || slot >= kRedisClusterSlots) return;
  master_of_slot_[slot] = static_cast<int16_t>(IndexOf(master));
}

int RedisSlotMap::IndexOf(const RedisEndpoint& master) {
  for (size_t i = 0; i < masters_.size(); ++i) {
    if (masters_[i] == master) return static_cast<int>(i);
  }
  masters_.push_back(master);
  return static_cast<int>(masters_.size()) - 1;
}

std::string RedisSlotMap::ToString() const {
  std::string text;
  int start = 0;
  for (int slot = 1; slot <= kRedisClusterSlots; ++slot) {
    if (slot < kRedisClusterSlots && master_of_slot_[slot] == master_of_slot_[start]) continue;
    if (master_of_slot_[start] >= 0) {
      absl::StrAppend(&text, start, "-", slot - 1, " ", masters_[master_of_slot_[start]].ToString(),
                      "\n");
    }
    start = slot;
  }
  return text;
}

std::optional<RedisRedirect> ParseRedirect(absl::string_view error, const RedisEndpoint& asked) {
  const std::vector<absl::string_view> words = absl::StrSplit(error, ' ');
  if (words.size() != 3) return std::nullopt;
  RedisRedirect redirect;
  if (words[0] == "MOVED") {
    redirect.kind = RedisRedirect::Kind::kMoved;
  } else if (words[0] == "ASK") {
    redirect.kind = RedisRedirect::Kind::kAsk;
  } else {
    return std::nullopt;
  }
  if (!absl::SimpleAtoi(words[1], &redirect.slot) || redirect.slot < 0 ||
      redirect.slot >= kRedisClusterSlots) {
    return std::nullopt;
  }
  std::optional<RedisEndpoint> endpoint = ParseClusterEndpoint(words[2], asked);
  if (!endpoint) return std::nullopt;
  redirect.endpoint = *std::move(endpoint);
  return redirect;
}

}  // namespace kiln
