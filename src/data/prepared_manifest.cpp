#include "data/prepared_manifest.h"

#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "common/files.h"

namespace elastrain {

namespace {

using json = nlohmann::json;

// Hex of at most 16 digits, as HexU64 writes it.
std::optional<uint64_t> ParseHex(const std::string& s) {
  if (s.empty() || s.size() > 16) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return std::nullopt;
    v = v << 4 | static_cast<uint64_t>(d);
  }
  return v;
}

// Typed reads of one object's fields; errors name the file and the field's path.
class Reader {
 public:
  Reader(const json& j, std::string path, std::string where) : j_(j), path_(std::move(path)), where_(std::move(where)) {}

  Status Bad(const std::string& key, const std::string& expected) const {
    return Status::Corruption(path_ + ": " + where_ + key + ": expected " + expected);
  }
  Result<const json*> Field(const std::string& key) const {
    auto it = j_.find(key);
    if (it == j_.end()) return Bad(key, "a field (it is missing)");
    return &*it;
  }
  Result<std::string> String(const std::string& key) const {
    ELASTRAIN_ASSIGN_OR_RETURN(const json* v, Field(key));
    if (!v->is_string()) return Bad(key, "a string");
    return v->get<std::string>();
  }
  Result<int64_t> Count(const std::string& key) const {
    ELASTRAIN_ASSIGN_OR_RETURN(const json* v, Field(key));
    if (!v->is_number_integer() || v->get<int64_t>() < 0) return Bad(key, "an integer >= 0");
    return v->get<int64_t>();
  }
  Result<uint64_t> Hex(const std::string& key) const {
    ELASTRAIN_ASSIGN_OR_RETURN(std::string s, String(key));
    std::optional<uint64_t> v = ParseHex(s);
    if (!v) return Bad(key, "a hex hash of at most 16 digits");
    return *v;
  }
  Result<std::vector<Reader>> Objects(const std::string& key) const {
    ELASTRAIN_ASSIGN_OR_RETURN(const json* v, Field(key));
    if (!v->is_array()) return Bad(key, "an array");
    std::vector<Reader> out;
    for (size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      if (!e.is_object()) return Bad(key + "[" + std::to_string(i) + "]", "an object");
      out.emplace_back(e, path_, where_ + key + "[" + std::to_string(i) + "].");
    }
    return out;
  }
  Result<Reader> Object(const std::string& key) const {
    ELASTRAIN_ASSIGN_OR_RETURN(const json* v, Field(key));
    if (!v->is_object()) return Bad(key, "an object");
    return Reader(*v, path_, where_ + key + ".");
  }
  const json& raw() const { return j_; }

 private:
  const json& j_;
  std::string path_, where_;
};

}  // namespace

std::string PreparedManifestJson(const PreparedManifest& m) {
  json tok = {{"id", m.tokenizer_id},
              {"type", m.tokenizer_type},
              {"path", m.tokenizer_path},
              {"vocab_size", m.vocab_size},
              {"document_token", m.document_token ? json(*m.document_token) : json(nullptr)},
              {"document_token_id", m.document_token_id}};
  json inputs = json::array();
  for (const PreparedInput& i : m.inputs)
    inputs.push_back({{"path", i.path},
                      {"format", i.format},
                      {"bytes", i.bytes},
                      {"xxh3", HexU64(i.hash)},
                      {"documents", i.documents},
                      {"tokens", i.tokens}});
  json shards = json::array();
  for (const PreparedShard& s : m.shards)
    shards.push_back({{"file", s.file}, {"tokens", s.tokens}, {"xxh3", HexU64(s.hash)}});
  json j = {{"elastrain_prepare", kPreparedManifestVersion},
            {"plan", m.plan},
            {"format", "llm.c"},
            {"llmc_version", m.llmc_version},
            {"tokenizer", tok},
            {"text_field", m.text_field},
            {"inputs", inputs},
            {"shards", shards},
            {"tokens", m.tokens},
            {"documents", m.documents},
            {"bytes", m.bytes},
            {"seconds", m.seconds}};
  return j.dump(1) + "\n";
}

