// The number formats of training (the dtype and weight_dtype config keys, MaxText's
// names). Here, below kernels and the transformer, so that the config names them and the
// compute path can take them without depending on the config.
#pragma once

#include <array>

#include "common/choice.h"

namespace elastrain {

// The format matmuls and activations compute in (MaxText's dtype; its default is
// bfloat16, elastrain's float32).
enum class ComputeDtype { kFloat32, kBfloat16 };
inline constexpr std::array<Choice<ComputeDtype>, 2> kComputeDtypeChoices = {{
    {"float32", ComputeDtype::kFloat32},
    {"bfloat16", ComputeDtype::kBfloat16},
}};
constexpr std::string_view ComputeDtypeName(ComputeDtype d) { return ChoiceWord(kComputeDtypeChoices, d); }

// The format of the master weights and the AdamW state (MaxText's weight_dtype). Only
// float32: a bfloat16 copy, if any, is derived from them for compute; the word table
// exists so that a config's weight_dtype is read, and anything else refused by name.
enum class WeightDtype { kFloat32 };
inline constexpr std::array<Choice<WeightDtype>, 1> kWeightDtypeChoices = {{
    {"float32", WeightDtype::kFloat32},
}};
constexpr std::string_view WeightDtypeName(WeightDtype d) { return ChoiceWord(kWeightDtypeChoices, d); }

}  // namespace elastrain
