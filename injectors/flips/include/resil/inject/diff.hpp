// Compare two checkpoints tensor by tensor (torch.save: the tensors torch.load gives, at their
// offsets and strides), streaming bounded slabs of stored words.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "resil/inject/storage.hpp"

namespace resil::inject {

struct DatasetDiff {
  std::string path;
  std::string status = "same";        // same | differ | shape-mismatch | dtype-mismatch | only-in-a | only-in-b | unsupported (not compared)
  /// How the elements were compared: "values" (a dtype ckpt-flip interprets: bits, errors, NaN/Inf),
  /// "bytes" (stored bytes only) or "text" (variable-length values such as HDF5 strings, as the
  /// storage renders them: a verdict, no count); empty when not compared.
  std::string compared;
  bool differing_known = true;        // false for packed sub-byte elements compared a byte at a time
  std::string dtype;
  std::uint64_t numel = 0;
  std::uint64_t differing = 0;        // elements whose stored bits differ
  std::array<std::uint64_t, 64> bit_histogram{};  // differing bit positions (0 = LSB)
  double max_abs_error = 0, max_rel_error = 0;     // over differing finite pairs
  std::uint64_t nan_a = 0, nan_b = 0, inf_a = 0, inf_b = 0;
};

/// Content other than tensors (Storage::other_content) that differs between two files of one format.
struct OtherDiff {
  std::string name;
  std::string status;  // differ | only-in-a | only-in-b | unsupported (a value not rendered: not compared)
  std::string a, b;    // what each file holds under the name (empty: nothing)
  std::string object, attribute;  // an HDF5 attribute's object and name (JSON "object", "attribute")
};

struct DiffReport {
  std::vector<DatasetDiff> datasets;
  std::vector<OtherDiff> others;
  /// Every tensor in both files and "same", and no other content differing: never while one differs
  /// or was not compared.
  bool identical() const noexcept;
  nlohmann::json to_json() const;
};

/// Compare every dataset of `a` and `b` (same paths). Throws on unreadable files.
DiffReport diff(const std::string& a, const std::string& b, Format format = Format::automatic);

}  // namespace resil::inject
