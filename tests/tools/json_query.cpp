// json_query: read fields of JSON for the integration tests (no jq on a fresh machine).
//   json_query PATH < doc.json              the value at PATH, e.g. ranks.1.pid
//   json_query --jsonl FILE [K=V ...] PATH  PATH of every line of FILE whose fields K
//                                           equal V (compared as text), one per line
// PATH is dot-separated; integer parts index arrays; "." alone is the whole value.
// Strings print without quotes; a missing path prints nothing and exits 1.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {
const nlohmann::json* At(const nlohmann::json& j, const std::string& path) {
  const nlohmann::json* cur = &j;
  if (path == ".") return cur;
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '.')) {
    if (cur->is_array()) {
      char* end = nullptr;
      const long i = std::strtol(part.c_str(), &end, 10);
      if (*end || i < 0 || static_cast<size_t>(i) >= cur->size()) return nullptr;
      cur = &(*cur)[i];
    } else if (cur->is_object() && cur->contains(part)) {
      cur = &(*cur)[part];
    } else {
      return nullptr;
    }
  }
  return cur;
}
std::string Text(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }
}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fprintf(stderr, "usage: json_query PATH < doc.json | json_query --jsonl FILE [K=V ...] PATH\n");
    return 2;
  }
  if (args[0] != "--jsonl") {
    std::stringstream buf;
    buf << std::cin.rdbuf();
    auto j = nlohmann::json::parse(buf.str(), nullptr, false);
    const nlohmann::json* v = j.is_discarded() ? nullptr : At(j, args[0]);
    if (!v) return 1;
    std::printf("%s\n", Text(*v).c_str());
    return 0;
  }
  if (args.size() < 3) return 2;
  std::ifstream in(args[1]);
  const std::string path = args.back();
  bool any = false;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    bool match = true;
    for (size_t i = 2; i + 1 < args.size() && match; ++i) {
      const size_t eq = args[i].find('=');
      const nlohmann::json* f = At(j, args[i].substr(0, eq));
      match = f && Text(*f) == args[i].substr(eq + 1);
    }
    if (!match) continue;
    if (const nlohmann::json* v = At(j, path)) {
      std::printf("%s\n", Text(*v).c_str());
      any = true;
    }
  }
  return any ? 0 : 1;
}
