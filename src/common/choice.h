// Fixed vocabularies: the words a config key, a flag or a wire record accepts and the
// enum values they name, in one table per enum, from which the word is both parsed and
// printed (so the two cannot disagree). Tables are constexpr std::arrays of Choice, e.g.
//   inline constexpr std::array<Choice<GemmBackend>, 2> kGemmBackendChoices = {{
//       {"onednn", GemmBackend::kOneDnn}, {"openblas", GemmBackend::kOpenBlas}}};
// This is the one enum<->word mechanism of src/: config keys (config/config_keys.cpp's
// CHOICE), the wire vocabularies (wire/worker_vocab.h, wire/job_state.h, carried in JSON
// by wire/vocab_json.h) and the model family all use it.
//
// A value may have more than one word: the first is its name (printed, and listed in
// errors); the later ones are aliases that only parse (MaxText's decoder_block llama2 for
// llama). An empty word ("") names a "not set" value; it parses but is not listed.
// Words are string literals, so ChoiceWord(...).data() is a NUL-terminated C string.
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

// The word of `value` (its first); every value of the enum has one in its table, "?"
// only for a value outside the enum.
template <typename E, size_t N>
constexpr std::string_view ChoiceWord(const std::array<Choice<E>, N>& table, E value) {
  for (const Choice<E>& c : table)
    if (c.value == value) return c.word;
  return "?";
}

// The words, for error messages: "onednn, openblas". Aliases and the empty word are left
// out.
template <typename E, size_t N>
std::string ChoiceList(const std::array<Choice<E>, N>& table) {
  std::string list;
  for (size_t i = 0; i < N; ++i) {
    if (table[i].word.empty() || table[i].word != ChoiceWord(table, table[i].value)) continue;
    if (!list.empty()) list += ", ";
    list += table[i].word;
  }
  return list;
}

// The error text for a word not in the table: "<subject>: expected one of <list>", where
// the subject names the key or record and the word ("log_level=verbose", "exit kind 'x'").
template <typename E, size_t N>
std::string ChoiceRefusal(const std::array<Choice<E>, N>& table, std::string_view subject) {
  return std::string(subject) + ": expected one of " + ChoiceList(table);
}

}  // namespace elastrain
