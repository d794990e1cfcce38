#include "data/jsonl.h"

#include <nlohmann/json.hpp>

namespace elastrain {

namespace {
bool Blank(std::string_view line) { return line.find_first_not_of(" \t\r") == std::string_view::npos; }

const char* TypeName(const nlohmann::json& j) { return j.type_name(); }
}  // namespace

Status ForEachJsonlDocument(const std::string& path, std::string_view content, const std::string& field,
                            int64_t first_line, const std::function<Status(const std::string& text)>& use) {
  std::string_view rest(content);
  if (first_line == 1 && rest.substr(0, 3) == "\xEF\xBB\xBF") rest.remove_prefix(3);
  for (int64_t line_no = first_line; !rest.empty(); ++line_no) {
    const size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (Blank(line)) continue;
    auto where = [&] { return path + ":" + std::to_string(line_no) + ": "; };
    // No exceptions: a parse error is a discarded value.
    nlohmann::json doc = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
    if (doc.is_discarded()) return Status::InvalidArgument(where() + "not valid JSON (expected one object per line)");
    if (!doc.is_object())
      return Status::InvalidArgument(where() + "a JSON " + TypeName(doc) + ", expected an object per line");
    auto it = doc.find(field);
    if (it == doc.end())
      return Status::InvalidArgument(where() + "no field \"" + field + "\" (train_data_columns names the field " +
                                     "that holds the text)");
    if (!it->is_string())
      return Status::InvalidArgument(where() + "field \"" + field + "\" is a " + TypeName(*it) + ", expected a string");
    ELASTRAIN_RETURN_IF_ERROR(use(it->get_ref<const std::string&>()));
  }
  return Status::OK();
}

Result<std::string> JsonlDocumentsText(const std::string& path, const std::string& content, const std::string& field) {
  std::string out;
  out.reserve(content.size());
  ELASTRAIN_RETURN_IF_ERROR(ForEachJsonlDocument(path, content, field, 1, [&](const std::string& text) {
    out += text;
    out.push_back('\n');
    return Status::OK();
  }));
  return out;
}

}  // namespace elastrain
