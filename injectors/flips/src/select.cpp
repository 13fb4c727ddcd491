#include "resil/inject/select.hpp"

#include <algorithm>
#include <bit>

namespace resil::inject {

bool is_counter(const ckpt::DatasetInfo& d) {
  if (d.path.starts_with("/meta/") || d.path == "/meta") return true;
  const auto slash = d.path.rfind('/');
  const std::string name = d.path.substr(slash + 1);
  if (name == "num_batches_tracked" || name == "global_step" || name == "iterations") return true;
  if (name == "step" && d.path.starts_with("/optimizer/")) return true;
  const bool integer = d.dtype && !ckpt::dtype_is_float(*d.dtype);
  return integer && d.numel() <= 1;
}

bool flippable(const ckpt::DatasetInfo& d) {
  // Virtual and external-storage data live in other files: never edited (docs/design/ckpt-flip-io.md).
  if (!d.dtype || d.layout == ckpt::Layout::virtual_ || !d.external.empty() || d.numel() == 0) return false;
  // A contiguous dataset never written has no storage: a fault in it makes HDF5 allocate and fill
  // all of it (10^11 f64: 800 GB for one flip). Chunks are allocated one at a time instead.
  return !(d.layout == ckpt::Layout::contiguous && d.stored_bytes == 0 && d.logical_bytes > max_fault_allocation);
}

uint128_t fault_bits(const ckpt::DatasetInfo& d) {
  return flippable(d) ? static_cast<uint128_t>(d.numel()) * ckpt::dtype_bits(*d.dtype) : 0;
}

bool matches_any_path(const Glob& g, const ckpt::DatasetInfo& d) {
  return g.matches(d.path) || std::any_of(d.aliases.begin(), d.aliases.end(), [&](const std::string& p) { return g.matches(p); });
}

std::vector<Target> select(const std::vector<ckpt::DatasetInfo>& datasets, const SelectOptions& opt) {
  std::vector<Tensor> tensors(datasets.size());
  for (std::size_t i = 0; i < datasets.size(); ++i) tensors[i].info = datasets[i];
  return select(tensors, opt);
}

std::vector<Target> select(const std::vector<Tensor>& tensors, const SelectOptions& opt) {
  std::vector<Glob> inc, exc;
  for (const auto& p : opt.include) inc.emplace_back(p);
  for (const auto& p : opt.exclude) exc.emplace_back(p);
  std::vector<Target> out;
  for (const auto& tensor : tensors) {
    const auto& d = tensor.info;
    // Bytes shared by several tensors are one part of the fault space, under their owner.
    if (!flippable(d) || !tensor.shared_with.empty()) continue;
    // A dataset under several paths (hard links) is one target, whichever path names it: it is
    // in a role, included or excluded when any of its paths is (the resil schema's paths, or the
    // role its format's layout gives it).
    auto any_path = [&](auto&& pred) { return pred(d.path) || std::any_of(d.aliases.begin(), d.aliases.end(), pred); };
    const bool model = tensor.role == TensorRole::model || any_path([](const std::string& p) { return p.starts_with("/model/"); });
    const bool optimizer = tensor.role == TensorRole::optimizer || any_path([](const std::string& p) { return p.starts_with("/optimizer/"); });
    if (opt.role == Role::model && !model) continue;
    if (opt.role == Role::optimizer && !optimizer) continue;
    bool included = false;
    for (const auto& g : inc) included = included || matches_any_path(g, d);
    if (!inc.empty() && !included) continue;
    if (!included && (is_counter(d) || tensor.counter)) continue;  // counters only when an --include names them
    bool excluded = false;
    for (const auto& g : exc) excluded = excluded || matches_any_path(g, d);
    if (excluded) continue;
    Target t{d, *d.dtype};
    if (opt.as && ckpt::dtype_size(*opt.as) == ckpt::dtype_size(t.dtype) && !ckpt::dtype_is_float(t.dtype)) t.dtype = *opt.as;
    t.allowed = opt.bits.mask_for(t.dtype);
    t.nbits = static_cast<unsigned>(std::popcount(t.allowed));
    if (t.nbits == 0) continue;
    out.push_back(std::move(t));
  }
  if (out.empty()) {
    std::string why = "the selection matched no dataset with selectable bits";
    if (!opt.include.empty()) why += " (--include";
    for (const auto& p : opt.include) why += " " + p;
    if (!opt.include.empty()) why += ")";
    if (!opt.bits.empty()) why += " (--bits " + opt.bits.text() + ")";
    throw NothingSelectedError(why);
  }
  return out;
}

}  // namespace resil::inject
