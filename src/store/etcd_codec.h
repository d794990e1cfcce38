// Encoding for etcd v3's JSON gateway (internal to store/): keys and values travel as
// base64 (proto `bytes`), int64 fields as JSON strings, and absent fields mean 0 or empty
// (proto3 omits defaults).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace elastrain {

// RFC 4648 with padding, what grpc-gateway uses for `bytes`.
std::string Base64Encode(std::string_view in);
// Also accepts the URL-safe alphabet; nullopt on a character outside the alphabet or a
// dangling single digit.
std::optional<std::string> Base64Decode(std::string_view in);

// etcd's prefix convention: range_end is the prefix with its last byte incremented
// (trailing 0xff bytes dropped first); "\0" means "to the end of the keyspace".
std::string PrefixEnd(std::string prefix);
// etcd rejects an empty key, so "every key" is the range ["\0", "\0"-meaning-end).
std::string PrefixStart(const std::string& prefix);

// int64 fields arrive as strings ("42"); absent means 0.
int64_t Int(const nlohmann::json& obj, const char* field);
// A string field; absent means "".
std::string Str(const nlohmann::json& obj, const char* field);
// For messages: keys are text in practice, but a binary byte must not garble a log line.
std::string Printable(const std::string& s);

}  // namespace elastrain