Result<PreparedManifest> ParsePreparedManifest(const std::string& text, const std::string& path) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::Corruption(path + ": not a JSON object (expected the manifest `elastrain data prepare` writes)");
  Reader r(j, path, "");
  PreparedManifest m;
  ELASTRAIN_ASSIGN_OR_RETURN(int64_t version, r.Count("elastrain_prepare"));
  if (version != kPreparedManifestVersion)
    return r.Bad("elastrain_prepare", "version " + std::to_string(kPreparedManifestVersion) + ", not " +
                                          std::to_string(version));
  ELASTRAIN_ASSIGN_OR_RETURN(m.plan, r.String("plan"));
  ELASTRAIN_ASSIGN_OR_RETURN(std::string format, r.String("format"));
  if (format != "llm.c") return r.Bad("format", "\"llm.c\"");
  ELASTRAIN_ASSIGN_OR_RETURN(int64_t llmc, r.Count("llmc_version"));
  if (llmc != 1 && llmc != 2) return r.Bad("llmc_version", "1 or 2");
  m.llmc_version = static_cast<int>(llmc);
  ELASTRAIN_ASSIGN_OR_RETURN(Reader tok, r.Object("tokenizer"));
  ELASTRAIN_ASSIGN_OR_RETURN(m.tokenizer_id, tok.String("id"));
  ELASTRAIN_ASSIGN_OR_RETURN(m.tokenizer_type, tok.String("type"));
  ELASTRAIN_ASSIGN_OR_RETURN(m.tokenizer_path, tok.String("path"));
  ELASTRAIN_ASSIGN_OR_RETURN(m.vocab_size, tok.Count("vocab_size"));
  ELASTRAIN_ASSIGN_OR_RETURN(const json* dt, tok.Field("document_token"));
  if (dt->is_string()) {
    m.document_token = dt->get<std::string>();
    ELASTRAIN_ASSIGN_OR_RETURN(m.document_token_id, tok.Count("document_token_id"));
  } else if (!dt->is_null()) {
    return tok.Bad("document_token", "a string or null");
  }
  ELASTRAIN_ASSIGN_OR_RETURN(m.text_field, r.String("text_field"));
  ELASTRAIN_ASSIGN_OR_RETURN(std::vector<Reader> inputs, r.Objects("inputs"));
  for (const Reader& in : inputs) {
    PreparedInput i;
    ELASTRAIN_ASSIGN_OR_RETURN(i.path, in.String("path"));
    ELASTRAIN_ASSIGN_OR_RETURN(i.format, in.String("format"));
    ELASTRAIN_ASSIGN_OR_RETURN(int64_t bytes, in.Count("bytes"));
    i.bytes = static_cast<uint64_t>(bytes);
    ELASTRAIN_ASSIGN_OR_RETURN(i.hash, in.Hex("xxh3"));
    ELASTRAIN_ASSIGN_OR_RETURN(i.documents, in.Count("documents"));
    ELASTRAIN_ASSIGN_OR_RETURN(i.tokens, in.Count("tokens"));
    m.inputs.push_back(std::move(i));
  }
  ELASTRAIN_ASSIGN_OR_RETURN(std::vector<Reader> shards, r.Objects("shards"));
  for (const Reader& sh : shards) {
    PreparedShard s;
    ELASTRAIN_ASSIGN_OR_RETURN(s.file, sh.String("file"));
    // A name in the manifest's own directory: never a path that leads out of it.
    if (s.file.empty() || s.file.find('/') != std::string::npos || s.file == "." || s.file == "..")
      return sh.Bad("file", "a file name in the manifest's directory, not \"" + s.file + "\"");
    ELASTRAIN_ASSIGN_OR_RETURN(s.tokens, sh.Count("tokens"));
    ELASTRAIN_ASSIGN_OR_RETURN(s.hash, sh.Hex("xxh3"));
    m.shards.push_back(std::move(s));
  }
  ELASTRAIN_ASSIGN_OR_RETURN(m.tokens, r.Count("tokens"));
  ELASTRAIN_ASSIGN_OR_RETURN(m.documents, r.Count("documents"));
  ELASTRAIN_ASSIGN_OR_RETURN(int64_t bytes, r.Count("bytes"));
  m.bytes = static_cast<uint64_t>(bytes);
  int64_t sum = 0;
  for (const PreparedShard& s : m.shards) {
    if (s.tokens > (int64_t{1} << 62) - sum) return r.Bad("shards", "token counts that add up");
    sum += s.tokens;
  }
  if (sum != m.tokens)
    return r.Bad("tokens", "the shards' sum " + std::to_string(sum) + ", not " + std::to_string(m.tokens));
  return m;
}

