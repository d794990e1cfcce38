#include "train/run_summary.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "common/files.h"

namespace elastrain {

Status WriteRunSummary(const TrainSummary& s) {
  nlohmann::json j = {{"steps", s.steps},
                      {"start_step", s.start_step},
                      {"global_batch_size", s.global_batch_size},
                      {"micro_batches_per_step", s.micro_batches_per_step},
                      {"first_loss", s.first_loss},
                      {"final_loss", s.final_loss},
                      {"first_eval_loss", s.first_eval_loss},
                      {"final_eval_loss", s.final_eval_loss},
                      {"tokens_per_sec", s.tokens_per_sec},
                      {"mfu", s.mfu},
                      {"wall_seconds", s.wall_seconds},
                      {"world_size", s.world_size},
                      {"generation", s.generation},
                      {"mesh", s.mesh}};
  return WriteFileAtomic(s.run_dir + "/summary.json", j.dump(2) + "\n");
}

namespace {
// Typed fields of summary.json; the first problem names the file and the field.
class SummaryFields {
 public:
  SummaryFields(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {}
  Status status() const { return st_; }
  // A required integer.
  int64_t Int(const char* key) {
    const nlohmann::json* v = Find(key, true);
    if (v == nullptr) return 0;
    if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX))
      return Fail(key, "expected an integer"), 0;
    return v->get<int64_t>();
  }
  // A required number; null is NaN (how a diverged loss is written).
  double Number(const char* key) {
    const nlohmann::json* v = Find(key, true);
    if (v == nullptr) return 0;
    if (v->is_null()) return std::nan("");
    if (!v->is_number()) return Fail(key, "expected a number"), 0;
    return v->get<double>();
  }
  int64_t OptionalInt(const char* key) { return Find(key, false) ? Int(key) : 0; }
  std::string OptionalString(const char* key) {
    const nlohmann::json* v = Find(key, false);
    if (v == nullptr) return "";
    if (!v->is_string()) return Fail(key, "expected a string"), "";
    return v->get<std::string>();
  }

 private:
  const nlohmann::json* Find(const char* key, bool required) {
    if (!st_.ok()) return nullptr;
    auto it = j_.find(key);
    if (it != j_.end()) return &*it;
    if (required) Fail(key, "missing");
    return nullptr;
  }
  void Fail(const char* key, const std::string& what) {
    if (st_.ok())
      st_ = Status::Corruption(fmt::format("{}: field '{}': {}{}", path_, key, what,
                                           j_.contains(key) ? ", got " + j_[key].dump().substr(0, 40) : ""));
  }
  const nlohmann::json& j_;
  std::string path_;
  Status st_;
};
}  // namespace

Result<TrainSummary> ReadRunSummary(const std::string& run_dir) {
  const std::string path = run_dir + "/summary.json";
  ELASTRAIN_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::Corruption(path + ": not a JSON object (truncated or not a run summary)");
  SummaryFields f(j, path);
  TrainSummary s;
  s.run_dir = run_dir;
  s.steps = f.Int("steps");
  s.start_step = f.OptionalInt("start_step");
  s.global_batch_size = f.Int("global_batch_size");
  s.micro_batches_per_step = f.Int("micro_batches_per_step");
  s.first_loss = f.Number("first_loss");
  s.final_loss = f.Number("final_loss");
  s.first_eval_loss = f.Number("first_eval_loss");
  s.final_eval_loss = f.Number("final_eval_loss");
  s.tokens_per_sec = f.Number("tokens_per_sec");
  s.mfu = f.Number("mfu");
  s.wall_seconds = f.Number("wall_seconds");
  s.world_size = f.OptionalInt("world_size");
  s.generation = f.OptionalInt("generation");
  s.mesh = f.OptionalString("mesh");
  ELASTRAIN_RETURN_IF_ERROR(f.status());
  return s;
}

}  // namespace elastrain
