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

}  // namespace elastrain
