// A training step's line of <run>/metrics.jsonl, and what the chief that appends to the
// file must know of the lines already there. The line is carried across generations
// (CarriedState::line) because the rank that logs a step may die after the step's update
// and before the line: a survivor, which applied the same update, hands the line to the
// next generation's chief (Trainer::RecoverStepLine). Every completed step that
// log_period selects gets exactly one line, never two: a step redone after a restore from
// an older checkpoint already has its line.
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace elastrain {

// Every field is 8 bytes and the struct is trivially copyable, so a rank can broadcast
// it as int64 words.
struct StepLine {
  int64_t step = 0;  // steps done, 1-based as metrics.jsonl counts; 0: no line
  double loss = 0, lr = 0, grad_norm = 0;
  double step_time = 0, comm_time = 0, checkpoint_stall = 0, checkpoint_wait = 0;
  double tokens_per_sec = 0, mfu = 0;
  int64_t generation = 0, world_size = 0;
  double time = 0;       // seconds since the logging process's generation began
  double wall_time = 0;  // seconds since the epoch
  nlohmann::json ToJson() const;
};

// The newest steps the lines of `text` (the tail of a metrics.jsonl) hold: training lines
// (`loss`) and eval lines (`eval_loss`). The text is read back, not trusted: a line that
// is not a JSON object, lacks an integer `step` in [0, max_step] or is cut off at the
// start is skipped. -1: no such line.
struct LoggedSteps {
  int64_t train = -1, eval = -1;
};
LoggedSteps NewestLoggedSteps(std::string_view text, int64_t max_step);

}  // namespace elastrain
