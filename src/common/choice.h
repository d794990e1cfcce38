// Fixed vocabularies: the words a config key or flag accepts and the enum values they
// name, in one table per enum, from which the word is both parsed and printed (so the
// two cannot disagree). Tables are constexpr std::arrays of Choice, e.g.
//   inline constexpr std::array<Choice<GemmBackend>, 2> kGemmBackendChoices = {{
//       {"onednn", GemmBackend::kOneDnn}, {"openblas", GemmBackend::kOpenBlas}}};
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace elastrain {

template <typename E>
struct Choice {
  std::string_view word;
  E value;
};

// The value `word` names (exact, case-sensitive match); nullopt when none does.
template <typename E, size_t N>
constexpr std::optional<E> ParseChoice(const std::array<Choice<E>, N>& table, std::string_view word) {
  for (const Choice<E>& c : table)
    if (c.word == word) return c.value;
  return std::nullopt;
}

// The word of `value`; every value of the enum has one in its table.
template <typename E, size_t N>
constexpr std::string_view ChoiceWord(const std::array<Choice<E>, N>& table, E value) {
  for (const Choice<E>& c : table)
    if (c.value == value) return c.word;
  return "?";
}

// The words, for error messages: "onednn, openblas".
template <typename E, size_t N>
std::string ChoiceList(const std::array<Choice<E>, N>& table) {
  std::string list;
  for (const Choice<E>& c : table) {
    if (!list.empty()) list += ", ";
    list += c.word;
  }
  return list;
}

}  // namespace elastrain
