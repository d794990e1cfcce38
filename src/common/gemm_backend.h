// Which BLAS library computes float GEMMs (kernels/gemm.h). Here, below kernels, so that
// the config (gemm_backend) names it without depending on the kernels.
#pragma once

#include <array>

#include "common/choice.h"

namespace elastrain {

enum class GemmBackend { kOneDnn, kOpenBlas };

inline constexpr std::array<Choice<GemmBackend>, 2> kGemmBackendChoices = {{
    {"onednn", GemmBackend::kOneDnn},
    {"openblas", GemmBackend::kOpenBlas},
}};

constexpr std::string_view GemmBackendName(GemmBackend b) { return ChoiceWord(kGemmBackendChoices, b); }

// The type GEMMs compute in (MaxText's `dtype`): float32, or bfloat16 operands with
// float32 accumulation and results (kernels/gemm_bf16.h). Master weights, optimizer
// state and every other kernel stay float32 either way (`weight_dtype`).
enum class ComputeDtype { kFloat32, kBfloat16 };

inline constexpr std::array<Choice<ComputeDtype>, 2> kComputeDtypeChoices = {{
    {"float32", ComputeDtype::kFloat32},
    {"bfloat16", ComputeDtype::kBfloat16},
}};

constexpr std::string_view ComputeDtypeName(ComputeDtype d) { return ChoiceWord(kComputeDtypeChoices, d); }

}  // namespace elastrain
