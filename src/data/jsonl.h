// JSON Lines documents (what Hugging Face datasets' to_json and most dumps write): one
// JSON object per line, the document's text in one string field (train_data_columns).
#pragma once

#include <string>

#include "common/status.h"

namespace elastrain {

// The text of every document of a .jsonl file's `content`, in line order, each followed
// by "\n": the text the tokenizer then reads as a whole, like a text file. Blank lines
// (spaces, tabs, a "\r" of CRLF) are skipped; a UTF-8 byte-order mark at the start is
// ignored. Any other line that is not a JSON object whose `field` is a string is an
// InvalidArgument naming `path`:LINE and why (a bad line stops the run: a corpus that
// silently loses documents is worse than one that does not load).
Result<std::string> JsonlDocumentsText(const std::string& path, const std::string& content, const std::string& field);

}  // namespace elastrain
