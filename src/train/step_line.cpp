#include "train/step_line.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace elastrain {

nlohmann::json StepLine::ToJson() const {
  return {{"step", step},
          {"loss", loss},
          {"lr", lr},
          {"grad_norm", grad_norm},
          {"step_time", step_time},
          {"comm_time", comm_time},
          {"checkpoint_stall", checkpoint_stall},
          {"checkpoint_wait", checkpoint_wait},
          {"tokens_per_sec", tokens_per_sec},
          {"mfu", mfu},
          {"generation", generation},
          {"world_size", world_size},
          {"time", time},
          {"wall_time", wall_time}};
}

LoggedSteps NewestLoggedSteps(std::string_view text, int64_t max_step) {
  LoggedSteps out;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    const auto j = nlohmann::json::parse(text.begin() + begin, text.begin() + end, nullptr, false);
    begin = end + 1;
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    const int64_t step = j["step"].get<int64_t>();
    if (step < 0 || step > max_step) continue;
    // NaN is written as null: a line with "loss": null is still the step's line.
    if (j.contains("loss")) out.train = std::max(out.train, step);
    if (j.contains("eval_loss")) out.eval = std::max(out.eval, step);
  }
  return out;
}

}  // namespace elastrain
