// Byte-level text for language models: a corpus in the fortune format (records separated by lines
// holding a single '%', as Debian's `fortunes` package ships them), split into training and
// validation text, and cut into fixed windows of tokens. A token is a byte (vocabulary 256): no
// tokenizer to download or version, and every input is representable.
//
// The split is a pure function of the files: records are numbered in file order (files sorted by
// name), and record r goes to validation when r % 10 == 9 (10 %), to training otherwise. Each
// record keeps its text and is followed by its separator line "%\n" in its stream, so a model
// learns where a fortune ends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace resil::data {

/// Debian 12's `fortunes` package (scripts/setup.sh installs it).
inline constexpr const char* default_text_dir = "/usr/share/games/fortunes";

/// Every `valid_every`-th record (index % valid_every == valid_every - 1) is validation text.
inline constexpr std::size_t valid_every = 10;

struct TextCorpus {
  std::vector<std::uint8_t> train, valid;  // the two byte streams
  std::size_t files = 0;                   // fortune files read
  std::size_t records = 0;                 // non-empty records over both streams
};

/// Read a corpus: a directory (every regular file F that has a strfile index F.dat beside it, in
/// name order: the fortune databases of the directory) or one text file in the fortune format.
/// Empty records (two separators in a row) are skipped. IoError for a missing or unreadable path;
/// CorruptInputError naming the path when it holds no fortune file, or too few records to give
/// both streams text (fewer than valid_every).
TextCorpus load_text(const std::filesystem::path& path);

/// Windows of `seq` + 1 tokens (inputs and the next-token targets) that fit `bytes` tokens, taken
/// without overlap: window i starts at token i * seq, so consecutive windows share one token
/// (the last target of one is the first input of the next). 0 when `bytes` <= seq.
std::size_t text_windows(std::size_t bytes, int seq);

/// The empirical n-gram baselines of a split, in bits per byte: a model that predicts each token
/// of `valid` from counts over `train` (unigram: the byte's frequency; bigram: given the previous
/// byte), both with add-one smoothing over the 256 values, so unseen bytes cost finite bits.
struct NgramBaselines {
  double unigram_bpb = 0.0, bigram_bpb = 0.0;
};
NgramBaselines ngram_baselines(const std::vector<std::uint8_t>& train, const std::vector<std::uint8_t>& valid);

}  // namespace resil::data