Status CheckPreparedTokenFiles(const std::vector<TokenFileCount>& files, const std::string& tokenizer_id,
                               std::vector<std::string>* notes) {
  namespace fs = std::filesystem;
  std::map<std::string, std::optional<PreparedManifest>> by_dir;  // nullopt: no manifest there
  for (const TokenFileCount& f : files) {
    const std::string dir = fs::path(f.path).parent_path().string();
    auto it = by_dir.find(dir);
    if (it == by_dir.end()) {
      const std::string mpath = (fs::path(dir.empty() ? "." : dir) / kPreparedManifestName).string();
      std::optional<PreparedManifest> m;
      if (!FileExists(mpath) && IsDirectory((fs::path(dir.empty() ? "." : dir) / ".prepare").string()))
        return Status::FailedPrecondition(f.path + ": its directory holds an unfinished `elastrain data prepare` " +
                                          "(.prepare/, no " + kPreparedManifestName +
                                          "): expected the prepare to finish (run it again to resume)");
      if (FileExists(mpath)) {
        ELASTRAIN_ASSIGN_OR_RETURN(std::string text, ReadFile(mpath));
        ELASTRAIN_ASSIGN_OR_RETURN(m, ParsePreparedManifest(text, mpath));
        if (!tokenizer_id.empty() && m->tokenizer_id != tokenizer_id)
          return Status::FailedPrecondition(
              mpath + ": these token files were prepared with tokenizer " + m->tokenizer_id + " (" +
              m->tokenizer_type + " " + m->tokenizer_path + "), the job's tokenizer is " + tokenizer_id +
              ": expected the same tokenizer (set tokenizer_path and tokenizer_type to the prepare's)");
        notes->push_back(mpath + ": " + std::to_string(m->shards.size()) + " shards, " + std::to_string(m->tokens) +
                         " tokens, tokenizer " + m->tokenizer_id +
                         (tokenizer_id.empty() ? " (not checked: no tokenizer_path set)" : " (the job's)"));
      }
      it = by_dir.emplace(dir, std::move(m)).first;
    }
    if (!it->second) continue;
    const PreparedManifest& m = *it->second;
    const std::string name = fs::path(f.path).filename().string();
    const PreparedShard* shard = nullptr;
    for (const PreparedShard& s : m.shards)
      if (s.file == name) shard = &s;
    const std::string mpath = (fs::path(dir.empty() ? "." : dir) / kPreparedManifestName).string();
    if (!shard)
      return Status::FailedPrecondition(f.path + ": not one of the shards " + mpath +
                                        " lists (a file left from another run?): expected only the prepare's shards "
                                        "beside its manifest");
    if (shard->tokens != f.tokens)
      return Status::FailedPrecondition(f.path + ": " + std::to_string(f.tokens) + " tokens, " + mpath + " says " +
                                        std::to_string(shard->tokens));
  }
  return Status::OK();
}

}  // namespace elastrain
