// The fixed-choice options of ckpt-train as types. Each enum has one name table: the names on the
// command line, in the checkpoint's /meta config JSON and in summaries are read and written
// through it, so the files keep the strings they always had.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/train/optimizer.hpp"

namespace resil::train {

enum class ModelKind { mlp, cnn, dlrm, gpt };
enum class DeviceKind { cpu, cuda, automatic };  // "auto": cuda when a GPU is present
enum class ReduceKind { automatic, host, nccl };  // "auto": nccl when usable, else host
enum class Precision { fp32, bf16 };  // bf16: mixed precision (bf16 compute, fp32 master weights and moments)
// --optimizer is OptimizerKind (optimizer.hpp); --parallel is ckpt::ParallelMode (none | dp | mp | tp), the mode the checkpoint records.

template <class E>
struct Names;  // Names<E>::table: the (name, value) pairs of E, in the order help texts list them

template <>
struct Names<ModelKind> {
  static constexpr std::array<std::pair<std::string_view, ModelKind>, 4> table{
      {{"mlp", ModelKind::mlp}, {"cnn", ModelKind::cnn}, {"dlrm", ModelKind::dlrm}, {"gpt", ModelKind::gpt}}};
};
template <>
struct Names<ckpt::ParallelMode> {
  // "pp" (pipeline parallel) is another name of mp: the mode is recorded as "mp"
  static constexpr std::array<std::pair<std::string_view, ckpt::ParallelMode>, 5> table{
      {{"none", ckpt::ParallelMode::none}, {"dp", ckpt::ParallelMode::dp}, {"mp", ckpt::ParallelMode::mp}, {"tp", ckpt::ParallelMode::tp},
       {"pp", ckpt::ParallelMode::mp}}};
};
template <>
struct Names<DeviceKind> {
  static constexpr std::array<std::pair<std::string_view, DeviceKind>, 3> table{
      {{"cpu", DeviceKind::cpu}, {"cuda", DeviceKind::cuda}, {"auto", DeviceKind::automatic}}};
};
template <>
struct Names<ReduceKind> {
  static constexpr std::array<std::pair<std::string_view, ReduceKind>, 3> table{
      {{"auto", ReduceKind::automatic}, {"host", ReduceKind::host}, {"nccl", ReduceKind::nccl}}};
};
template <>
struct Names<Precision> {
  static constexpr std::array<std::pair<std::string_view, Precision>, 2> table{{{"fp32", Precision::fp32}, {"bf16", Precision::bf16}}};
};
template <>
struct Names<OptimizerKind> {
  static constexpr std::array<std::pair<std::string_view, OptimizerKind>, 4> table{
      {{"sgd", OptimizerKind::sgd}, {"adam", OptimizerKind::adam}, {"adagrad", OptimizerKind::adagrad}, {"adamw", OptimizerKind::adamw}}};
};

/// The name of `v` (every value has one).
template <class E>
std::string name(E v) {
  for (const auto& [n, e] : Names<E>::table)
    if (e == v) return std::string(n);
  return {};
}

/// The value named `s`; nullopt for a name not in the table.
template <class E>
std::optional<E> from_name(std::string_view s) {
  for (const auto& [n, e] : Names<E>::table)
    if (n == s) return e;
  return std::nullopt;
}

/// The table as a map, for CLI::CheckedTransformer.
template <class E>
std::map<std::string, E> name_map() {
  std::map<std::string, E> m;
  for (const auto& [n, e] : Names<E>::table) m.emplace(std::string(n), e);
  return m;
}

}  // namespace resil::train
