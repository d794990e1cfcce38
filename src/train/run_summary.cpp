#include "train/run_summary.h"

#include <exception>

#include <nlohmann/json.hpp>

#include "common/files.h"

namespace elastrain {

Status WriteRunSummary(const TrainSummary& s) {
  nlohmann::json j = {{"steps", s.steps},
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

Result<TrainSummary> ReadRunSummary(const std::string& run_dir) {
  ELASTRAIN_ASSIGN_OR_RETURN(std::string text, ReadFile(run_dir + "/summary.json"));
  TrainSummary s;
  try {
    auto j = nlohmann::json::parse(text);
    s.run_dir = run_dir;
    s.steps = j.at("steps");
    s.global_batch_size = j.at("global_batch_size");
    s.micro_batches_per_step = j.at("micro_batches_per_step");
    s.first_loss = j.at("first_loss");
    s.final_loss = j.at("final_loss");
    s.first_eval_loss = j.at("first_eval_loss");
    s.final_eval_loss = j.at("final_eval_loss");
    s.tokens_per_sec = j.at("tokens_per_sec");
    s.mfu = j.at("mfu");
    s.wall_seconds = j.at("wall_seconds");
    s.world_size = j.value("world_size", int64_t{0});
    s.generation = j.value("generation", int64_t{0});
    s.mesh = j.value("mesh", std::string());
  } catch (const std::exception& e) {
    return Status::Corruption(run_dir + "/summary.json: " + e.what());
  }
  return s;
}

}  // namespace elastrain
