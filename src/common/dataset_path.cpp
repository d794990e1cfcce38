#include "common/dataset_path.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace elastrain {

namespace {
std::vector<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// The whole word is a number (strtod's syntax: "0.7", "1e-3", "inf", "nan").
bool ReadNumber(const std::string& word, double* v) {
  if (word.empty()) return false;
  char* end = nullptr;
  *v = std::strtod(word.c_str(), &end);
  return end == word.c_str() + word.size();
}

// `text` names a file or directory as a whole ("2024 notes.txt"): one path, not a blend.
bool ExistsWhole(const std::string& text) {
  std::error_code ec;
  return std::filesystem::exists(text, ec);
}

bool BlendForm(const std::vector<std::string>& words) {
  if (words.size() < 2 || words.size() % 2 != 0) return false;
  double v;
  for (size_t i = 0; i < words.size(); i += 2)
    if (!ReadNumber(words[i], &v) || ReadNumber(words[i + 1], &v)) return false;
  return true;
}
}  // namespace

bool IsDatasetBlend(const std::string& text) { return BlendForm(Words(text)) && !ExistsWhole(text); }

Result<std::vector<WeightedPath>> ParseDatasetPath(const std::string& text) {
  const std::vector<std::string> words = Words(text);
  if (words.empty()) return std::vector<WeightedPath>{};
  if (!BlendForm(words) || ExistsWhole(text)) return std::vector<WeightedPath>{{1.0, text}};
  std::vector<WeightedPath> out;
  for (size_t i = 0; i < words.size(); i += 2) {
    double w = 0;
    ReadNumber(words[i], &w);
    if (!(std::isfinite(w) && w > 0))
      return Status::InvalidArgument("dataset_path=\"" + text + "\": weight " + words[i] + " of " + words[i + 1] +
                                     " must be a positive finite number (a blend is \"W1 PATH1 W2 PATH2 ...\")");
    out.push_back({w, words[i + 1]});
  }
  return out;
}

}  // namespace elastrain
