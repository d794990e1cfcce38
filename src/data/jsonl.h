// JSON Lines documents (what Hugging Face datasets' to_json and most dumps write): one
// JSON object per line, the document's text in one string field (train_data_columns).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace elastrain {

// The text of every document of a .jsonl file's `content`, in line order, each followed
// by "\n": the text the tokenizer then reads as a whole, like a text file. Blank lines
// (spaces, tabs, a "\r" of CRLF) are skipped; a UTF-8 byte-order mark at the start is
// ignored. Any other line that is not a JSON object whose `field` is a string is an
// InvalidArgument naming `path`:LINE and why (a bad line stops the run: a corpus that
// silently loses documents is worse than one that does not load).
Result<std::string> JsonlDocumentsText(const std::string& path, const std::string& content, const std::string& field);

// Each document's text of `content`, lines of a .jsonl file starting at line `first_line`
// (1: the file's start, where a byte-order mark is skipped), handed to `use` in order;
// the same rules and errors as JsonlDocumentsText. `data prepare` reads a file in ranges
// of lines this way.
Status ForEachJsonlDocument(const std::string& path, std::string_view content, const std::string& field,
                            int64_t first_line, const std::function<Status(const std::string& text)>& use);

}  // namespace elastrain
